"""Per-sandbox cgroup v1 groups (memory, pids, cpu): limits that bind root-started trees, a CPU
bound, and a kill switch that reaches every process of a sandbox, daemons and fork storms included.

The host creates /sys/fs/cgroup/{memory,pids,cpu}/exactgrade/<name>, sets the limits, and
hands the open cgroup.procs files to the zygote; the forked child writes "0" to them (v1: "move
me") before it does anything else, so every later process of the sandbox is inside.

CPU: every sandbox group has the same weight (cpu.shares 1024) and a CFS quota of `cpus` CPUs
while one of its calls runs, IDLE_CPUS between calls. A group outside the root task group also
leaves the autogroup scheduler, so 60 setsid busy loops (60 sessions, 60 autogroups) weigh as one
sandbox, not as 60 host sessions. (Not a freeze: a frozen v1 process ignores SIGKILL until thawed,
so the sandboxes of a crashed host would stay instead of dying with their zygote.)
"""

from __future__ import annotations

import errno
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = ("memory", "pids", "cpu")
CFS_PERIOD_US = 100_000
IDLE_CPUS = 0.01  # what processes left running between calls get: 1 ms per 100 ms
PARENT = "exactgrade"


def unavailable_reason() -> str | None:
    """None when per-sandbox v1 memory, pids and cpu groups can be created here, else why not."""
    if os.geteuid() != 0:
        return "not running as root"
    for controller in CONTROLLERS:
        base = CGROUP_ROOT / controller
        if not (base / "cgroup.procs").is_file():
            return f"cgroup v1 {controller} hierarchy not mounted at {base}"
        try:
            (base / PARENT).mkdir(exist_ok=True)
        except OSError as error:
            return f"cannot create {base / PARENT}: {error.strerror}"
    return None


def existing_uids() -> set[int]:
    """Uids that have a sandbox group right now (live, or left behind by a host that was killed)."""
    found = set()
    for controller in CONTROLLERS:
        parent = CGROUP_ROOT / controller / PARENT
        if parent.is_dir():
            found.update(int(d.name[3:]) for d in parent.iterdir() if d.name.startswith("sb-")
                         and d.name[3:].isdigit())
    return found


@dataclass(frozen=True, slots=True)
class SandboxCgroup:
    """The memory, pids and cpu groups of one sandbox."""

    name: str

    @property
    def dirs(self) -> tuple[Path, ...]:
        return tuple(CGROUP_ROOT / controller / PARENT / self.name for controller in CONTROLLERS)

    @classmethod
    def create(cls, name: str, memory_bytes: int, max_processes: int, cpus: float) -> SandboxCgroup:
        group = cls(name)
        if any(d.exists() for d in group.dirs):  # left over by a host process that crashed
            group.destroy()
        memory_dir, pids_dir, cpu_dir = group.dirs
        for d in group.dirs:
            d.mkdir()
        (memory_dir / "memory.limit_in_bytes").write_text(str(memory_bytes))
        memsw = memory_dir / "memory.memsw.limit_in_bytes"
        if memsw.exists():
            memsw.write_text(str(memory_bytes))  # no escape into swap
        (pids_dir / "pids.max").write_text(str(max_processes))
        (cpu_dir / "cpu.cfs_period_us").write_text(str(CFS_PERIOD_US))
        group.limit_cpu(cpus)
        return group

    def limit_cpu(self, cpus: float) -> None:
        """Let the sandbox use at most `cpus` CPUs from now on (the CFS minimum is 1 ms per period)."""
        try:
            (self.dirs[2] / "cpu.cfs_quota_us").write_text(str(max(1000, round(cpus * CFS_PERIOD_US))))
        except FileNotFoundError:
            pass  # destroyed meanwhile by close() in another thread

    def procs_fds(self) -> list[int]:
        """Open cgroup.procs of each group for writing (the zygote's child writes "0" into them)."""
        return [os.open(d / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC) for d in self.dirs]

    def pids(self) -> set[int]:
        found: set[int] = set()
        for d in self.dirs:
            try:
                found.update(int(line) for line in (d / "cgroup.procs").read_text().split())
            except FileNotFoundError:
                pass
        return found

    def oom_killed(self) -> bool:
        """True if the memory limit made the kernel kill a process of this sandbox."""
        try:
            text = (self.dirs[0] / "memory.oom_control").read_text()
        except OSError:
            return False
        fields = dict(line.split() for line in text.splitlines() if len(line.split()) == 2)
        return int(fields.get("oom_kill", "0")) > 0

    def memory_failures(self) -> int:
        try:
            return int((self.dirs[0] / "memory.failcnt").read_text())
        except OSError:
            return 0

    def kill_all(self, timeout: float = 10.0) -> bool:
        """SIGKILL every process in the groups until none is left; False if some survived timeout."""
        deadline = time.monotonic() + timeout
        delay = 0.0005
        while True:
            pids = self.pids()
            if not pids:
                return True
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if time.monotonic() > deadline:
                return False
            time.sleep(delay)
            delay = min(delay * 2, 0.02)

    def destroy(self, timeout: float = 10.0) -> bool:
        """Kill everything inside and remove every group; False if that did not fully succeed."""
        clean = self.kill_all(timeout)
        deadline = time.monotonic() + timeout
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
