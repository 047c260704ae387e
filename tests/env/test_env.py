"""The verifiers adapter without vf-eval: taskset loading, the key staying on the host, the
reward on real traces, and the shared tool server's tools on a real exactgrade Sandbox."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

import deeplearning_env
import pytest
import pytorch_env
import scaling_env
import verifiers.v1 as vf
from sandbox_leftovers import wait_for
from verifiers.v1.configs.agent import AgentConfig
from verifiers.v1.graph import MessageNode
from verifiers.v1.trace import AgentInfo, Trace, TraceTask

from exactgrade import wire
from exactgrade.dataset import build_domain, load_split
from exactgrade.env.keys import lookup
from exactgrade.env.state import SandboxState
from exactgrade.env.taskset import (
    EXACT_VALUES,
    TENSORS,
    ExactgradeTaskConfig,
    ExactgradeTasksetConfig,
    HarnessFailure,
    system_prompt,
)
from exactgrade.env.toolset import SandboxToolset, SandboxToolsetConfig
from exactgrade.policy import AllClose, Exact, RelTol
from exactgrade.values import TensorValue

TASKSETS = {"scaling": scaling_env.ScalingTaskset, "pytorch": pytorch_env.PytorchTaskset,
            "deeplearning": deeplearning_env.DeeplearningTaskset}


@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh build of the three datasets (a local path is a supported dataset_name)."""
    out = tmp_path_factory.mktemp("datasets")
    for domain in TASKSETS:
        build_domain(domain, out)
    return out


def load(domain: str, dataset_dir: Path, **config) -> list:
    return list(TASKSETS[domain](ExactgradeTasksetConfig(dataset_name=str(dataset_dir), **config)))


def trace_for(task, state: SandboxState, tool_calls: list[tuple[str, str]] = ()) -> Trace:
    trace = Trace(task=TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
                  state=state, agent=AgentInfo(config=AgentConfig()))
    for i, (name, arguments) in enumerate(tool_calls):
        call = vf.ToolCall(id=f"call_{i}", name=name, arguments=arguments)
        trace.nodes.append(MessageNode(message=vf.AssistantMessage(tool_calls=[call]), sampled=True))
    return trace


def score(task, trace: Trace) -> float:
    return asyncio.run(task.correctness(trace))


@pytest.mark.parametrize("domain", list(TASKSETS))
def test_taskset_loads_every_row_and_keeps_the_key_off_taskdata(domain: str, dataset_dir: Path) -> None:
    rows = load_split(domain, dataset_name=str(dataset_dir))
    tasks = load(domain, dataset_dir)
    assert [t.data.id for t in tasks] == list(rows["task_id"])
    fields = set(type(tasks[0].data).model_fields)
    assert not fields & {"expected", "expected_output", "policy", "answer"}
    for task, row in zip(tasks, rows, strict=True):
        assert task.key == row["task_id"]
        answer = lookup(task.source, task.data.id)
        assert task.data.system_prompt == system_prompt(answer.expected, answer.policy)
        assert task.data.level == 1 and task.data.family is not None  # the canonical tasks are level 1
        assert row["prompt"].strip() in task.data.prompt
        assert task.data.inputs == row["inputs"]
        dumped = task.data.model_dump_json()
        if len(row["expected_output"]) > 24:  # short keys like {"rows":[1]} can occur by coincidence
            assert json.dumps(row["expected_output"])[1:-1] not in dumped


def test_the_key_is_found_on_the_host_from_taskdata_alone(dataset_dir: Path) -> None:
    task = load("scaling", dataset_dir)[3]
    row = load_split("scaling", dataset_name=str(dataset_dir))[3]
    rebuilt = type(task)(type(task.data).model_validate(task.data.model_dump()), task.config)
    assert lookup(rebuilt.source, rebuilt.data.id).expected == wire.decode(row["expected_output"])


