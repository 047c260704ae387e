"""Exceptions of the sandbox API."""

from __future__ import annotations


class SandboxDied(RuntimeError):
    """The sandbox is gone (timeout, exit, out of memory, protocol violation, closed); the reason says which.

    Raised by the failing call and by every later call; the host process itself is unaffected."""


class NoResult(LookupError):
    """The model's code never set `result`."""


class SandboxUnavailable(RuntimeError):
    """No isolating backend works on this machine (and `unsafe=True` was not given), or a backend
    that was asked for explicitly cannot run here."""
