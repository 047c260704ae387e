"""A sandbox's disk budget: `Limits.disk_bytes` in at most `Limits.max_files` entries, on either backend.

namespaces  /work, /tmp and /dev/shm are one tmpfs of disk_bytes with max_files inodes: the kernel
            refuses the write past it (ENOSPC), nothing reaches the host disk, and its pages count
            against the memory cgroup too. While a call runs (every POLL seconds) and after it the
            host looks at it (one fstatvfs): a full tmpfs ends the sandbox, as on the other backend.
landlock    the work dir is on the host disk, and quotas, a size-limited mount or a loop device all
(and unsafe) need privileges the fallback does not have (CAP_SYS_ADMIN). So the host accounts for
            it: RLIMIT_FSIZE caps each file at min(max_file_bytes, disk_bytes), and while a call
            runs and after it the host walks the work dir (allocated blocks, entries), at most
            every POLL seconds and at most WALK_SHARE of a CPU, and adds the files the sandbox
            deleted but holds open (/proc/PID/fd: they keep their blocks); every DEEP_EVERY-th
            walk and the one after an exec/bash call also those it holds mapped (/proc/PID/maps).
            Over the budget, the sandbox is killed (the model's fault) and its work dir deleted.
            Worst-case overshoot: what the sandbox writes in one walk interval plus one walk
            (DEEP_EVERY intervals for deleted files it only maps); see BENCHMARKS.md.

Between calls nothing is polled: processes left running then get IDLE_CPUS of CPU (cgroups.py), and
the check after each call and at the start of the next one's polls catches what they wrote.
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
        self.next_walk = 0.0  # time.monotonic() before which the work dir is not walked again
        self.deep_pending = False  # a deep check was asked for and skipped

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

    def over(self, pids: Callable[[], set[int]], deep: bool = False) -> str | None:
        """None within budget; else evidence of what the sandbox holds: the work dir and the deleted
        files the processes pids() hold open; with deep (now, or at the next walk if this one is
        skipped, and every DEEP_EVERY-th walk), mapped too. On the namespaces tmpfs: whether it
        is full (one fstatvfs, never skipped)."""
        if self.workdir is None:
            try:
                info = os.fstatvfs(self.tmpfs_fd) if self.tmpfs_fd >= 0 else None
            except OSError:
                info = None
            if info is None or (info.f_bavail > 0 and info.f_favail > 0):
                return None
            return f"its tmpfs of {self.disk_bytes} bytes / {self.max_files} inodes is full"
        self.deep_pending |= deep
        started = time.monotonic()
        if started < self.next_walk:
            return None
        self.polls += 1
        use = tree_usage(self.workdir, self.max_files)
        maps = self.deep_pending or self.polls % DEEP_EVERY == 0
        self.deep_pending = False
        held = held_deleted(pids(), self.device, self.max_file_bytes, maps=maps)
        self.last = DiskUse(use.bytes + held, use.entries, held)
        took = time.monotonic() - started
        self.next_walk = started + max(POLL, took / WALK_SHARE)
        if self.last.bytes > self.disk_bytes or self.last.entries > self.max_files:
            return (f"its work dir held {self.last.bytes} bytes in {self.last.entries} entries "
                    f"({held} bytes of them in deleted files still held open or mapped); budget "
                    f"{self.disk_bytes} bytes, {self.max_files} entries")
        return None
