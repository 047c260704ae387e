"""The scripted policy server: OpenAI-compatible wire format, task identification from the
environment's prompt, mutants that can never pass, and escape detection."""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Iterator

import pytest

from exactgrade import compare, tasks
from exactgrade.env.taskset import user_prompt
from exactgrade.scripted.policies import adversarial_script, escaped, mutant_script, reference_script
from exactgrade.scripted.server import find_task, load_catalog, serve
from exactgrade.task import domain_module, run_program


@pytest.fixture(scope="module")
def catalog() -> list:
    return load_catalog()


def test_every_task_is_identified_from_the_prompt_the_environment_shows(catalog: list) -> None:
    for task in tasks():
        shown = user_prompt({"prompt": task.prompt, "api_description": task.api_description})
        found = find_task(catalog, f"{shown}\n")
        assert found is not None and found.task_id == task.id
    assert find_task(catalog, "What is 2 + 2?") is None


def test_reference_script_sends_the_reference_program(catalog: list) -> None:
    entry = catalog[0]
    (step,) = reference_script(entry.program).steps
    assert step.tool == "execute_code" and step.arguments == {"code": entry.program}


def test_no_mutant_passes_and_every_mutant_is_a_gradeable_value(catalog: list) -> None:
    """Run every task's mutant program (trusted code: the reference plus a known edit) and grade it."""
    by_id = {entry.task_id: entry for entry in catalog}
    for task in tasks():
        entry = by_id[task.id]
        script = mutant_script(entry.program, entry.index, entry.policy)
        (step,) = script.steps
        actual = run_program(step.arguments["code"], task.inputs, domain_module(task.domain).PROFILE)
        verdict = compare(task.expected, actual, task.policy)
        assert not verdict.ok, f"{task.id}: mutant {script.kind} passed"
        assert verdict.reason


def test_adversarial_scripts_never_leave_the_plain_reference_answer(catalog: list) -> None:
    kinds = set()
    for entry in catalog:
        script = adversarial_script(entry.program, entry.index, "/canary", 1)
        kinds.add(script.kind)
        codes = [s.arguments.get("code", "") for s in script.steps]
        if entry.program in codes:  # the correct answer only ever comes with a sandbox kill after it
            assert script.kind == "correct_then_kill" and "os._exit" in codes[-1]
    assert kinds == {"read_key", "escape", "forge_equal", "forge_protocol", "crash", "memory_bomb",
                     "correct_then_kill"}


@pytest.mark.parametrize(("output", "why"), [
    ("secret-123 found", "the host canary reached the model"),
    ('{"task_id": "sc-000", "expected_output": "{}"}', "an answer-key file reached the model"),
    ("cat: /canary: No such file or directory", None),
])  # fmt: skip
def test_escape_detection(output: str, why: str | None) -> None:
    assert escaped(output, "secret-123") == why


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    canary = tmp_path_factory.mktemp("canary") / "canary.txt"
    canary.write_text("secret-canary-42")
    httpd = serve("reference", canary_file=canary)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def post(url: str, body: dict) -> bytes:
    request = urllib.request.Request(f"{url}/v1/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.read()


TOOLS = [{"type": "function", "function": {"name": name, "parameters": {}}}
         for name in ("execute_code", "bash")]


def test_models_endpoint(server: str) -> None:
    with urllib.request.urlopen(f"{server}/v1/models", timeout=30) as response:
        assert json.loads(response.read())["data"][0]["id"] == "reference"


def test_streaming_tool_call_then_final_message(server: str, catalog: list) -> None:
    entry = catalog[5]
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": entry.prompt}]
    raw = post(server, {"model": "reference", "messages": messages, "tools": TOOLS, "stream": True,
                        "stream_options": {"include_usage": True}}).decode()
    events = [line.removeprefix("data: ") for line in raw.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    (call,) = chunks[0]["choices"][0]["delta"]["tool_calls"]
    assert call["function"]["name"] == "execute_code"
    assert json.loads(call["function"]["arguments"]) == {"code": entry.program}
    assert chunks[1]["choices"][0]["finish_reason"] == "tool_calls"
    assert "usage" in chunks[-1]

    messages += [{"role": "assistant", "tool_calls": [call]},
                 {"role": "tool", "tool_call_id": call["id"], "content": "ok"}]
    final = json.loads(post(server, {"model": "reference", "messages": messages, "tools": TOOLS}))
    assert final["choices"][0]["finish_reason"] == "stop"
    assert final["choices"][0]["message"]["content"].startswith("Done")


def test_unknown_prompt_and_escapes_are_reported(server: str) -> None:
    messages = [{"role": "user", "content": "no such task"},
                {"role": "tool", "tool_call_id": "c1", "content": "leaked secret-canary-42"}]
    reply = json.loads(post(server, {"model": "reference", "messages": messages, "tools": TOOLS}))
    assert reply["choices"][0]["message"]["content"] == "I cannot identify this task."
    with urllib.request.urlopen(f"{server}/stats", timeout=30) as response:
        stats = json.loads(response.read())
    assert stats["unknown_prompts"] >= 1
    assert stats["escapes"] == [{"task_id": "?", "why": "the host canary reached the model"}]
