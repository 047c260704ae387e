"""One dedicated uid per live sandbox, unique across every process on the machine.

Each sandbox runs as its own uid (no passwd entry needed: the kernel only sees numbers), so
sandboxes cannot read, signal or out-count each other, RLIMIT_NPROC means something, and
`kill -1` as that uid reaches exactly that sandbox's processes. Slots are claimed with a
non-blocking flock on a per-uid lock file; the kernel drops the lock if the holder dies.
"""

from __future__ import annotations

import fcntl
import grp
import os
import pwd
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

UID_BASE = 61000
UID_COUNT = 1000


@dataclass(frozen=True, slots=True)
class UidSlot:
    uid: int
    lock_fd: int

    def release(self) -> None:
        os.close(self.lock_fd)


def _taken_by_a_real_account(uid: int) -> bool:
    for lookup in (pwd.getpwuid, grp.getgrgid):
        try:
            lookup(uid)
            return True
        except KeyError:
            pass
    return False


def try_claim(state_dir: Path, uid: int) -> UidSlot | None:
    """The slot of uid if no process (this one included) holds it, else None."""
    return _claim(_lock_dir(state_dir), uid)


def _lock_dir(state_dir: Path) -> str:
    lock_dir = state_dir / "uids"
    lock_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(lock_dir, 0o700)
    return str(lock_dir)


def _claim(lock_dir: str, uid: int) -> UidSlot | None:
    fd = os.open(f"{lock_dir}/{uid}", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return UidSlot(uid, fd)


_next = [0]
"""Where this process's next search for a free uid starts: just after the uid it claimed last, so a
host holding many sandboxes (and the others' on the machine) does not try every held uid first."""


def acquire(state_dir: Path, base: int = UID_BASE, count: int = UID_COUNT) -> UidSlot:
    """Claim a free uid in [base, base + count); RuntimeError when all are in use."""
    lock_dir = _lock_dir(state_dir)
    start = _next[0]
    for step in range(count):
        uid = base + (start + step) % count
        slot = _claim(lock_dir, uid)
        if slot is None:
            continue
        if _taken_by_a_real_account(uid):
            slot.release()
            continue
        _next[0] = (uid - base + 1) % count
        return slot
    raise RuntimeError(f"all {count} sandbox uids from {base} are in use")


def processes_of(uid: int) -> list[int]:
    """Live (non-zombie) pids, in the host's view, whose real uid is uid."""
    found = []
    wanted = str(uid).encode()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:  # /proc/PID is owned by root for non-dumpable processes: read the real uid instead
            with open(f"/proc/{entry.name}/status", "rb") as status:
                zombie = False
                for line in status:
                    if line.startswith(b"State:"):
                        zombie = line.split()[1] in (b"Z", b"X")
                    elif line.startswith(b"Uid:"):
                        if line.split()[1] == wanted and not zombie:
                            found.append(int(entry.name))
                        break
        except (FileNotFoundError, ProcessLookupError):
            pass
    return found


def kill_all(uid: int, timeout: float = 10.0) -> bool:
    """SIGKILL every process of uid (as that uid, via kill(-1)) until none is left; False if some
    process of it was still alive after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while processes_of(uid):
        if time.monotonic() > deadline:
            return False
        subprocess.run(["/bin/kill", "-9", "-1"], user=uid, group=uid, extra_groups=[],
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.001)
    return True
