"""What a stopped tool server left of its sandboxes, and which sandboxes a live one holds.

Other agents run sandboxes on this machine at the same time, so nothing here counts globally:
a test names the uids its own run used, and a uid counts as leaked only while no process holds
its slot (a live holder is someone else's sandbox that reuses the uid).
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import signal
import subprocess
import sys
import threading
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


FOREVER = 10**6
"""Seconds a sandboxed sleep lasts when it must outlast anything the test waits for: the test (or the
mechanism under test) ends it, so no timer races it."""


def worker_pid(uid: int) -> int:
    """The host pid of the worker of sandbox `uid`, once it runs: its process that holds the reply pipe
    (fd 101) and is not pid 1 of a pid namespace (the namespaces init holds it too until it has
    forked the worker)."""

    def find() -> int | None:
        for pid in sorted(uids.processes_of(uid)):
            try:
                os.readlink(f"/proc/{pid}/fd/101")
                nspid = Path(f"/proc/{pid}/status").read_text().split("NSpid:")[1].split("\n")[0].split()
            except (OSError, IndexError):
                continue
            if nspid[-1] != "1":
                return pid
        return None

    return wait_for(find, f"the worker of sandbox uid {uid}")


def work_file(uid: int, name: str) -> Path:
    """A file in the sandbox's work dir as the host reaches it (through its worker's cwd): the
    sandboxed code touches it to say it reached a point, or the host touches it to tell it to go on."""
    return Path(f"/proc/{worker_pid(uid)}/cwd") / name


@contextlib.contextmanager
def on_mark(uid: int, name: str, action: Callable[[], object]) -> Iterator[None]:
    """Run action() in a thread once the sandbox's code has created `name` in its work dir: the host
    acts when the call has reached that point, not after a timer that races it. On exit: the
    action's error, or AssertionError if the mark never appeared while the block ran."""
    mark, done, errors = work_file(uid, name), threading.Event(), []

    def run() -> None:
        try:
            seen = wait_for(lambda: "marked" if mark.exists() else done.is_set(), f"the mark {name!r}")
            if seen != "marked":
                raise AssertionError(f"the sandbox never created its mark {name!r}")
            action()
        except BaseException as error:  # noqa: BLE001 - re-raised in the test's thread below
            errors.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(HANG_GUARD)
    if errors:
        raise errors[0]


HOG_WEIGHT = 16
"""How many times a default cgroup's (a sandbox's, or the host group a no-cgroup sandbox runs in) CPU
weight each hog's group has. Each hog is alone in its own group, pinned to its own CPU, so all of that
weight is on that CPU: a sandbox gets at most 1/(HOG_WEIGHT + 1) of any CPU while the hogs spin, on any
number of CPUs (the scheduler's arithmetic, not the CPU's speed). v1 cpu.shares 16 * 1024; v2
cpu.weight 16 * 100 (the kernel maps weight W to shares W * 1024 / 100)."""

_HOG = """\
import os, sys, time
group, cpu, ready, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
end = time.monotonic() + seconds
with open(group + '/cgroup.procs', 'w') as procs:
    procs.write('0')
os.sched_setaffinity(0, {cpu})
os.write(ready, b'.')
os.close(ready)
while time.monotonic() < end:
    pass
"""


def _hogs_cpu() -> tuple[Path, str, str] | str:
    """(where the hogs' groups go, the weight file, its value), or why no group can be weighted here."""
    if os.geteuid() != 0:
        return "cannot weight the hogs: creating cpu cgroups needs root"
    v1 = cgroups.CGROUP_ROOT / "cpu"
    if (v1 / "cgroup.procs").is_file():
        return v1, "cpu.shares", str(HOG_WEIGHT * 1024)
    root = cgroups.v2_root()
    if root is None or "cpu" not in (root / "cgroup.controllers").read_text().split():
        return "cannot weight the hogs: no cgroup v1 cpu hierarchy and no cpu controller in a cgroup v2 root"
    if "cpu" not in (root / "cgroup.subtree_control").read_text().split():
        try:  # as cgroups.unavailable_reason does for the sandboxes' parent
            (root / "cgroup.subtree_control").write_text("+cpu")
        except OSError as error:
            return f"cannot weight the hogs: enabling +cpu in {root}/cgroup.subtree_control: {error.strerror}"
    return root, "cpu.weight", str(HOG_WEIGHT * 100)


