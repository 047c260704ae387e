"""End to end, every answer mode on every environment id: real `vf-eval` (subprocess runtime, offline,
--no-push) against the scripted `rotate` policy, whose three rollouts of each task play the reference,
the mutant and the adversarial policy in turn (one vf-eval per mode and id keeps the suite short).
Tools mode on the three dataset ids is tests/env/test_env_e2e.py's; here it runs on the three streams."""

from __future__ import annotations

import os
import re
import subprocess
import threading
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from exactgrade.demo import read_traces, vf_eval_command
from exactgrade.scripted.policies import ROTATION
from exactgrade.scripted.server import serve

DATASETS = ("scaling-env", "pytorch-env", "deeplearning-env")
STREAMS = tuple(f"{env}-stream" for env in DATASETS)
RUNS = [(mode, env) for mode in ("code", "text") for env in DATASETS + STREAMS] + [
    ("tools", env) for env in STREAMS
]
TASKS = 2
"""Tasks per run, each answered three times (ROTATION)."""
PLAYED = re.compile(r"^(?:Policy: (\w+) \(|Done \((\w+): )")


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict]]:
    out = tmp_path_factory.mktemp("vf-eval-modes")
    canary = out / "canary.txt"
    canary.write_text("e2e-modes-canary-52c1")
    httpd = serve("rotate", canary_file=canary)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"

    def run(mode: str, env: str) -> subprocess.CompletedProcess:
        extra = ("--env.taskset.answer-mode", mode)
        if env in STREAMS:  # the scripted policy finds a generated task by its id line
            extra += ("--env.taskset.show-task-id", "True")
        command = vf_eval_command(
            env,
            "rotate",
            url,
            out / mode,
            env,
            limit=TASKS,
            concurrency=3,
            rollouts=len(ROTATION),
            extra=extra,
        )
        return subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=900,
            env={**os.environ, "EXACTGRADE_CANARY": "e2e-modes-canary-52c1"},
        )

    try:
        with ThreadPoolExecutor(max_workers=3) as pool:
            done = list(pool.map(lambda spec: run(*spec), RUNS))
        stats = httpd.model.stats()
    finally:
        httpd.shutdown()
        httpd.server_close()
    for spec, result in zip(RUNS, done, strict=True):
        assert result.returncode == 0, f"{spec}: {result.stdout[-2000:]}{result.stderr[-2000:]}"
    yield out, stats


def played(trace: dict) -> str:
    """Which policy the rollout played: the scripted model's last message says."""
    last = [node["message"] for node in trace["nodes"] if node["message"]["role"] == "assistant"][-1]
    match = PLAYED.match(last.get("content") or "")
    assert match is not None, last
    return match.group(1) or match.group(2)


@pytest.mark.parametrize(("mode", "env"), RUNS)
def test_reference_passes_mutant_and_adversarial_fail_nothing_flagged(outputs, mode: str, env: str) -> None:
    traces = read_traces(outputs[0] / mode / env / "traces.jsonl")
    assert len(traces) == TASKS * len(ROTATION)
    by_task = defaultdict(list)
    for trace in traces:
        policy = played(trace)
        by_task[trace["task"]["data"]["id"]].append(policy)
        assert trace["task"]["data"]["answer_mode"] == mode
        assert trace["ok"] and not trace["errors"] and "scoring_error" not in trace["info"], trace["errors"]
        score, reason = trace["rewards"]["correctness"]["score"], trace["info"]["reason"]
        assert (score, reason == "passed") == ((1.0, True) if policy == "reference" else (0.0, False)), (
            trace["task"]["data"]["id"],
            policy,
            reason,
        )
        if mode != "tools":
            assert trace["tools"] == [] and trace["metrics"]["turns"] == 1.0
    assert len(by_task) == TASKS
    assert all(sorted(policies) == sorted(ROTATION) for policies in by_task.values()), by_task


def test_no_escape_and_every_prompt_identified(outputs) -> None:
    assert outputs[1]["escapes"] == [] and outputs[1]["unknown_prompts"] == 0


@pytest.mark.parametrize(("mode", "env"), [("code", "pytorch-env"), ("text", "scaling-env-stream")])
def test_vf_replay_reproduces_every_one_turn_reward_reason_and_metric(outputs, tmp_path: Path, mode: str,
                                                                     env: str) -> None:
    """vf-replay re-scores a saved one-turn run without a model or a sandbox (code mode: from the
    sandbox outcome finalize saved) and gets every reward, reason and metric the live run got."""
    done = subprocess.run(["vf-replay", str(outputs[0] / mode / env), "--no-rich", "-o", str(tmp_path),
                           "--run.dir", "replay"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    def rollout(trace: dict) -> tuple[str, str]:
        return trace["task"]["data"]["id"], played(trace)

    saved = {rollout(t): t for t in read_traces(outputs[0] / mode / env / "traces.jsonl")}
    replayed = {rollout(t): t for t in read_traces(tmp_path / "traces.jsonl")}
    assert sorted(replayed) == sorted(saved) and len(saved) == TASKS * len(ROTATION)
    for key, trace in replayed.items():
        for field in ("rewards", "info", "metrics"):
            assert trace[field] == saved[key][field], (key, field)
