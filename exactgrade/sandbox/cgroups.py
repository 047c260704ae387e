"""Per-sandbox cgroups (memory, pids, cpu): limits that bind root-started trees, a CPU bound, and a
kill switch that reaches every process of a sandbox, daemons and fork storms included.

cgroup v1 where its memory hierarchy is mounted: /sys/fs/cgroup/{memory,pids,cpu}/exactgrade/<name>.
cgroup v2 otherwise (every v2-only distro): <v2 root>/exactgrade/<name>, with the memory, pids and
cpu controllers enabled for exactgrade/. The host creates the groups, sets the limits, and hands
the open cgroup.procs files to the zygote; the forked child writes "0" to them ("move me", in both
versions; v2 checks the permission against the opener, the host) before it does anything else,
so every later process of the sandbox is inside.

CPU: every sandbox group has the same weight and a CFS quota of `cpus` CPUs while one of its calls
runs, IDLE_CPUS between calls. A group outside the root task group also leaves the autogroup
scheduler, so 60 setsid busy loops (60 sessions, 60 autogroups) weigh as one sandbox, not as 60
host sessions. (Not a freeze: a frozen v1 process ignores SIGKILL until thawed, so the sandboxes
of a crashed host would stay instead of dying with their zygote.)
"""

from __future__ import annotations

import errno
import functools
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = ("memory", "pids", "cpu")
CFS_PERIOD_US = 100_000
IDLE_CPUS = 0.01  # what processes left running between calls get: 1 ms per 100 ms
PARENT = "exactgrade"


def v2_root() -> Path | None:
    """Where the unified (v2) hierarchy is mounted: /sys/fs/cgroup itself, or unified/ (hybrid)."""
    for root in (CGROUP_ROOT, CGROUP_ROOT / "unified"):
        if (root / "cgroup.controllers").is_file():
            return root
    return None


@functools.cache
def version() -> int:
    """1 where the v1 memory hierarchy is mounted, else 2 (unavailable_reason says if v2 works)."""
    return 1 if (CGROUP_ROOT / "memory" / "cgroup.procs").is_file() else 2


def unavailable_reason() -> str | None:
    """None when per-sandbox memory, pids and cpu groups can be created here, else why not."""
    if os.geteuid() != 0:
        return "not running as root"
    if version() == 1:
        for controller in CONTROLLERS:
            base = CGROUP_ROOT / controller
            if not (base / "cgroup.procs").is_file():
                return f"cgroup v1 {controller} hierarchy not mounted at {base}"
            try:
                (base / PARENT).mkdir(exist_ok=True)
            except OSError as error:
                return f"cannot create {base / PARENT}: {error.strerror}"
        return None
    root = v2_root()
    if root is None:
        return "neither a cgroup v1 memory hierarchy nor a cgroup v2 mount under /sys/fs/cgroup"
    missing = set(CONTROLLERS) - set((root / "cgroup.controllers").read_text().split())
    if missing:
        return f"cgroup v2 at {root} lacks the {', '.join(sorted(missing))} controller(s) (bound to v1?)"
    enable = " ".join(f"+{c}" for c in CONTROLLERS)
    try:
        (root / PARENT).mkdir(exist_ok=True)
        for group in (root, root / PARENT):  # a group with processes cannot delegate (EBUSY)
            if set(CONTROLLERS) - set((group / "cgroup.subtree_control").read_text().split()):
                (group / "cgroup.subtree_control").write_text(enable)
    except OSError as error:
        return f"cannot enable {enable} below {root}: {error.strerror}"
    return None


@functools.cache
def v1_accounting_root() -> Path | None:
    """On a v1 (hybrid) host: the unified hierarchy's exactgrade/ if sandbox groups made below it get
    cpu.pressure (PSI built in and enabled), else None (no starvation accounting: see cpu_waits)."""
    root = v2_root()
    if version() != 1 or root is None or os.geteuid() != 0:
        return None
    try:
        (root / PARENT).mkdir(exist_ok=True)
        (root / PARENT / "cpu.pressure").read_text()
    except OSError:
        return None
    return root / PARENT


def psi_reason() -> str | None:
    """None if sandbox groups get cpu.pressure (calls are charged in the sandbox's own time), else why
    not (then the call limit is wall time)."""
    if unavailable_reason() is not None:
        return "no per-sandbox cgroup"
    if version() == 1:
        return None if v1_accounting_root() is not None else "no cpu.pressure in the unified hierarchy"
    try:
        ((v2_root() or CGROUP_ROOT) / PARENT / "cpu.pressure").read_text()
    except OSError as error:
        return f"cpu.pressure unreadable ({error.strerror}; PSI off? boot with psi=1)"
    return None


