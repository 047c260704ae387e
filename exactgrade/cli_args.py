"""Argument checks for `python -m exactgrade`: argparse ``type=`` functions with clear messages.

Each takes the option's text and returns the checked value or raises ``ArgumentValueError``,
which argparse turns into one line naming the option, and which callers outside argparse can
catch as a ValueError. Paths are checked for what the command will do with them (create a
directory, append to a file, read a file) without leaving anything behind.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import tempfile
from pathlib import Path

SMALL_TEXT = 1 << 20
"""The most bytes small_text_file accepts."""

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class ArgumentValueError(argparse.ArgumentTypeError, ValueError):
    """A bad command-line value; argparse prints its message after the option's name."""


def _integer(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ArgumentValueError(f"must be {what}, got {text!r}") from None


def positive_int(text: str) -> int:
    """An int >= 1 (a count of tasks, rollouts, turns)."""
    value = _integer(text, "a positive integer")
    if value < 1:
        raise ArgumentValueError(f"must be a positive integer (1 or more), got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """An int >= 0 (a seed, a count that may be zero)."""
    value = _integer(text, "a non-negative integer")
    if value < 0:
        raise ArgumentValueError(f"must be a non-negative integer (0 or more), got {text!r}")
    return value


def positive_seconds(text: str) -> float:
    """A finite number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        raise ArgumentValueError(f"must be a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise ArgumentValueError(f"must be a finite number of seconds greater than 0, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    """A finite number >= 0 (a sampling temperature)."""
    try:
        value = float(text)
    except ValueError:
        raise ArgumentValueError(f"must be a number, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise ArgumentValueError(f"must be a finite number of 0 or more, got {text!r}")
    return value


def port(text: str) -> int:
    """A TCP port 0-65535 (0: the system picks a free one)."""
    value = _integer(text, "a port number from 0 to 65535")
    if not 0 <= value <= 65535:
        raise ArgumentValueError(f"must be a port number from 0 to 65535, got {text!r}")
    return value


def levels_range(text: str) -> tuple[int, ...]:
    """``"3"`` or ``"1-5"``: the levels selected, in increasing order (exactgrade.family.parse_levels)."""
    from exactgrade.family import parse_levels

    try:
        return parse_levels(text)
    except ValueError as error:
        raise ArgumentValueError(str(error)) from None


def non_empty(text: str) -> str:
    """A string with something in it besides spaces (a model name)."""
    if not text.strip():
        raise ArgumentValueError("must not be empty")
    return text


def env_var_name(text: str) -> str:
    """The name of an environment variable that is set (it holds an API key)."""
    if not _ENV_NAME.fullmatch(text):
        raise ArgumentValueError(f"must be the name of an environment variable, got {text!r}")
    if not os.environ.get(text):
        raise ArgumentValueError(f"the environment variable {text} is not set or empty")
    return text


def http_url(text: str) -> str:
    """An http:// or https:// URL with a host."""
    if not re.fullmatch(r"https?://[^\s/?#]+[^\s]*", text):
        raise ArgumentValueError(f"must be an http:// or https:// URL, got {text!r}")
    return text


def _nearest_existing(path: Path) -> Path:
    probe = path.absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return probe


def _can_create_in(directory: Path, wanted: Path) -> None:
    """Raise unless a directory can be created inside ``directory`` (tried, then removed: as root,
    os.access says yes to read-only mounts and /proc)."""
    if not directory.is_dir():
        raise ArgumentValueError(f"cannot create {wanted}: {directory} is not a directory")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".exactgrade-probe-", dir=directory))
    except OSError as error:
        raise ArgumentValueError(f"cannot write to {wanted}: creating a directory in {directory} "
                                 f"fails: {error.strerror or error}") from None


def writable_dir(text: str) -> Path:
    """A directory that exists and is writable, or that can be created (nothing is created)."""
    if not text:
        raise ArgumentValueError("must be a directory path, got ''")
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise ArgumentValueError(f"{path} exists and is not a directory")
    _can_create_in(_nearest_existing(path), path)
    return path


def writable_file(text: str) -> Path:
    """A file that can be appended to, or created in an existing directory."""
    if not text:
        raise ArgumentValueError("must be a file path, got ''")
    path = Path(text)
    if path.is_dir():
        raise ArgumentValueError(f"{path} is a directory, not a file")
    if path.exists():
        try:
            with path.open("a"):
                pass
        except OSError as error:
            raise ArgumentValueError(f"cannot append to {path}: {error.strerror or error}") from None
        return path
    if not path.parent.exists():
        raise ArgumentValueError(f"cannot create {path}: the directory {path.parent} does not exist")
    _can_create_in(path.parent, path)
    return path


def _read_head(text: str, size: int) -> tuple[Path, bytes]:
    path = Path(text)
    if not path.exists():
        raise ArgumentValueError(f"{path} does not exist")
    if not path.is_file():
        raise ArgumentValueError(f"{path} is not a regular file")
    try:
        with path.open("rb") as handle:
            return path, handle.read(size)
    except OSError as error:
        raise ArgumentValueError(f"cannot read {path}: {error.strerror or error}") from None


def readable_file(text: str) -> Path:
    """An existing regular file that can be read."""
    return _read_head(text, 1)[0]


def small_text_file(text: str) -> Path:
    """A readable UTF-8 text file of at most SMALL_TEXT bytes (a token, a short list)."""
    path, head = _read_head(text, SMALL_TEXT + 1)
    if len(head) > SMALL_TEXT:
        raise ArgumentValueError(f"{path} is larger than {SMALL_TEXT} bytes")
    try:
        head.decode("utf-8")
    except UnicodeDecodeError:
        raise ArgumentValueError(f"{path} is not UTF-8 text") from None
    return path
