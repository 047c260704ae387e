"""Exceptions of the sandbox API."""

from __future__ import annotations

from exactgrade.wire import WireError


class SandboxDied(RuntimeError):
    """The sandbox is gone (timeout, exit, out of memory, protocol violation, closed); the reason says which.

    Raised by the failing call and by every later call; the host process itself is unaffected."""


class NoResult(LookupError):
    """The model's code never set `result`."""


class SandboxUnavailable(RuntimeError):
    """No isolating backend works on this machine (and `unsafe=True` was not given), or a backend
    that was asked for explicitly cannot run here."""


class ResultNotEncodable(WireError):
    """`result` holds something the wire format cannot carry (an arbitrary object, a subclass of a
    number): the answer is not gradeable, which is a wrong answer, not a harness failure."""
