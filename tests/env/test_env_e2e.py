"""End to end: real `vf-eval` (subprocess runtime, offline, --no-push) on a sample of each
environment's tasks against the scripted policy server; assertions on traces.jsonl."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sandbox_leftovers import leftovers

from exactgrade.demo import _verdicts, classify, read_traces, summarize, vf_eval_command
from exactgrade.sandbox import backends
from exactgrade.scripted.policies import adversarial_script, script_index
from exactgrade.scripted.server import serve

# (policy, env, task positions): reference and mutant on two tasks of every environment; the
# adversarial attacks whose own code kills the sandbox (positions 4 and 6: crash,
# correct_then_kill) on the torch-profile environment, where the sandbox is a zygote child.
RUNS = [("reference", env, "0,1") for env in ("scaling-env", "pytorch-env", "deeplearning-env")] + \
       [("mutant", env, "0,1") for env in ("scaling-env", "pytorch-env", "deeplearning-env")] + \
       [("adversarial", "pytorch-env", "4,6")]  # fmt: skip


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict]]:
    out = tmp_path_factory.mktemp("vf-eval")
    canary = out / "canary.txt"
    canary.write_text("e2e-canary-7f3a")
    servers = {policy: serve(policy, canary_file=canary) for policy in ("reference", "mutant", "adversarial")}
    for httpd in servers.values():
        threading.Thread(target=httpd.serve_forever, daemon=True).start()

    def run(policy: str, env: str, idx: str) -> subprocess.CompletedProcess:
        url = f"http://127.0.0.1:{servers[policy].server_address[1]}/v1"
        command = vf_eval_command(env, policy, url, out / policy, env, concurrency=2,
                                  extra=("--select.include.idx", idx))
        return subprocess.run(command, capture_output=True, text=True, timeout=600,
                              env={**os.environ, "EXACTGRADE_CANARY": "e2e-canary-7f3a"})

    with ThreadPoolExecutor(max_workers=4) as pool:
        done = list(pool.map(lambda spec: run(*spec), RUNS))
    for spec, result in zip(RUNS, done, strict=True):
        assert result.returncode == 0, f"{spec}: {result.stdout[-2000:]}{result.stderr[-2000:]}"
    stats = {policy: httpd.model.stats() for policy, httpd in servers.items()}
    for httpd in servers.values():
        httpd.shutdown()
        httpd.server_close()
    yield out, stats


def traces(out: Path, policy: str, env: str) -> list[dict]:
    found = read_traces(out / policy / env / "traces.jsonl")
    assert len(found) == 2, f"{policy} {env}: {len(found)} traces"
    return found


@pytest.mark.parametrize("env", ["scaling-env", "pytorch-env", "deeplearning-env"])
def test_reference_scores_one_through_the_whole_path(outputs: tuple[Path, dict], env: str) -> None:
    for trace in traces(outputs[0], "reference", env):
        assert trace["ok"] and not trace["errors"], trace["errors"]
        assert trace["rewards"]["correctness"] == {"score": 1.0, "weight": 1.0}
        assert {k: trace["info"][k] for k in ("reason", "path")} == {"reason": "passed", "path": "value"}
        sandbox = trace["info"]["sandbox"]
        assert sandbox["tool_calls"] == 1 and sandbox["sandbox_error"] is None
        assert trace["metrics"]["tool_calls"] == 1.0 and trace["metrics"]["turns"] == 2.0
        assert trace["metrics"]["sandbox_seconds"] > 0
        assert sorted(tool["name"] for tool in trace["tools"]) == ["bash", "execute_code"]


@pytest.mark.parametrize("env", ["scaling-env", "pytorch-env", "deeplearning-env"])
def test_mutants_score_zero_with_a_reason(outputs: tuple[Path, dict], env: str) -> None:
    for trace in traces(outputs[0], "mutant", env):
        assert trace["ok"] and not trace["errors"], trace["errors"]
        assert trace["rewards"]["correctness"]["score"] == 0.0
        assert trace["info"]["reason"] not in ("", "passed") and trace["info"]["path"].startswith("rows")
        assert "scoring_error" not in trace["info"]


def test_a_sandbox_the_model_killed_scores_zero_with_the_death_and_is_not_voided(
        outputs: tuple[Path, dict]) -> None:
    """Trainers drop `ok: false` rollouts: a policy must not be able to void its own by crashing."""
    found = traces(outputs[0], "adversarial", "pytorch-env")
    kinds = {adversarial_script("", script_index(t["task"]["data"]["id"]), "", 0).kind: t for t in found}
    assert set(kinds) == {"crash", "correct_then_kill"}
    for kind, why in (("crash", "killed by SIGKILL"), ("correct_then_kill", "exit status 0")):
        trace = kinds[kind]
        assert trace["ok"] is True and not trace["errors"], trace["errors"]
        assert trace["rewards"]["correctness"] == {"score": 0.0, "weight": 1.0}
        assert "scoring_error" not in trace["info"]
        reason = trace["info"]["reason"]
        assert reason.startswith("the model's code ended its sandbox: the sandbox worker exited")
        if backends.probe().unavailable("namespaces") is None:  # the default backend's init reports
            assert why in reason and "its init reported" in reason


def test_nothing_of_a_finished_runs_sandboxes_is_left(outputs: tuple[Path, dict]) -> None:
    used = {trace["info"]["sandbox"]["sandbox_uid"]
            for policy, env, _ in RUNS for trace in traces(outputs[0], policy, env)}
    assert len(used) >= 2 and None not in used
    assert leftovers(used) == {}  # no cgroup, process or work dir of any of them


@pytest.mark.parametrize(("policy", "env"), [("mutant", "scaling-env"), ("reference", "pytorch-env")])
def test_vf_replay_reproduces_every_reward_reason_and_metric(outputs: tuple[Path, dict], tmp_path: Path,
                                                           policy: str, env: str) -> None:
    done = subprocess.run(["vf-replay", str(outputs[0] / policy / env), "--no-rich", "-o", str(tmp_path),
                           "--run.dir", "replay"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    by_id = {t["task"]["data"]["id"]: t for t in traces(outputs[0], policy, env)}
    replayed = read_traces(tmp_path / "traces.jsonl")
    assert sorted(t["task"]["data"]["id"] for t in replayed) == sorted(by_id)
    for trace in replayed:
        saved = by_id[trace["task"]["data"]["id"]]
        for field in ("rewards", "info", "metrics"):
            assert trace[field] == saved[field], (field, trace["task"]["data"]["id"])


def test_no_escape_and_every_prompt_identified(outputs: tuple[Path, dict]) -> None:
    for stats in outputs[1].values():
        assert stats["escapes"] == [] and stats["unknown_prompts"] == 0


def test_demo_tallies_and_verdicts_on_the_real_traces(outputs: tuple[Path, dict], tmp_path: Path) -> None:
    out = outputs[0]
    results = [summarize(policy, env, out / policy / env) for policy, env, _ in RUNS]
    for result in results:
        result.escapes = outputs[1][result.label]["escapes"]
    totals = {(r.label, r.env): (sum(t.passed for t in r.by_category.values()),
                                 sum(t.wrong for t in r.by_category.values()),
                                 sum(t.flagged for t in r.by_category.values())) for r in results}
    assert totals[("reference", "scaling-env")] == (2, 0, 0)
    assert totals[("mutant", "deeplearning-env")] == (0, 2, 0)
    assert totals[("adversarial", "pytorch-env")] == (0, 2, 0)
    assert {a: (t.wrong, t.flagged) for a, t in results[-1].by_attack.items()} == {
        "crash": (1, 0), "correct_then_kill": (1, 0)}
    assert results[-1].voided_self_kills == []
    assert _verdicts(results) == [
        "PASS reference: 6/6 scored 1.0 (116 expected for the full run; 6 selected)",
        "PASS mutant: 0/6 passed, 0 escapes, 0 harness failures flagged",
        "PASS adversarial: 0/2 passed, 0 escapes, 0 harness failures flagged",
    ]
    # the same rollouts, had the harness voided them (the old behaviour): the demo must fail
    harness_error = {"ok": False, "errors": [{"type": "TaskError"}], "info": {"scoring_error": "died"}}
    adversarial = read_traces(out / "adversarial" / "pytorch-env" / "traces.jsonl")
    voided = [{**trace, **harness_error} for trace in adversarial]
    (tmp_path / "traces.jsonl").write_text(json.dumps({"traces": voided}) + "\n")
    relabelled = summarize("adversarial", "pytorch-env", tmp_path)
    assert sorted(relabelled.voided_self_kills) == sorted(t["task"]["data"]["id"] for t in voided)
    assert _verdicts([relabelled])[0].startswith(
        "FAIL adversarial: 0/2 passed, 0 escapes, 2 harness failures flagged, self-killed sandboxes voided")
    trace = read_traces(out / "reference" / "scaling-env" / "traces.jsonl")[0]
    assert classify({**trace, "rewards": {"correctness": {"score": 0.0, "weight": 1.0}},
                     "info": {"reason": "rows[0]: differs"}}) == ("wrong", "rows[0]: differs")
