"""Keep the shared sandbox tool server answering when the process that holds the sandboxes dies.

verifiers launches `python -m exactgrade.env.toolset` once per eval and talks to it on one port
for the whole eval. That process is a thin supervisor: it holds the listening socket and forks a
worker that serves the MCP tools and owns every sandbox. When the worker dies (killed, out of
memory, a crash), the supervisor reclaims what its sandboxes left (cgroups, processes, work
dirs) and forks a new worker on the same socket; connections made meanwhile wait in the
socket's backlog. Only the rollouts whose sandbox lived in the dead worker are lost, and they
are flagged as harness failures, never rewarded.

Stopping: verifiers stops the server with SIGTERM and kills it 5 s later. On SIGTERM (the end
of an eval, an env-server worker stopping; or the death of the process that launched it) the
supervisor kills the worker at once and reclaims its sandboxes, so nothing of them outlives the
server whatever state the worker was in (uvicorn inside the worker would otherwise wait for
calls still in flight, and re-raise SIGTERM before any cleanup ran).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from exactgrade.sandbox.sandbox import reclaim_stale  # imported up front: stopping must be quick

MAX_RESTARTS = 5
"""Worker deaths tolerated within RESTART_WINDOW seconds before the supervisor gives up."""
RESTART_WINDOW = 60.0
_PR_SET_PDEATHSIG = 1
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def listen() -> socket.socket:
    """Bind the server's socket as verifiers expects (MCP_HOST, MCP_PORT, MCP_PORT_FILE)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((os.environ.get("MCP_HOST", "127.0.0.1"), int(os.environ.get("MCP_PORT", "0"))))
    sock.listen(2048)  # calls that arrive while a worker restarts wait here
    port_file = os.environ.get("MCP_PORT_FILE")
    if port_file:
        Path(port_file).write_text(str(sock.getsockname()[1]))
    return sock


def supervise(serve: Callable[[socket.socket], None], sock: socket.socket) -> NoReturn:
    """Run `serve(sock)` in a forked worker, restart it when it dies, reclaim its sandboxes;
    exit once stopped. Must be called with no other thread running (it forks)."""
    _set_parent_death_signal(signal.SIGTERM)  # the launcher died: stop and clean up
    stopping = False
    worker = 0

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True
        if worker:
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker, signal.SIGKILL)

    for signum in _STOP_SIGNALS:
        signal.signal(signum, stop)
    deaths: list[float] = []
    while True:
        worker = _fork_worker(serve, sock)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)  # a pending stop now kills it
        _, status = os.waitpid(worker, 0)
        worker = 0
        cleaned = _reclaim()
        if stopping:
            _log(f"stopped; reclaimed the sandboxes of uids {cleaned}")
            os._exit(0)  # nothing else to clean, and tearing down the interpreter takes seconds
        now = time.monotonic()
        deaths = [t for t in deaths if now - t < RESTART_WINDOW] + [now]
        _log(f"worker died ({_describe(status)}); reclaimed the sandboxes of uids {cleaned}; the rollouts "
             "that had one are flagged as harness failures")
        if len(deaths) > MAX_RESTARTS:
            _log(f"{len(deaths)} worker deaths within {RESTART_WINDOW:g} s: giving up")
            os._exit(1)
        _log("restarting the worker on the same socket")


def _fork_worker(serve: Callable[[socket.socket], None], sock: socket.socket) -> int:
    parent = os.getpid()
    signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)  # no supervisor handler in the child
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            for signum in _STOP_SIGNALS:
                signal.signal(signum, signal.SIG_DFL)
            _set_parent_death_signal(signal.SIGKILL)
            if os.getppid() != parent:  # the supervisor died before the line above
                os._exit(1)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
            serve(sock)
            code = 0
        except BaseException as error:  # noqa: BLE001 - the worker must never return into the supervisor loop
            _log(f"worker failed: {type(error).__name__}: {error}")
        finally:
            os._exit(code)
    return pid  # stop signals stay blocked until the caller has recorded the pid


def _reclaim() -> list[int]:
    """Clean every sandbox slot nobody holds any more: the dead worker's, now that its locks
    are released (and those of any other host that was killed)."""
    try:
        return reclaim_stale()
    except Exception as error:  # noqa: BLE001 - a cleanup failure must not stop the supervisor
        _log(f"reclaiming sandboxes failed: {type(error).__name__}: {error}")
        return []


def _set_parent_death_signal(signum: int) -> None:
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, int(signum))


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"


def _log(message: str) -> None:
    print(f"exactgrade tool server [{os.getpid()}]: {message}", file=sys.stderr, flush=True)
