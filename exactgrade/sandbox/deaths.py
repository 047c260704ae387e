"""Whose failure ended a sandbox, from what the host can see when its worker's reply channel closes.

A harness failure must mean the harness failed: a death the model's own code can cause is the
model's (a wrong answer, reward 0), or a policy could void its bad rollouts by crashing them.
The evidence, read in this order:

1. no model code has run yet                    -> harness (the sandbox failed to start)
2. the zygote exited or is exiting              -> harness (its sandboxes die with it)
3. an OOM killer killed a process of the memory cgroup:
   and the group's peak usage reached its limit -> model (its memory limit)
   and it never did                             -> harness (the host's own OOM killer)
4. namespaces backend: the sandbox's init (pid 1 of its pid namespace, which model code can neither
   signal nor ptrace) writes its worker's wait status to a pipe only it holds:
   a status                                     -> model (the worker exited or was killed from
                                                   inside: os._exit, a signal to itself, RLIMIT_CPU)
   end of file without a status                 -> harness (the jail was killed from outside)
   nothing within STATUS_WAIT seconds           -> model (it closed its reply channel and runs on)
5. landlock / unsafe backends: the worker is the jail, so nothing but its own code or the zygote's
   end (2) kills it while the host holds it     -> model

Timeouts, protocol violations and a blown disk budget after model code ran are the model's too
(sandbox.py says so where it detects them). A call limit is charged in the sandbox's own time,
not the host's (calltime.py): a call the host starved until the wall-clock cap is the harness's.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import time

from exactgrade.sandbox.cgroups import SandboxCgroup
from exactgrade.sandbox.errors import Death

STATUS_WAIT = 2.0
"""Seconds the host waits for the init's report after the reply channel closed."""
_PF_EXITING = 0x4  # task flag: the process has entered exit (/proc/PID/stat field 9)
_STATUS = re.compile(rb"([0-9]{1,10})\n")


def exit_death(*, model_ran: bool, zygote: subprocess.Popen, cgroup: SandboxCgroup | None,
               memory_bytes: int, status_fd: int | None) -> Death:
    """The Death of a sandbox whose reply channel just closed (status_fd None: no init reports)."""
    if not model_ran:
        return Death("the sandbox worker exited before any model code ran", "harness",
                     "the reply channel closed during start-up")
    zygote_end = _zygote_end(zygote)
    if zygote_end is not None:
        return Death("the sandbox's zygote died, and the sandbox with it", "harness", zygote_end)
    if cgroup is not None and cgroup.oom_killed():
        peak = cgroup.peak_memory()
        if cgroup.memory_failures() > 0 or peak >= memory_bytes - max(1 << 20, memory_bytes // 100):
            return Death(f"the sandbox ran out of memory (limit {memory_bytes} bytes) and was killed",
                         "model", f"memory cgroup: an OOM kill at a peak of {peak} bytes, its limit")
        return Death("the host's out-of-memory killer killed the sandbox", "harness",
                     f"memory cgroup: an OOM kill at a peak of {peak} bytes, below its limit {memory_bytes}")
    pids = pids_evidence(cgroup)
    if status_fd is None:
        return Death("the sandbox worker exited", "model",
                     "the worker ended while its zygote runs (no jail process on this backend)" + pids)
    outcome, status = _read_status(status_fd, STATUS_WAIT)
    if outcome == "reported":
        return Death(f"the sandbox worker exited ({describe_wait_status(status)})", "model",
                     f"its init reported the worker's end: {describe_wait_status(status)}{pids}")
    if outcome == "silent":
        return Death("the sandbox's jail was killed from outside", "harness",
                     "its init ended without reporting its worker's end")
    return Death("the sandbox worker closed its reply channel", "model",
                 f"no end reported within {STATUS_WAIT:g} s: the worker still runs{pids}")


def pids_evidence(cgroup: SandboxCgroup | None) -> str:
    """'; pids limit hit N times' when forks of the sandbox failed at its process limit, else ''."""
    hits = cgroup.pids_limit_hits() if cgroup is not None else 0
    return f"; pids limit hit {hits} times" if hits else ""


def describe_wait_status(status: int) -> str:
    """'exit status 3' or 'killed by SIGKILL' for a raw wait status."""
    try:
        code = os.waitstatus_to_exitcode(status)
    except ValueError:
        return f"wait status {status}"
    if code >= 0:
        return f"exit status {code}"
    try:
        return f"killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"killed by signal {-code}"


def _zygote_end(zygote: subprocess.Popen) -> str | None:
    """Why the zygote is gone or going, or None while it runs. An exiting zygote counts: its
    children may notice its end (and close their pipes) before it is a zombie."""
    code = zygote.poll()
    if code is not None:
        ending = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
        return f"the zygote process exited ({ending})"
    try:
        with open(f"/proc/{zygote.pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except OSError:
        return "the zygote process is gone"
    if fields[0] in (b"Z", b"X") or int(fields[6]) & _PF_EXITING:
        return "the zygote process is exiting"
    return None


def _read_status(fd: int, timeout: float) -> tuple[str, int]:
    """("reported", wait status) | ("silent", 0) at end of file | ("pending", 0) after timeout."""
    deadline = time.monotonic() + timeout
    data = b""
    while True:
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        if not poller.poll(max(deadline - time.monotonic(), 0) * 1000):
            return "pending", 0
        try:
            chunk = os.read(fd, 64)
        except BlockingIOError:
            continue
        except OSError:
            chunk = b""
        if not chunk:
            match = _STATUS.fullmatch(data)
            return ("reported", int(match.group(1))) if match else ("silent", 0)
        data += chunk
        match = _STATUS.fullmatch(data)
        if match:
            return "reported", int(match.group(1))
        if len(data) > 16:
            return "silent", 0