@dataclass(frozen=True, slots=True)
class CpuWaits:
    """Cumulative counters of one sandbox group (seconds): the time some of its tasks were runnable
    and none ran (PSI full), and the time its own quota throttled it."""

    stalled: float
    throttled: float


def existing_uids() -> set[int]:
    """Uids that have a sandbox group right now (live, or left behind by a host that was killed)."""
    found = set()
    for parent in {d.parent for d in SandboxCgroup("sb-0").dirs}:
        if parent.is_dir():
            found.update(int(d.name[3:]) for d in parent.iterdir() if d.name.startswith("sb-")
                         and d.name[3:].isdigit())
    return found


@dataclass(frozen=True, slots=True)
class SandboxCgroup:
    """The groups of one sandbox: memory, pids and cpu (v1), or one group with all three (v2)."""

    name: str
    version: int = field(default_factory=version)

    @property
    def dirs(self) -> tuple[Path, ...]:
        return _dirs(self.name, self.version)

    def cpu_waits(self) -> CpuWaits | None:
        """The group's stall counters now, or None where PSI is not available for it (then a call's
        limit is wall time only). Two small reads (raw os.read: a third of the cost of
        open().read(), and this runs at the start of every call)."""
        try:
            pressure = _read(_psi_file(self.name, self.version, "cpu.pressure"))
            full = pressure[pressure.index(b"full "):]
            stalled = int(full[full.index(b"total=") + 6:].split()[0]) / 1e6
            if self.version == 1:
                throttled = _counter(_read(self._file("cpu", "cpu.stat")), b"throttled_time") / 1e9
            else:
                throttled = _counter(_read(self._file("cpu", "cpu.stat")), b"throttled_usec") / 1e6
            return CpuWaits(stalled, throttled)
        except (OSError, ValueError, IndexError):
            return None

    def _file(self, controller: str, name: str) -> str:
        return _file(self.name, self.version, controller, name)

    @classmethod
    def create(cls, name: str, memory_bytes: int, max_processes: int, cpus: float,
               alive: Callable[[], bool] | None = None) -> SandboxCgroup:
        group = cls(name)
        if any(d.exists() for d in group.dirs):  # left over by a host process that crashed
            group.destroy(alive=alive)
        for d in group.dirs:
            d.mkdir()
        if group.version == 1:
            _write(group._file("memory", "memory.limit_in_bytes"), str(memory_bytes))
            memsw = group._file("memory", "memory.memsw.limit_in_bytes")
            if os.path.exists(memsw):
                _write(memsw, str(memory_bytes))  # no escape into swap
            _write(group._file("cpu", "cpu.cfs_period_us"), str(CFS_PERIOD_US))
        else:
            _write(group._file("memory", "memory.max"), str(memory_bytes))
            swap = group._file("memory", "memory.swap.max")
            if os.path.exists(swap):
                _write(swap, "0")
        _write(group._file("pids", "pids.max"), str(max_processes))
        group.limit_cpu(cpus)
        return group

    def limit_cpu(self, cpus: float) -> None:
        """Let the sandbox use at most `cpus` CPUs from now on (the CFS minimum is 1 ms per period)."""
        quota = max(1000, round(cpus * CFS_PERIOD_US))
        try:
            if self.version == 1:
                _write(self._file("cpu", "cpu.cfs_quota_us"), str(quota))
            else:
                _write(self._file("cpu", "cpu.max"), f"{quota} {CFS_PERIOD_US}")
        except FileNotFoundError:
            pass  # destroyed meanwhile by close() in another thread

    def procs_fds(self) -> list[int]:
        """Open cgroup.procs of each group for writing (the zygote's child writes "0" into them)."""
        return [os.open(d / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC) for d in self.dirs]

    def pids(self) -> set[int]:
        found: set[int] = set()
        for path in _procs_files(self.name, self.version):
            try:
                with open(path, "rb") as procs:
                    found.update(map(int, procs.read().split()))
            except FileNotFoundError:
                pass
        return found

    def oom_killed(self) -> bool:
        """True if the memory limit made the kernel kill a process of this sandbox."""
        events = "memory.oom_control" if self.version == 1 else "memory.events"
        try:
            text = Path(self._file("memory", events)).read_text()
        except OSError:
            return False
        fields = dict(line.split() for line in text.splitlines() if len(line.split()) == 2)
        return int(fields.get("oom_kill", "0")) > 0

    def memory_failures(self) -> int:
        """How often a charge hit the memory limit (v1 memory.failcnt; v2 memory.events max)."""
        try:
            if self.version == 1:
                return int(Path(self._file("memory", "memory.failcnt")).read_text())
            return int(_events(self._file("memory", "memory.events")).get("max", "0"))
        except (OSError, ValueError):
            return 0

    def peak_memory(self) -> int:
        """The most memory the sandbox ever had charged (bytes; 0 if unknown)."""
        name = "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"
        try:
            return int(Path(self._file("memory", name)).read_text())
        except (OSError, ValueError):
            return 0

    def pids_limit_hits(self) -> int:
        """How often a fork or clone of this sandbox failed at its process limit (pids.events max)."""
        try:
            return int(_events(self._file("pids", "pids.events")).get("max", "0"))
        except (OSError, ValueError):
            return 0

    def kill_all(self, timeout: float = 10.0) -> bool:
        """SIGKILL every process in the groups until none is left; False if some survived timeout."""
        deadline = time.monotonic() + timeout
        delay = 0.0005
        while True:
            pids = self.pids()
            if not pids:
                return True
            kill_file = _file(self.name, self.version, "pids", "cgroup.kill")
            if self.version == 2 and os.path.exists(kill_file):  # v2 (Linux 5.14+): the kernel kills them all
                try:
                    _write(kill_file, "1")
                except FileNotFoundError:
                    pass
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if time.monotonic() > deadline:
                return False
            time.sleep(delay)
            delay = min(delay * 2, 0.02)

    def charged_tasks(self) -> int:
        """Tasks charged to the pids group (pids.current): every process of the sandbox until it has
        been reaped, so also one that has left cgroup.procs while it exits; 0 once the group is gone."""
        try:
            return int(_read(self._file("pids", "pids.current")))
        except FileNotFoundError:
            return 0

    def destroy(self, timeout: float = 10.0, alive: Callable[[], bool] | None = None) -> bool:
        """Kill everything inside, wait until no process of it lives, and remove every group; False if
        that did not fully succeed within `timeout` (then some process may live on). A process lives
        until it is reaped (charged_tasks) or, where alive() is given, until alive() says none does:
        a zombie whose parent never reaps it (an orphan of a dead zygote) stays charged for ever."""
        try:  # killed tasks need CPU to exit: at IDLE_CPUS, 62 of them took over 10 s
            self.limit_cpu(1.0)
        except OSError:  # a group without the cpu controller
            pass
        clean = self.kill_all(timeout)
        deadline = time.monotonic() + timeout
        # A killed process leaves cgroup.procs when it starts to exit, and rmdir may succeed then,
        # but it lives on (under its uid) until it has exited and been reaped: on a loaded host a
        # fork storm's last ones were still alive after close() returned.
        delay = 0.0005
        while clean and self.charged_tasks() and (alive is None or alive()):
            if time.monotonic() > deadline:
                clean = False
                break
            self.kill_all(0)
            time.sleep(delay)
            delay = min(delay * 2, 0.02)
        for d in self.dirs:
            while d.exists():
                try:
                    d.rmdir()
                except FileNotFoundError:
                    break
                except OSError as error:
                    if error.errno != errno.EBUSY or time.monotonic() > deadline:
                        clean = False
                        break
                    self.kill_all(0)
                    time.sleep(0.001)
        return clean