def hogs_unavailable_reason() -> str | None:
    """None when cpu_hogs can starve the host here, else why not (a test then skips: without the
    hogs' weight the starvation it needs is not established). Tries it: a read-only cgroupfs, as in a
    container, is found here."""
    found = _hogs_cpu()
    if isinstance(found, str):
        return found
    probe = found[0] / f"eg-hogs-{os.getpid()}-probe"
    try:
        _make_group(probe, *found[1:])
    except OSError as error:
        return f"cannot weight the hogs: creating {probe}: {error.strerror}"
    finally:
        _remove(probe)
    return None


def _make_group(group: Path, weight_file: str, weight: str) -> None:
    group.mkdir(exist_ok=True)
    (group / weight_file).write_text(weight)


class Hogs:
    """Running hogs: their pids, and what CPU they took since all of them were spinning."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self.started = time.monotonic()
        self.first = self._on_cpu()

    def _on_cpu(self) -> float:
        total = 0
        for pid in self.pids:
            with contextlib.suppress(OSError, IndexError, ValueError):
                total += int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
        return total / 1e9

    def took(self) -> str:
        """The premise of a starved-host test, for its assertion messages."""
        wall = time.monotonic() - self.started
        cpu = self._on_cpu() - self.first
        share = cpu / (wall * len(self.pids)) if wall > 0 else 0.0
        return (f"premise: the hogs ran {cpu:.3f} s on their {len(self.pids)} CPUs in {wall:.3f} s "
                f"({share:.0%} of them; each hog's group weighs {HOG_WEIGHT}x a sandbox's)")


@contextlib.contextmanager
def cpu_hogs(seconds: float) -> Iterator[Hogs]:
    """Starve the host for real: one busy loop per CPU, pinned, each in its own cpu cgroup of
    HOG_WEIGHT outside every sandbox's, for at most `seconds` (each loop also stops itself then, so
    none outlives a killed test). Yields once every hog is in its group, pinned and spinning (each
    says so on a pipe: an interpreter's start-up is the machine's speed); killed on exit.
    RuntimeError where the hogs cannot be weighted (hogs_unavailable_reason)."""
    found = _hogs_cpu()
    if isinstance(found, str):
        raise RuntimeError(found)
    parent, weight_file, weight = found
    procs: list[subprocess.Popen[bytes]] = []
    groups: list[Path] = []
    try:
        for cpu in sorted(os.sched_getaffinity(0)):
            group = parent / f"eg-hogs-{os.getpid()}-{cpu}"
            groups.append(group)
            _make_group(group, weight_file, weight)
            ready, tell = os.pipe()
            try:  # -S -I: no site, no .pth files: a start-up of milliseconds, not of the environment
                procs.append(subprocess.Popen(
                    [sys.executable, "-S", "-I", "-c", _HOG, str(group), str(cpu), str(tell), str(seconds)],
                    pass_fds=(tell,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE))
            finally:
                os.close(tell)
            try:
                _wait_ready(ready, procs[-1])
            finally:
                os.close(ready)
        yield Hogs([p.pid for p in procs])
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()
            if p.stderr is not None:
                p.stderr.close()
        for group in groups:
            _remove(group)


_BUSY_LOOP = """\
import sys, time
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    pass
"""


@contextlib.contextmanager
def busy_loops(seconds: float) -> Iterator[list[int]]:
    """A plain busy loop per CPU beside the test (no cgroup, no weight: the load .ci/run's timing re-run
    puts beside the marked tests), each stopping itself after `seconds` so none outlives a killed test;
    killed on exit. Yields their pids."""
    procs = [subprocess.Popen([sys.executable, "-S", "-I", "-c", _BUSY_LOOP, str(seconds)],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for _ in range(os.cpu_count() or 1)]
    try:
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def _wait_ready(ready: int, hog: subprocess.Popen[bytes]) -> None:
    """Return once `hog` wrote its byte on `ready`; RuntimeError if it died first or HANG_GUARD passed."""
    readable, _, _ = select.select([ready], [], [], HANG_GUARD)
    if readable and os.read(ready, 1) == b".":
        return
    hog.kill()
    _, err = hog.communicate()
    raise RuntimeError(f"a cpu hog did not start spinning within {HANG_GUARD:g} s "
                       f"(exit {hog.returncode}): {err.decode(errors='replace').strip()[-500:]}")


def _remove(group: Path) -> None:
    """rmdir a hog's group once the kernel has let go of its killed task (EBUSY until then)."""
    deadline = time.monotonic() + HANG_GUARD
    while group.exists():
        try:
            group.rmdir()
        except FileNotFoundError:
            return
        except OSError as error:
            if error.errno != errno.EBUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.01)
