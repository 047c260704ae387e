"""What a stopped tool server left of its sandboxes, and which sandboxes a live one holds.

Other agents run sandboxes on this machine at the same time, so nothing here counts globally:
a test names the uids its own run used, and a uid counts as leaked only while no process holds
its slot (a live holder is someone else's sandbox that reuses the uid).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from exactgrade.sandbox import cgroups, uids
from exactgrade.sandbox.runtime import default_state_dir

STOP_GRACE = 5.0
"""verifiers' SubprocessRuntime SIGKILLs a background server's group this long after SIGTERM. How
fast a server stops is the machine's speed: measure it in a benchmark; tests wait HANG_GUARD."""
HANG_GUARD = 600.0
"""Seconds a test waits for what must happen (a process to stop, a worker to appear), so a broken
build fails instead of hanging: far beyond any loaded machine, never a speed requirement."""


def leftovers(sandbox_uids: set[int]) -> dict[int, list[str]]:
    """For each uid whose slot nobody holds: its cgroups, processes and work dir still there."""
    state = default_state_dir()
    found: dict[int, list[str]] = {}
    for uid in sorted(sandbox_uids):
        slot = uids.try_claim(state, uid)
        if slot is None:
            continue  # held right now: another run's sandbox
        try:
            left = [str(d) for d in cgroups.SandboxCgroup(f"sb-{uid}").dirs if d.exists()]
            left += [f"pid {pid}" for pid in uids.processes_of(uid)]
            work = state / "work" / str(uid)
            if work.exists():
                left.append(str(work))
        finally:
            slot.release()
        if left:
            found[uid] = left
    return found


def held_uids(pid: int) -> set[int]:
    """The sandbox uids whose slot locks process `pid` holds now (from /proc/locks)."""
    lock_dir = default_state_dir() / "uids"
    by_inode = {}
    for path in lock_dir.iterdir():
        if path.name.isdigit():
            try:
                by_inode[path.stat().st_ino] = int(path.name)
            except FileNotFoundError:
                pass
    held = set()
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[4] == str(pid):
            inode = int(fields[5].rsplit(":", 1)[1])
            if inode in by_inode:
                held.add(by_inode[inode])
    return held


def children(pid: int) -> list[int]:
    """Direct children of `pid`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def tool_server(launcher: int) -> tuple[int, int] | None:
    """(supervisor pid, worker pid) of the sandbox tool server `launcher` started, once both run."""
    for pid in children(launcher):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"exactgrade.env.toolset" in command:
            workers = [w for w in children(pid) if alive(w)]
            return (pid, workers[0]) if workers else None
    return None


def stop_like_verifiers(server: int, grace: float = STOP_GRACE) -> int | None:
    """SIGTERM the server's process group; SIGKILL it if still there after `grace` seconds, as
    verifiers does. Returns the server's own exit code, or None when it had to be killed.
    `server` must be a child of this process or of a process that reaps it."""
    os.killpg(os.getpgid(server), signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            pid, status = os.waitpid(server, os.WNOHANG)
        except ChildProcessError:  # not ours: its own parent reaps it
            if not alive(server):
                return 0
        else:
            if pid == server:
                return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.killpg(os.getpgid(server), signal.SIGKILL)
    return None


def wait_for(condition: Callable[[], Any], what: str, timeout: float = HANG_GUARD) -> Any:
    """The first truthy value of condition(), polled until timeout (then AssertionError)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


HOG_SHARES = 32768
"""cpu.shares of the hogs' group: split over the CPUs the hogs run on, 16 times a sandbox group's on
each, so a sandbox gets at most about 1/17 of a CPU a hog runs on (the scheduler's arithmetic, not
the CPU's speed)."""


@contextlib.contextmanager
def cpu_hogs(seconds: float) -> Iterator[list[int]]:
    """Starve the host for real: one busy loop per CPU, pinned, niced to -5, in a cpu cgroup of
    HOG_SHARES outside every sandbox's, for at most `seconds` (each loop also stops itself then, so
    none outlives a killed test). Killed on exit; yields their pids."""
    group = Path(f"/sys/fs/cgroup/cpu/eg-hogs-{os.getpid()}")
    if cgroups.version() == 1:
        group.mkdir(exist_ok=True)
        (group / "cpu.shares").write_text(str(HOG_SHARES))
    procs = []
    loop = f"import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"
    try:
        for cpu in sorted(os.sched_getaffinity(0)):
            def enter(cpu: int = cpu) -> None:
                if cgroups.version() == 1:
                    (group / "cgroup.procs").write_text("0")
                os.sched_setaffinity(0, {cpu})
                os.nice(-5)

            procs.append(subprocess.Popen([sys.executable, "-c", loop], preexec_fn=enter))
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()
        if group.exists():
            group.rmdir()