@pytest.mark.parametrize(("config", "message"), [
    ({"system_prompt": "/tmp/other.txt"}, "set each task's system prompt"),
    ({"max_turns": 0}, "max_turns must be >= 1"),
    ({"task": {"rewards": {"correctness": {"fn": "builtins:len"}}}}, "grade with `correctness` only"),
])  # fmt: skip
def test_grading_and_prompts_are_not_configurable(config: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ExactgradeTasksetConfig.model_validate(config)


FRACTION = __import__("fractions").Fraction
TENSOR = TensorValue("float32", (1,), (0.5,))


@pytest.mark.parametrize(("expected", "policy", "exact", "tensors"), [
    ({"rows": [{"bound": "memory", "time_s": FRACTION(1, 3)}]}, RelTol(1e-9), False, False),  # floats pass
    ({"rows": [{"batch": 4, "time_s": FRACTION(1, 3)}]}, RelTol(1e-9), True, False),  # an int needs an int
    (FRACTION(7, 4), Exact(), True, False),
    ({"bits": __import__("sympy").log(3)}, Exact(), True, False),
    ({"out": TENSOR, "shape": [2, 3]}, AllClose(), True, True),
    ({"out": TENSOR, "loss": 0.25}, AllClose(), False, True),
    ({"ok": True, "name": "x"}, Exact(), False, False),  # categorical only: no numeric convention
])  # fmt: skip
def test_the_system_prompt_states_only_the_conventions_that_apply(expected, policy, exact, tensors) -> None:
    text = system_prompt(expected, policy)
    assert (EXACT_VALUES in text, TENSORS in text) == (exact, tensors)
    assert text.startswith("You solve quantitative") and text.endswith("no tool call.")


def test_max_turns_reaches_the_task_config() -> None:
    assert ExactgradeTasksetConfig(max_turns=3).task.max_turns == 3
    assert ExactgradeTasksetConfig.model_validate({"task": {"max_turns": 2}}).max_turns == 2
    both = ExactgradeTasksetConfig.model_validate({"max_turns": 4, "task": {"max_turns": 2}})
    assert both.task.max_turns == 4
    assert ExactgradeTaskConfig().max_turns == 5


def test_reward_grades_the_read_back_result(dataset_dir: Path) -> None:
    task = load("deeplearning", dataset_dir)[0]
    expected = lookup(task.source, task.data.id).expected
    code = [("execute_code", json.dumps({"code": "result = 1"}))]

    right = trace_for(task, SandboxState(result_wire=wire.encode(expected), tool_calls=1), code)
    assert score(task, right) == 1.0
    assert right.info["reason"] == "passed"

    wrong = trace_for(task, SandboxState(result_wire=wire.encode({"rows": ["nope"]}), tool_calls=1), code)
    assert score(task, wrong) == 0.0
    assert wrong.info["path"].startswith("rows")
    assert wrong.info["reason"] and "scoring_error" not in wrong.info

    unset = trace_for(task, SandboxState())
    assert score(task, unset) == 0.0
    assert unset.info["reason"] == "`result` was never set"

    refused = SandboxState(result_error="cannot encode a value of type T", tool_calls=1)
    ungradeable = trace_for(task, refused, code)
    assert score(task, ungradeable) == 0.0
    assert "not a gradeable value" in ungradeable.info["reason"]


@pytest.mark.parametrize(("state", "calls", "message"), [
    (SandboxState(result_wire='{"rows":[1]}', sandbox_error="sandbox died: killed", tool_calls=1),
     [("execute_code", '{"code": "x"}')], "sandbox died"),
    (SandboxState(result_wire='{"rows":[1]}', tool_calls=1),
     [("execute_code", '{"code": "x"}'), ("bash", '{"command": "ls"}')], "handled 1 of 2 tool calls"),
    (SandboxState(result_wire='{"rows": [1', tool_calls=0), [], "read-back refused on the host"),
])  # fmt: skip
def test_harness_failures_raise_and_are_recorded(dataset_dir: Path, state: SandboxState, calls: list,
                                                 message: str) -> None:
    task = load("scaling", dataset_dir)[0]
    trace = trace_for(task, state, calls)
    with pytest.raises(HarnessFailure, match=message):
        score(task, trace)
    assert message in trace.info["scoring_error"]


def test_malformed_tool_calls_are_not_counted_as_unhandled(dataset_dir: Path) -> None:
    task = load("scaling", dataset_dir)[0]
    calls = [("execute_code", "not json"), ("python", '{"code": "1"}'), ("bash", '{"cmd": "ls"}')]
    assert score(task, trace_for(task, SandboxState(), calls)) == 0.0


class ToolServer:
    """The shared tool server's tools called directly, one rollout's state at a time."""

    def __init__(self) -> None:
        self.toolset = SandboxToolset(SandboxToolsetConfig())

    async def call(self, state: SandboxState, tool: str, text: str) -> str:
        return await self.toolset.call_for(state, tool, text)


def test_tools_share_one_persistent_sandbox_with_inputs_preloaded() -> None:
    async def scenario() -> tuple[list[str], SandboxState]:
        server = ToolServer()
        state = SandboxState(inputs_wire=wire.encode({"n": 6}), profile="python")
        outputs = [await server.call(state, "execute_code", "result = {'rows': [n * 7]}\nprint('set')"),
                   await server.call(state, "bash", "echo hello > note.txt && cat note.txt"),
                   await server.call(state, "execute_code", "print(open('note.txt').read().strip(), result)")]
        await server.toolset.close()
        return outputs, state

    outputs, state = asyncio.run(scenario())
    assert outputs[0].strip() == "set"
    assert outputs[1].strip() == "hello"
    assert outputs[2].strip() == "hello {'rows': [42]}"
    assert wire.decode(state.result_wire) == {"rows": [42]}
    assert state.tool_calls == 3 and state.sandbox_error is None and state.sandbox_seconds > 0


def _kill_the_zygote(state: SandboxState) -> None:
    """The host kills the sandbox's zygote between two calls, and its sandbox goes with it: a
    harness death. Waited for, not timed: the next call finds the sandbox gone on any machine."""
    from exactgrade.sandbox import backends, uids

    for zygote in list(backends._zygotes.values()):
        os.kill(zygote.process.pid, signal.SIGKILL)
        zygote.process.wait()
    assert state.sandbox_uid is not None
    wait_for(lambda: not uids.processes_of(state.sandbox_uid), "the sandbox to go with its zygote")


# (the model's code, what the host does after it, which state field the next call leaves set, a word
# of it, a word of the reward's verdict)
OUTCOMES = [
    ("import os\nresult = {'rows': [1]}\nos._exit(0)", None, "model_fault", "the sandbox worker exited",
     "reason"),
    ("result = {'rows': [1]}\nx = bytearray(2 << 30)", None, "model_fault", "ran out of memory", "reason"),
    ("import _eginside.worker as w\n"
     "w.Worker.encode_result = lambda self: {'ok': True, 'wire': '{\"$frac\": 1}'}",
     None, "model_fault", "read-back refused", "reason"),
    ("class Sly:\n    def __eq__(self, o):\n        return True\nresult = {'rows': [Sly()]}", None,
     "result_error", "cannot encode", "reason"),
    ("result = {'rows': [1]}", _kill_the_zygote, "sandbox_error", "zygote died", "scoring_error"),
]


@pytest.mark.parametrize(("code", "host", "field", "word", "verdict"), OUTCOMES,
                         ids=["exit", "memory", "forged read-back", "ungradeable", "zygote killed"])
def test_deaths_the_model_causes_and_the_harness_causes_are_told_apart(dataset_dir: Path, code: str, host,
                                                                       field: str, word: str,
                                                                       verdict: str) -> None:
    """The real tool server and sandbox, then the real reward: the model's deaths score 0 with their
    reason (`ok: true`); the harness's raise HarnessFailure (verifiers marks them `ok: false`)."""

    async def scenario() -> tuple[str, SandboxState]:
        server = ToolServer()
        state = SandboxState(inputs_wire=wire.encode({}), profile="python")
        await server.call(state, "execute_code", code)
        if host is not None:
            host(state)
        after = await server.call(state, "execute_code", "print('still here')")
        await server.toolset.close()
        return after, state

    after, state = asyncio.run(scenario())
    fields = {"model_fault": state.model_fault, "result_error": state.result_error,
              "sandbox_error": state.sandbox_error}
    assert {name for name, value in fields.items() if value is not None} == {field}, fields
    assert word in fields[field]
    # the call after the death tells the model it has no sandbox ("died" or "is gone")
    assert after.startswith("error: the sandbox ") == (field != "result_error"), after
    task = load("scaling", dataset_dir)[0]
    trace = trace_for(task, state, [("execute_code", json.dumps({"code": code}))] * 2)
    if verdict == "scoring_error":
        with pytest.raises(HarnessFailure, match=word):
            score(task, trace)
    else:
        assert score(task, trace) == 0.0
        assert word in trace.info["reason"] and "scoring_error" not in trace.info


@pytest.mark.parametrize(("turns", "stopped"), [(2, False), (3, True)])
def test_max_turns_stop(dataset_dir: Path, turns: int, stopped: bool) -> None:
    task = load("scaling", dataset_dir, max_turns=3)[0]
    trace = trace_for(task, SandboxState(), [("execute_code", '{"code": "1"}')] * turns)
    assert asyncio.run(task.max_turns_reached(trace)) is stopped


def test_a_rollout_whose_sandbox_was_lost_is_flagged_not_given_a_fresh_one(dataset_dir: Path) -> None:
    task = load("scaling", dataset_dir)[0]

    async def scenario() -> tuple[str, SandboxState]:
        state = SandboxState(inputs_wire=task.data.inputs, profile="python")
        crashed = ToolServer()  # the worker that held the sandbox dies (here: closes it)
        await crashed.call(state, "execute_code", "result = {'rows': [1]}")
        await crashed.toolset.close()
        restarted = ToolServer()
        output = await restarted.call(state, "execute_code", "print(result)")
        await restarted.toolset.close()
        return output, state

    output, state = asyncio.run(scenario())
    assert output.startswith("error: this rollout's sandbox (uid ") and "was lost" in output
    assert state.sandbox_error == output.removeprefix("error: ") and state.tool_calls == 2
    trace = trace_for(task, state, [("execute_code", '{"code": "1"}')] * 2)
    with pytest.raises(HarnessFailure, match="was lost"):
        score(task, trace)


def test_finalize_records_the_outcome_a_replay_grades(dataset_dir: Path) -> None:
    task = load("scaling", dataset_dir)[0]
    answer = lookup(task.source, task.data.id).expected
    live = SandboxState(result_wire=wire.encode(answer), tool_calls=1, sandbox_seconds=0.5, sandbox_uid=61234)
    trace = trace_for(task, live, [("execute_code", '{"code": "1"}')])
    asyncio.run(task.finalize(trace, None))
    assert trace.info["sandbox"] == {"result_wire": live.result_wire, "result_error": None, "tool_calls": 1,
                                     "sandbox_seconds": 0.5, "sandbox_uid": 61234, "sandbox_error": None,
                                     "model_fault": None, "check_wire": None}
    saved = Trace.model_validate_json(trace.model_dump_json())  # what traces.jsonl keeps: no state
    assert saved.state == vf.State() and saved.info["sandbox"] == trace.info["sandbox"]
    replayed = trace_for(task, SandboxState(), [("execute_code", '{"code": "1"}')])
    replayed.info = saved.info
    assert score(task, replayed) == 1.0 and replayed.info["reason"] == "passed"
    assert asyncio.run(task.tool_calls(replayed)) == 1.0


def test_a_correct_result_then_a_self_inflicted_death_scores_zero_after_finalize(dataset_dir: Path) -> None:
    """The recorded outcome keeps the model's fault: grading the copy must not reward the result
    the rollout left before it killed its own sandbox (live and replayed)."""
    task = load("scaling", dataset_dir)[0]
    answer = lookup(task.source, task.data.id).expected
    live = SandboxState(result_wire=wire.encode(answer), tool_calls=1,
                        model_fault="the model's code ended its sandbox: killed by SIGKILL")
    trace = trace_for(task, live, [("execute_code", '{"code": "1"}')])
    asyncio.run(task.finalize(trace, None))
    assert score(task, trace) == 0.0 and "killed by SIGKILL" in trace.info["reason"]
    replayed = trace_for(task, SandboxState(), [("execute_code", '{"code": "1"}')])
    replayed.info = Trace.model_validate_json(trace.model_dump_json()).info
    assert score(task, replayed) == 0.0 and "killed by SIGKILL" in replayed.info["reason"]


def test_the_gold_check_fails_when_the_key_does_not_match_the_reference(dataset_dir: Path) -> None:
    from exactgrade.env import keys

    task = load("scaling", dataset_dir)[1]
    assert asyncio.run(task.validate(None)) is True
    right = lookup(task.source, task.data.id)
    keys.record(task.source, {task.data.id: keys.AnswerKey({"rows": []}, right.policy)})
    try:
        assert asyncio.run(task.validate(None)) is False
    finally:
        keys.record(task.source, {task.data.id: right})


def test_keys_load_once_when_rollouts_of_a_fresh_worker_grade_at_once() -> None:
    """Two threads loading one dataset at once race in the `datasets` progress bars (seen: a replay's
    reward raised); keys.lookup loads each source once, under a lock."""
    import subprocess
    import sys

    code = ("import threading; from exactgrade.env import keys; found = []; "
            "look = lambda i: found.append(keys.lookup(('scaling', 'train', None), f'sc-{i:03d}').policy); "
            "threads = [threading.Thread(target=look, args=(i,)) for i in range(6)]; "
            "[t.start() for t in threads]; [t.join() for t in threads]; print(len(found))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "6", done.stderr[-2000:]
