"""A call's time limit in the sandbox's own time: wall time minus what the host took from it.

`Limits.call_timeout` is charged against wall time minus the time the host kept the sandbox from
a CPU: time when a task of the sandbox was runnable and none ran, less the time its own CPU
quota throttled it (cgroups.CpuWaits). So a model that sleeps, spins, or makes its own waits
(its processes contending with each other, its quota throttling it) is charged every second, and
times out as its own fault; a call the host starved runs on until `call_timeout` of its own time,
or until the generous wall-clock cap (`call_timeout * wall_factor`), which is then the harness's
failure (flagged), not a wrong answer.

Since charged time never runs faster than the wall clock, nothing is read before `call_timeout`
of wall time has passed but one snapshot at the start of the call: a call that ends in time
costs two small file reads.

Sources, best first:
  cgroup        the sandbox's cgroup: PSI "full" and quota throttling (cgroups.cpu_waits).
  worker task   no cgroup (landlock, use_cgroups=False): the run-queue delay of the worker's own
                threads (/proc/PID/task/*/schedstat, CONFIG_SCHED_INFO), counted only while the
                worker is the only process of its uid with CPU time (its children could be the ones
                keeping it waiting) and runs at its normal priority (not niced, not SCHED_IDLE or
                SCHED_BATCH); else the call is charged wall time. Without a cgroup the sandbox
                weighs as one task against every host task; a model that cannot lower its own
                weight (priority, affinity: refused by seccomp) cannot make host waits of its own.
  wall          nothing of the above: wall time, as before (a starved host scores 0).

Not charged to the host: time the sandbox is idle waiting for the host (a starved host that is slow
to send a request or to read a reply makes the sandbox wait without being runnable); kernel work
done for the sandbox outside its group (writeback, reclaim) that delays it counts as the host's.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from exactgrade.sandbox import uids
from exactgrade.sandbox.cgroups import SandboxCgroup


@dataclass(frozen=True, slots=True)
class CallTime:
    """What one call took: wall seconds, seconds the host kept it from a CPU (None when the call
    ended within call_timeout of wall time and nothing was read), and which source said so."""

    wall: float
    stolen: float | None
    source: str

    @property
    def charged(self) -> float:
        return self.wall - (self.stolen or 0.0)


class Clock:
    """How long the host has kept one sandbox from a CPU since start(): cumulative seconds."""

    source = "wall"

    def start(self) -> None:
        pass

    def stolen(self) -> float:
        return 0.0

    def detail(self) -> str:
        return "no accounting of CPU waits here: wall time"


class CgroupClock(Clock):
    source = "cgroup"

    def __init__(self, cgroup: SandboxCgroup) -> None:
        self.cgroup = cgroup
        self.first = self.last = cgroup.cpu_waits()

    def start(self) -> None:
        self.first = self.last = self.cgroup.cpu_waits()

    def stolen(self) -> float:
        now = self.cgroup.cpu_waits()
        if now is None or self.first is None:
            return 0.0
        self.last = now
        return max(0.0, (now.stalled - self.first.stalled) - (now.throttled - self.first.throttled))

    def detail(self) -> str:
        if self.first is None or self.last is None:
            return "cgroup counters unreadable: wall time"
        return (f"no task running while one was runnable {self.last.stalled - self.first.stalled:.3f} s "
                f"(PSI full), of which its own quota throttled it "
                f"{self.last.throttled - self.first.throttled:.3f} s")


class WorkerClock(Clock):
    """No cgroup: the worker's run-queue delay, while no other process of its uid has used CPU (one
    that did may be what the worker waited for: then it is wall time)."""

    source = "worker task"

    def __init__(self, pid: int, uid: int) -> None:
        self.pid, self.uid = pid, uid
        self.first_delay = self.delay = self.first_children = 0.0
        self.others = 0.0

    def start(self) -> None:
        self.first_delay = self.delay = _threads_delay(self.pid)
        self.first_children = _cpu_seconds(self.pid, children=True)

    def stolen(self) -> float:
        self.delay = _threads_delay(self.pid)
        if _deprioritized(self.pid):  # a worker that asked for less CPU made its own waits
            self.others = float("inf")
            return 0.0
        self.others = _cpu_seconds(self.pid, children=True) - self.first_children  # reaped meanwhile
        self.others += sum(_cpu_seconds(pid) for pid in uids.processes_of(self.uid) if pid != self.pid)
        if self.others > 0:
            return 0.0
        return max(0.0, self.delay - self.first_delay)

    def detail(self) -> str:
        return (f"worker run-queue delay {self.delay - self.first_delay:.3f} s (schedstat); other "
                f"processes of the sandbox used {self.others:.3f} s of CPU (any makes it wall time)")


def _threads_delay(pid: int) -> float:
    """Sum of run-queue delay (seconds) of pid's threads; 0 if unreadable."""
    total = 0
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                    total += int(f.read().split()[1])
            except (OSError, IndexError, ValueError):
                pass
    except OSError:
        return 0.0
    return total / 1e9


def _deprioritized(pid: int) -> bool:
    """True if a thread of pid runs niced (> 0) or as SCHED_BATCH / SCHED_IDLE (or is unreadable):
    it then waits behind every host task by its own choice (an unprivileged task cannot undo it)."""
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            if int(fields[16]) > 0 or int(fields[38]) in (3, 5):  # nice; policy: SCHED_BATCH, SCHED_IDLE
                return True
    except (OSError, IndexError, ValueError):
        return True
    return False


def _cpu_seconds(pid: int, children: bool = False) -> float:
    """utime + stime of a process (seconds), or with children=True those of its reaped children."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return 0.0
    first = 13 if children else 11
    return (int(fields[first]) + int(fields[first + 1])) / os.sysconf("SC_CLK_TCK")


SLACK = 0.001  # a wait this short is not worth another round of counter reads: a budget may end this early


class Budget:
    """One call's time budget. check() returns None while it may go on, else why it must end."""

    def __init__(self, clock: Clock, limit: float, wall_factor: float) -> None:
        self.clock, self.limit, self.cap = clock, limit, limit * wall_factor
        clock.start()
        self.started = time.monotonic()
        self.stolen: float | None = None

    def wall(self) -> float:
        return time.monotonic() - self.started

    def remaining(self) -> float:
        """Seconds until the budget could be spent (0 when it is): charged time grows no faster
        than wall time, so waiting this long never oversleeps the limit."""
        wall = self.wall()
        if wall < self.limit - SLACK:
            return self.limit - wall
        self.stolen = min(self.clock.stolen(), wall)
        left = min(self.limit - (wall - self.stolen), self.cap - wall)
        return left if left > SLACK else 0.0

    def spent(self) -> str | None:
        """None while the budget lasts; "model" once call_timeout of its own time is spent;
        "harness" once the wall-clock cap is reached before that (the host starved it)."""
        if self.remaining() > 0:
            return None
        return "model" if self.wall() - (self.stolen or 0.0) >= self.limit - SLACK else "harness"

    def time(self) -> CallTime:
        """The call so far (the counters read again if they were read at all: past call_timeout)."""
        wall = self.wall()
        if self.stolen is not None:
            self.stolen = min(self.clock.stolen(), wall)
        return CallTime(wall, self.stolen, self.clock.source)

    def evidence(self) -> str:
        call = self.time()
        return (f"{call.charged:.3f} s of its own time against the call limit of {self.limit:g} s, in "
                f"{call.wall:.3f} s of wall time (cap {self.cap:g} s; {self.clock.source}: "
                f"{self.clock.detail()})")
