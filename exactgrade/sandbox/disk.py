"""A sandbox's disk budget: `Limits.disk_bytes` in at most `Limits.max_files` entries, on either backend.

namespaces  /work, /tmp and /dev/shm are one tmpfs of disk_bytes with max_files inodes: the kernel
            refuses the write past it (ENOSPC), nothing reaches the host disk (overshoot 0), and
            its pages count against the memory cgroup too. While a call runs (every POLL seconds)
            and after every call the host looks at it (one fstatvfs): a full tmpfs ends the sandbox.
landlock    the work dir is on the host disk. Nothing that would bound it in the kernel is open to
(unsafe:    this backend: a tmpfs or loop mount, quotas (quotactl) and FUSE all need CAP_SYS_ADMIN
 1 and 3)   (fusermount's too), which the containers it exists for do not grant. So the host
            accounts for it, and three things bound what the sandbox can hold past the budget:
            1. RLIMIT_FSIZE caps each file at min(max_file_bytes, disk_bytes).
            2. seccomp refuses fallocate() (EOPNOTSUPP; glibc's posix_fallocate then writes the
               blocks): allocating with no data to copy had made 3.2 GB (all a loop asked for)
               by the first walk here. What remains is writing, at page-cache speed.
            3. The host walks the work dir (allocated blocks, entries) and adds the files the
               sandbox deleted but holds open (/proc/PID/fd: they keep their blocks), and, after
               an exec/bash call and every DEEP_EVERY-th walk, those it holds mapped
               (/proc/PID/maps). After EVERY call, never skipped: no call returns while the
               sandbox holds more than its budget (a check after the call throttled
               like the polls let a call hold 192 MiB against 64 MiB and return). While a call
               runs, at most every POLL seconds and at most WALK_SHARE of a CPU, counted in the
               walk's own CPU time (a throttle in wall time stretches with the host's load).
            Over the budget, the sandbox is killed (the model's fault) and its work dir deleted.
            Overshoot: what the sandbox writes between two walks (one poll interval plus the
            host's delay in getting to the walk); see BENCHMARKS.md.

Between calls nothing is polled: processes left running then get IDLE_CPUS of CPU (cgroups.py), and
the check after each call and the polls of the next one catch what they wrote.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

POLL = 0.05
"""Seconds between two walks of a landlock sandbox's work dir, at least (while a call runs, and at
the end of calls: a burst of short calls gets one walk per POLL, not one each)."""
WALK_SHARE = 0.05
"""At most this share of a CPU goes to walking one sandbox's work dir: a walk that took t seconds
waits t / WALK_SHARE before the next (a work dir of many files is walked less often)."""
DEEP_EVERY = 10
"""Every this many polls (and after every call) deleted files still held are counted as well."""

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class DiskUse:
    """What a sandbox holds on disk: allocated bytes and directory entries (files, dirs, links)."""

    bytes: int
    entries: int
    held_bytes: int = 0  # of `bytes`: in files deleted but still open or mapped


def tree_usage(path: Path, max_entries: int) -> DiskUse:
    """Allocated bytes (st_blocks) and entries under path, stopping once entries exceed max_entries.
    One directory fd at a time, down by name and up by "..", so depth never matters (like
    workdirs.remove_tree); a directory moved during the walk ends it early (a lower bound)."""
    try:
        fd = os.open(path, _DIR_FLAGS)
    except FileNotFoundError:
        return DiskUse(0, 0)
    total = entries = 0
    levels: list[tuple[int, int]] = []  # (st_dev, st_ino) of each directory from path down to fd's
    pending: list[list[str]] = []  # subdirectories still to visit, per level

    def scan() -> None:
        nonlocal total, entries
        info = os.fstat(fd)
        levels.append((info.st_dev, info.st_ino))
        subdirs = []
        with os.scandir(fd) as it:
            for entry in it:
                entries += 1
                try:
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                total += st.st_blocks * 512
                if stat.S_ISDIR(st.st_mode):
                    subdirs.append(entry.name)
                if entries > max_entries:
                    break
        pending.append(subdirs)

    try:
        scan()
        while pending and entries <= max_entries:
            if not pending[-1]:
                pending.pop()
                levels.pop()
                if not pending:
                    break
                fd = _reopen(fd, "..")
                info = os.fstat(fd)
                if (info.st_dev, info.st_ino) != levels[-1]:
                    break  # moved under us
                continue
            name = pending[-1].pop()
            try:
                fd = _reopen(fd, name)
            except OSError:  # gone, or no longer a directory
                continue
            scan()
    finally:
        os.close(fd)
    return DiskUse(total, entries)


def tmpfs_usage(info: os.statvfs_result) -> DiskUse:
    """What a tmpfs holds, from its fstatvfs (a deleted file still held counts: it keeps its pages)."""
    return DiskUse((info.f_blocks - info.f_bfree) * info.f_frsize, info.f_files - info.f_ffree)


def _reopen(fd: int, name: str) -> int:
    new = os.open(name, _DIR_FLAGS, dir_fd=fd)
    os.close(fd)
    return new


def held_deleted(pids: set[int], device: int, assume_bytes: int, maps: bool) -> int:
    """Bytes in files on `device` that processes `pids` deleted but still hold open (and, with maps,
    mapped). A deleted mapping whose file cannot be opened (map_files needs CAP_SYS_ADMIN) counts
    as assume_bytes, the most RLIMIT_FSIZE lets it hold."""
    seen: dict[int, int] = {}
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            fds = []
        for fd in fds:
            try:
                if not os.readlink(f"/proc/{pid}/fd/{fd}").endswith(" (deleted)"):
                    continue
                info = os.stat(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if info.st_dev == device and stat.S_ISREG(info.st_mode):
                seen[info.st_ino] = info.st_blocks * 512
        if not maps:
            continue
        try:
            with open(f"/proc/{pid}/maps", "rb") as f:
                maps = f.read()
        except OSError:
            continue
        if b" (deleted)" not in maps:
            continue
        wanted = f"{os.major(device):02x}:{os.minor(device):02x}".encode()
        for line in maps.splitlines():
            fields = line.split(None, 5)
            if len(fields) < 6 or fields[3] != wanted or not fields[5].endswith(b" (deleted)"):
                continue
            inode = int(fields[4])
            if inode in seen:
                continue
            try:
                seen[inode] = os.stat(f"/proc/{pid}/map_files/{fields[0].decode()}").st_blocks * 512
            except OSError:
                seen[inode] = assume_bytes
    return sum(seen.values())


class DiskBudget:
    """The disk check of one sandbox (see the module docstring)."""

    def __init__(self, workdir: Path | None, disk_bytes: int, max_files: int, max_file_bytes: int) -> None:
        self.workdir = workdir  # None: the namespaces tmpfs, looked at through tmpfs_fd
        self.disk_bytes, self.max_files, self.max_file_bytes = disk_bytes, max_files, max_file_bytes
        self.device = os.stat(workdir).st_dev if workdir is not None else 0
        self.tmpfs_fd = -1
        self.polls = 0
        self.last = DiskUse(0, 0)
        self.next_walk = 0.0  # time.monotonic() before which a poll does not walk the work dir again

    def hold_tmpfs(self, pids: set[int]) -> None:
        """Open the namespaces sandbox's /work through one of its processes (host pids): fstatvfs on
        it then costs one syscall, and no pid is read again (a pid can be reused, an fd cannot)."""
        for pid in sorted(pids):
            try:
                self.tmpfs_fd = os.open(f"/proc/{pid}/root/work", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
                return
            except OSError:
                continue

    def close(self) -> None:
        """Let go of the tmpfs (an open fd keeps its pages after the sandbox is gone)."""
        if self.tmpfs_fd >= 0:
            os.close(self.tmpfs_fd)
            self.tmpfs_fd = -1

    def poll(self, pids: Callable[[], set[int]]) -> str | None:
        """While a call runs: check() at most every POLL seconds and WALK_SHARE of a CPU (None when
        skipped); every DEEP_EVERY-th walk also counts mapped deleted files."""
        if self.workdir is not None and time.monotonic() < self.next_walk:
            return None
        return self.check(pids, deep=self.polls % DEEP_EVERY == DEEP_EVERY - 1)

    def check(self, pids: Callable[[], set[int]], deep: bool) -> str | None:
        """None within budget; else evidence of what the sandbox holds: the work dir and the deleted
        files the processes pids() hold open (and, with deep, mapped). On the namespaces tmpfs:
        whether it is full (one fstatvfs). Never skipped: the check after every call."""
        if self.workdir is None:
            return self._check_tmpfs()
        started, cpu_started = time.monotonic(), time.thread_time()
        self.polls += 1
        use = tree_usage(self.workdir, self.max_files)
        held = held_deleted(pids(), self.device, self.max_file_bytes, maps=deep)
        self.last = DiskUse(use.bytes + held, use.entries, held)
        self.next_walk = started + max(POLL, (time.thread_time() - cpu_started) / WALK_SHARE)
        if self.last.bytes > self.disk_bytes or self.last.entries > self.max_files:
            return (f"its work dir held {self.last.bytes} bytes in {self.last.entries} entries "
                    f"({held} bytes of them in deleted files still held open or mapped); budget "
                    f"{self.disk_bytes} bytes, {self.max_files} entries")
        return None

    def _check_tmpfs(self) -> str | None:
        try:
            info = os.fstatvfs(self.tmpfs_fd) if self.tmpfs_fd >= 0 else None
        except OSError:
            info = None
        if info is None:
            return None
        self.last = tmpfs_usage(info)
        if info.f_bavail > 0 and info.f_favail > 0:
            return None
        return (f"its tmpfs of {self.disk_bytes} bytes / {self.max_files} inodes is full "
                f"({self.last.bytes} bytes in {self.last.entries} inodes)")
