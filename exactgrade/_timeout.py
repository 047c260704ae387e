"""Hard time limits for work that may never finish (sympy simplification), via a worker process.

A signal-based timeout (signal.alarm) only works in the main thread and cannot interrupt long C
calls; a thread cannot be killed at all. So the work runs in a separate Python process that is
killed when the deadline passes. One worker is kept alive between calls (starting one costs the
sympy import), is restarted after a kill or a crash, and is never shared with a forked child.

The protocol is one JSON line each way. Functions are named as "module:function" and take and
return JSON values; nothing is pickled. The caller is always exactgrade's own code: the names
are never taken from untrusted input.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

# Imported by the worker before it reports ready, so imports never eat into a call's deadline.
PRELOAD = ("sympy", "exactgrade._real", "exactgrade.wire")
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
            readable, _, _ = select.select([fd], [], [], remaining)
            if not readable:
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


_lock = threading.Lock()
_worker: _Worker | None = None


def call(function: str, args: list[Any], seconds: float) -> Any:
    """Run function(*args) in the worker process; DeadlineExceeded after `seconds` (worker killed).

    function is "module:name"; args and the result are JSON values. Calls are serialised (one
    worker); time spent waiting for another call counts against the deadline.
    """
    global _worker
    started = time.monotonic()
    if not _lock.acquire(timeout=min(max(seconds, 0.0), threading.TIMEOUT_MAX)):
        raise DeadlineExceeded
    try:
        if _worker is None:
            startup_began = time.monotonic()
            _worker = _Worker()
            started += time.monotonic() - startup_began  # startup does not count against the deadline
        remaining = seconds - (time.monotonic() - started)
        if remaining <= 0:
            raise DeadlineExceeded  # nothing sent: the worker stays usable
        try:
            return _worker.call(function, args, remaining)
        except (DeadlineExceeded, WorkerError, json.JSONDecodeError) as error:
            _worker.kill()
            _worker = None
            if isinstance(error, json.JSONDecodeError):
                raise WorkerError("unreadable reply from worker") from None
            raise
    finally:
        _lock.release()


def shutdown() -> None:
    """Stop the worker process, if any (also run at interpreter exit)."""
    global _worker
    with _lock:
        if _worker is not None and _worker.owner_pid == os.getpid():
            _worker.kill()
        _worker = None


def _forget_parent_worker() -> None:
    """In a forked child: the parent's worker and lock state are not ours to use."""
    global _lock, _worker
    _lock = threading.Lock()
    _worker = None


atexit.register(shutdown)
os.register_at_fork(after_in_child=_forget_parent_worker)


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
