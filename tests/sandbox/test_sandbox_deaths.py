"""Whose failure ended a sandbox, against the real backends: every death the
model's own code can cause is the model's (a wrong answer), every other one the harness's (a
flagged failure). A policy that could make its deaths look like the harness's would void its
own bad rollouts."""

from __future__ import annotations

import os
import signal
from dataclasses import replace
from pathlib import Path

import pytest
from sandbox_leftovers import FOREVER, alive, on_mark, wait_for, work_file, worker_pid

from exactgrade.sandbox import Limits, Sandbox, SandboxDied

BACKENDS = ("namespaces", "landlock")
# Work that must finish gets 60 s of its own time (calltime.py: a loaded host does not spend it); a
# limit that must fire stays small, and a spin is its own time, loaded host or not, long before the
# wall-clock cap. A storm of at most 8 processes reaches its limit in a few forks, long before 1 s.
LIMITS = Limits(call_timeout=60, memory_bytes=256 << 20)
FIRES = replace(LIMITS, call_timeout=1, wall_factor=30)
STORM = replace(FIRES, max_processes=8)
MARK_THEN_SLEEP = f"open('started', 'w').close()\nimport time\ntime.sleep({FOREVER})"
"""Says the call is under way (on_mark), then sleeps until the test ends it."""

# (what the model's code does, its limits, a word of the reason and of the evidence: a str for
# both backends, or one per backend (namespaces, landlock))
MODEL_DEATHS = [
    ("import os\nos._exit(3)", LIMITS, "worker exited", ("exit status 3", "zygote runs")),
    ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", LIMITS, "worker exited",
     ("killed by SIGKILL", "zygote runs")),
    ("import os, signal, threading\nthreading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()\n"
     f"import time\ntime.sleep({FOREVER})", LIMITS, "worker exited", ("killed by SIGTERM", "zygote runs")),
    ("import subprocess\nsubprocess.run(['sh', '-c', 'kill -9 $PPID'])", LIMITS, "worker exited",
     ("killed by SIGKILL", "zygote runs")),
    ("x = bytearray(1 << 30)", LIMITS, "out of memory", "its limit"),
    ("blocks = []\nwhile True:\n    blocks.append(bytearray(32 << 20))", LIMITS, "out of memory",
     "its limit"),
    ("while True:\n    pass", FIRES, "exec timed out after 1 s", "call limit of 1 s"),
    ("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass", STORM,
     "timed out", "pids limit hit"),
    ("import os\nos.write(101, b'forged\\n')", LIMITS, "protocol violation", "broke the protocol"),
    # it runs on after closing its reply channel: the namespaces init reports no end within STATUS_WAIT
    (f"import os\nos.close(101)\nimport time\ntime.sleep({FOREVER})", LIMITS,
     ("closed its reply channel", "worker exited"), ("the worker still runs", "zygote runs")),
]


@pytest.mark.parametrize(("code", "limits", "reason", "evidence"), MODEL_DEATHS, ids=[
    "os._exit", "SIGKILL itself", "SIGTERM itself from a thread", "a child kills it", "one big allocation",
    "memory bomb", "CPU spin", "fork storm", "forged reply", "closed its reply pipe"])
@pytest.mark.timing
def test_a_death_the_model_causes_is_the_models(backend: str, code: str, limits: Limits,
                                                reason: str | tuple[str, str],
                                                evidence: str | tuple[str, str]) -> None:
    with Sandbox(backend=backend, limits=limits) as sb:
        sb.execute_code("result = 1")
        with pytest.raises(SandboxDied) as died:
            sb.execute_code(code)
            sb.execute_code("print('the death shows on the next call at the latest')")
        with pytest.raises(SandboxDied) as again:  # and on every later call, with the same cause
            sb.result()
    for death in (died.value.death, again.value.death):
        assert death.cause == "model" and died.value.by_model, death
        assert _of(reason, backend) in death.reason, death
        assert _of(evidence, backend) in death.evidence, death


def _of(expected: str | tuple[str, str], backend: str) -> str:
    return expected if isinstance(expected, str) else expected[BACKENDS.index(backend)]


