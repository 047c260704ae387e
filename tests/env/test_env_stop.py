"""The tool server under a real `vf-eval` (subprocess runtime, scripted policy server): SIGTERM
to it mid-eval leaves nothing of its sandboxes, and a crash of its worker costs at most the
rollouts in flight; every other rollout is graded as usual."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_leftovers import (
    HANG_GUARD,
    alive,
    children,
    held_uids,
    leftovers,
    stop_like_verifiers,
    tool_server,
    wait_for,
)

from exactgrade.demo import vf_eval_command
from exactgrade.sandbox.backends import probe
from exactgrade.scripted.server import serve

TASKS, CONCURRENCY = 10, 4


def episodes(out: Path) -> list[dict]:
    """The saved rollouts (an episode whose rollout failed before its agent ran has no trace)."""
    path = out / "run" / "traces.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [json.loads(line) for line in lines if line.strip()]


@pytest.fixture(scope="module")
def reference_url() -> Iterator[str]:
    httpd = serve("reference")
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def start_eval(url: str, out: Path, backend: str) -> subprocess.Popen:
    command = vf_eval_command("scaling-env", "reference", url, out, "run", limit=TASKS,
                              concurrency=CONCURRENCY, extra=("--env.taskset.tools.backend", backend))
    return subprocess.Popen(command, stdout=(out / "vf-eval.log").open("w"), stderr=subprocess.STDOUT)


def busy_worker(vf_eval: subprocess.Popen, out: Path, done: int, seen: set[int]) -> tuple[int, int]:
    """(supervisor, worker) once the worker holds a sandbox and `done` rollouts are saved;
    every uid the worker held meanwhile is added to `seen`."""
    def ready():
        found = tool_server(vf_eval.pid)
        if found is None:
            return None
        held = held_uids(found[1])
        seen.update(held)
        return found if held and children(found[1]) and len(episodes(out)) >= done else None

    return wait_for(ready, "a worker holding sandboxes")


@pytest.mark.parametrize("backend", ["landlock", "namespaces"])
def test_sigterm_to_the_tool_server_mid_eval_leaves_nothing(reference_url: str, tmp_path: Path,
                                                            backend: str) -> None:
    if probe().unavailable(backend):
        pytest.skip(f"{backend}: {probe().unavailable(backend)}")
    vf_eval = start_eval(reference_url, tmp_path, backend)
    try:
        seen: set[int] = set()
        supervisor, worker = busy_worker(vf_eval, tmp_path, 0, seen)
        zygotes = children(worker)
        seen |= held_uids(worker)
        # stopping, not its speed, is tested (a benchmark measures it against verifiers' STOP_GRACE)
        assert stop_like_verifiers(supervisor, grace=HANG_GUARD) is not None, "not stopped after SIGTERM"
        assert not alive(worker)
        assert leftovers(seen) == {}
        wait_for(lambda: not any(alive(z) for z in zygotes), "the zygotes to exit")
        # The rest of the eval only retries a server that is gone: stop it rather than wait it out.
        vf_eval.terminate()
        vf_eval.wait(HANG_GUARD)
    finally:
        if vf_eval.poll() is None:
            vf_eval.kill()
    for episode in episodes(tmp_path):  # stopped mid-eval: a rollout passed or is flagged, never 0
        assert episode["ok"] is False or episode["traces"][0]["rewards"]["correctness"]["score"] == 1.0


def test_a_crashed_tool_server_costs_only_the_rollouts_in_flight(reference_url: str, tmp_path: Path) -> None:
    vf_eval = start_eval(reference_url, tmp_path, "auto")
    try:
        seen: set[int] = set()
        _, worker = busy_worker(vf_eval, tmp_path, 2, seen)
        os.kill(worker, signal.SIGKILL)
        assert vf_eval.wait(HANG_GUARD) == 0
    finally:
        if vf_eval.poll() is None:
            vf_eval.kill()
    saved = episodes(tmp_path)
    assert len(saved) == TASKS
    passed = [e["traces"][0] for e in saved
              if e["ok"] and e["traces"][0]["rewards"]["correctness"]["score"] == 1.0]
    lost = [e for e in saved if not e["ok"]]
    assert len(passed) + len(lost) == TASKS  # flagged as harness failures, never scored as wrong answers
    assert len(lost) <= CONCURRENCY, [e["errors"] for e in lost]
    assert leftovers(seen | {t["info"]["sandbox"]["sandbox_uid"] for t in passed}) == {}