# A sandbox's paths, built once per name: its teardown polls them in a loop, and pathlib joins were
# most of a close's CPU (~40 ms per sandbox).
@functools.cache
def _dirs(name: str, version: int) -> tuple[Path, ...]:
    """v1: memory, pids, cpu (in CONTROLLERS order), then the accounting group if there is one."""
    if version == 1:
        accounting = v1_accounting_root()
        return tuple(CGROUP_ROOT / controller / PARENT / name for controller in CONTROLLERS) + (
            (accounting / name,) if accounting is not None else ())
    return ((v2_root() or CGROUP_ROOT) / PARENT / name,)


@functools.cache
def _psi_file(name: str, version: int, filename: str) -> str:
    """A file of the group that has cpu.pressure: the v2 group, or v1's accounting group."""
    return str(_dirs(name, version)[-1] / filename)


@functools.cache
def _procs_files(name: str, version: int) -> tuple[str, ...]:
    return tuple(str(d / "cgroup.procs") for d in _dirs(name, version))


@functools.cache
def _file(name: str, version: int, controller: str, filename: str) -> str:
    return str(_dirs(name, version)[CONTROLLERS.index(controller) if version == 1 else 0] / filename)


def _read(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.read(fd, 1 << 12)
    finally:
        os.close(fd)


def _counter(text: bytes, name: bytes) -> int:
    """The value of `name` in a flat keyed file ("name value" lines); ValueError if absent."""
    for line in text.splitlines():
        key, _, value = line.partition(b" ")
        if key == name:
            return int(value)
    raise ValueError(f"no {name!r}")


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _events(path: str) -> dict[str, str]:
    """A cgroup `*.events` file as {name: value}."""
    with open(path) as f:
        return dict(line.split() for line in f.read().splitlines() if len(line.split()) == 2)