def test_a_background_exit_between_calls_is_the_models(backend: str) -> None:
    """A thread of the model's exits after the call returned (once the host says so), not in a call."""
    with Sandbox(backend=backend, limits=LIMITS) as sb:
        sb.execute_code("import os, threading, time\ndef wait():\n    while not os.path.exists('go'):\n"
                        "        time.sleep(0.01)\n    os._exit(0)\nthreading.Thread(target=wait).start()")
        worker = worker_pid(sb.uid)
        work_file(sb.uid, "go").touch()
        wait_for(lambda: not alive(worker), "the worker's exit")
        with pytest.raises(SandboxDied, match="worker exited") as died:
            sb.execute_code("print(1)")
    assert died.value.by_model


def _pids(sb: Sandbox) -> set[int]:
    if sb._cgroup is None:
        pytest.skip("finding the sandbox's processes from the host needs its cgroup")
    return sb._cgroup.pids()


def _init_pid(sb: Sandbox) -> int:
    """The sandbox's jail: pid 1 of its pid namespace (namespaces backend), from the host."""
    for pid in _pids(sb):
        status = Path(f"/proc/{pid}/status").read_text()
        if status.split("NSpid:")[1].split("\n")[0].split()[-1] == "1":
            return pid
    raise AssertionError("no init in the sandbox's cgroup")


@pytest.mark.parametrize("target", ["zygote", "jail"])
def test_a_death_the_host_causes_is_the_harnesss(backend: str, target: str) -> None:
    if target == "jail" and backend != "namespaces":
        pytest.skip("only the namespaces backend has a jail process apart from the worker")
    with Sandbox(backend=backend, limits=LIMITS) as sb:
        sb.execute_code("result = 1")
        victim = sb._zygote.process.pid if target == "zygote" else _init_pid(sb)
        with on_mark(sb.uid, "started", lambda: os.kill(victim, signal.SIGKILL)), \
                pytest.raises(SandboxDied) as died:
            sb.execute_code(MARK_THEN_SLEEP)
    death = died.value.death
    assert death.cause == "harness" and not died.value.by_model, death
    expected = {"zygote": ("zygote died", "zygote process"),
                "jail": ("jail was killed from outside", "without reporting")}[target]
    assert expected[0] in death.reason and expected[1] in death.evidence, death
    with Sandbox(backend=backend) as sb:  # a fresh zygote serves the next sandbox
        assert sb.execute_code("print(6 * 7)") == "42\n"


def test_closing_from_another_thread_is_the_harnesss(backend: str) -> None:
    with Sandbox(backend=backend, limits=LIMITS) as sb:
        with on_mark(sb.uid, "started", sb.close), pytest.raises(SandboxDied) as died:
            sb.execute_code(MARK_THEN_SLEEP)
    assert died.value.death.cause == "harness" and died.value.death.evidence == "closed by the host"


def test_a_sandbox_that_fails_before_model_code_ran_is_the_harnesss(backend: str) -> None:
    """Forged-looking replies and exits before any exec or bash call cannot be the model's."""
    with Sandbox(backend=backend, limits=LIMITS) as sb:
        os.kill(worker_pid(sb.uid), signal.SIGKILL)
        with pytest.raises(SandboxDied) as died:
            sb.result()
    assert died.value.death.cause == "harness", died.value.death
    assert "before any model code ran" in died.value.death.reason


def test_model_code_cannot_reach_the_inits_status_pipe(backend: str) -> None:
    """A forged or withheld status would make a self-inflicted death look like the harness's."""
    if backend != "namespaces":
        pytest.skip("only the namespaces backend has an init that reports")
    with Sandbox(backend=backend) as sb:
        out = sb.execute_code(
            "import os\nfor path in ('/proc/1/fd/102', '/proc/1/fd'):\n    try:\n"
            "        os.open(path, os.O_WRONLY) if path.endswith('102') else os.listdir(path)\n"
            "        print('reached', path)\n    except OSError as e:\n        print(type(e).__name__)\n"
            "try:\n    os.write(102, b'0\\n')\n    print('wrote')\n"
            "except OSError as e:\n    print(type(e).__name__)")
    assert out.split() == ["PermissionError", "PermissionError", "OSError"], out
