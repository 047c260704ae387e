"""Removing a sandbox's work dir, whatever the model built in it.

shutil.rmtree recurses once per level (Python 3.11): a 3,000-level tree raised RecursionError from
close(), leaving the dir and the uid slot behind. Paths that deep are also longer than PATH_MAX.
remove_tree holds one fd at a time and no path longer than one name, so depth never matters.
"""

from __future__ import annotations

import os
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def remove_tree(path: Path) -> None:
    """Delete path and everything under it (no-op if it does not exist); symlinks are not followed.
    Depth first with one open fd: down by name, back up through "..", so no recursion, no long path."""
    try:
        fd = os.open(path, _DIR_FLAGS)
    except FileNotFoundError:
        return
    below: list[str] = []  # names from path down to the dir fd is open on
    try:
        while True:
            subdir = None
            with os.scandir(fd) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        subdir = entry.name
                        break
                    os.unlink(entry.name, dir_fd=fd)
            if subdir is not None:
                fd = _reopen(fd, subdir)
                below.append(subdir)
            elif below:
                fd = _reopen(fd, "..")
                os.rmdir(below.pop(), dir_fd=fd)
            else:
                break
    finally:
        os.close(fd)
    os.rmdir(path)


def _reopen(fd: int, name: str) -> int:
    new = os.open(name, _DIR_FLAGS, dir_fd=fd)
    os.close(fd)
    return new
