"""Hard time limits for work that may never finish (sympy simplification), via a worker process.

A signal-based timeout (signal.alarm) only works in the main thread and cannot interrupt long C
calls; a thread cannot be killed at all. So the work runs in a separate Python process that is
killed when the deadline passes.

Workers form a pool: each call has a worker to itself for its duration, so a hostile proof that
holds one worker until its deadline never delays another caller's proof. A call takes an idle
worker or, if none is idle, starts a new one (starting costs the sympy import, about a second,
and does not count against the deadline); at most MAX_IDLE workers are kept between calls, a
killed or crashed one is replaced by the next call that needs one, and none is ever shared with
a forked child. The number of workers at once is the number of concurrent callers (grading
threads), each capped at WORKER_MEMORY_BYTES.

The protocol is one JSON line each way. Functions are named as "module:function" and take and
return JSON values; nothing is pickled. The caller is always exactgrade's own code: the names
are never taken from untrusted input.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

# Imported by the worker before it reports ready, then WARM_UP is run (sympy imports most of its
# simplification machinery on first use: about a second), so none of it eats into a deadline.
PRELOAD = ("sympy", "exactgrade._real", "exactgrade.wire")
WARM_UP = "exactgrade._real:warm_up"
STARTUP_SECONDS = 60.0  # generous: the box may be loaded; startup does not count against a deadline
WORKER_MEMORY_BYTES = 2 << 30


class DeadlineExceeded(Exception):
    """The call did not finish within its time limit; the worker was killed."""


class WorkerError(Exception):
    """The worker raised, crashed or answered something unreadable."""


class _Worker:
    """One child process running `python -m exactgrade._timeout`."""

    def __init__(self) -> None:
        env = dict(os.environ)
        package_root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
        self.owner_pid = os.getpid()
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "exactgrade._timeout"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
            )
        except OSError as error:
            raise WorkerError(f"cannot start the worker: {error}") from None
        self.buffer = b""
        try:
            ready = self.read_line(time.monotonic() + STARTUP_SECONDS)
        except (DeadlineExceeded, WorkerError, ValueError):
            ready = None
        if ready != {"ready": True}:
            self.kill()
            raise WorkerError("the worker did not start")

    def read_line(self, deadline: float) -> Any:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DeadlineExceeded
            poller = select.poll()  # not select.select: a busy grader's fds may exceed FD_SETSIZE
            poller.register(fd, select.POLLIN)
            if not poller.poll(max(1, math.ceil(remaining * 1000))):
                raise DeadlineExceeded
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise WorkerError("worker exited")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line)

    def call(self, function: str, args: list[Any], seconds: float) -> Any:
        assert self.process.stdin is not None
        deadline = time.monotonic() + seconds
        try:
            self.process.stdin.write(json.dumps({"function": function, "args": args}).encode() + b"\n")
            self.process.stdin.flush()
        except OSError as error:
            raise WorkerError(f"worker is gone: {error}") from None
        reply = self.read_line(deadline)
        if "error" in reply:
            raise WorkerError(str(reply["error"]))
        return reply["result"]

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()


MAX_IDLE = 4  # idle workers kept for the next calls; beyond that a returned worker is stopped

_lock = threading.Lock()  # guards the two collections below, never held during a call
_idle: list[_Worker] = []
_busy: set[_Worker] = set()


def call(function: str, args: list[Any], seconds: float) -> Any:
    """Run function(*args) in a worker process of its own; DeadlineExceeded after `seconds`
    (that worker killed).

    function is "module:name"; args and the result are JSON values. Concurrent calls run in
    separate workers, so one call never waits for another.
    """
    if seconds <= 0:
        raise DeadlineExceeded  # nothing sent: no worker is spent on it
    worker = _take_worker()
    try:
        result = worker.call(function, args, seconds)
    except BaseException as error:  # a worker whose call did not complete is never reused
        _discard(worker)
        if isinstance(error, DeadlineExceeded | WorkerError):
            raise
        if isinstance(error, json.JSONDecodeError):
            raise WorkerError("unreadable reply from worker") from None
        if isinstance(error, OSError | ValueError):  # its pipes were closed under it (shutdown)
            raise WorkerError(f"worker is gone: {error}") from None
        raise
    _give_back(worker)
    return result


def in_use() -> int:
    """How many workers are running a call right now."""
    with _lock:
        return len(_busy)


def _take_worker() -> _Worker:
    with _lock:
        worker = _idle.pop() if _idle else None
        if worker is not None:
            _busy.add(worker)
            return worker
    worker = _Worker()  # outside the lock: other callers must not wait for this start
    with _lock:
        _busy.add(worker)
    return worker


def _give_back(worker: _Worker) -> None:
    with _lock:
        _busy.discard(worker)
        keep = worker.owner_pid == os.getpid() and len(_idle) < MAX_IDLE and worker.process.poll() is None
        if keep:
            _idle.append(worker)
    if not keep:
        worker.kill()


def _discard(worker: _Worker) -> None:
    with _lock:
        _busy.discard(worker)
    worker.kill()


def shutdown() -> None:
    """Stop every worker (also run at interpreter exit); a call in progress fails with WorkerError."""
    with _lock:
        workers = [w for w in (*_idle, *_busy) if w.owner_pid == os.getpid()]
        _idle.clear()
    for worker in workers:
        worker.kill()


def _forget_parent_workers() -> None:
    """In a forked child: the parent's workers and lock state are not ours to use."""
    global _lock, _idle, _busy
    _lock = threading.Lock()
    _idle = []
    _busy = set()


atexit.register(shutdown)
os.register_at_fork(after_in_child=_forget_parent_workers)


def _serve() -> None:
    """Worker main loop: read a call, run it, write the result; exit when stdin closes."""
    import importlib

    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY_BYTES, WORKER_MEMORY_BYTES))
    except (ImportError, ValueError, OSError):
        pass  # no rlimit on this platform; the time limit still holds
    for module_name in PRELOAD:
        importlib.import_module(module_name)
    module_name, _, name = WARM_UP.partition(":")
    getattr(importlib.import_module(module_name), name)()

    out = sys.stdout.buffer
    out.write(b'{"ready": true}\n')
    out.flush()
    for line in sys.stdin.buffer:
        try:
            request = json.loads(line)
            module_name, _, name = request["function"].partition(":")
            function = getattr(importlib.import_module(module_name), name)
            reply = {"result": function(*request["args"])}
        except BaseException as error:  # report everything; the parent decides
            reply = {"error": f"{type(error).__name__}: {str(error)[:200]}"}
        out.write(json.dumps(reply).encode() + b"\n")
        out.flush()


if __name__ == "__main__":
    _serve()
