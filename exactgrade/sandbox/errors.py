"""Exceptions of the sandbox API."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from exactgrade.wire import WireError

Cause = Literal["model", "harness"]
"""Whose failure ended a sandbox: "model" once the model's code has run in it and its code can
explain the end (it exited or killed its worker, hit its memory limit, ran past its time limit,
broke the reply protocol); "harness" for everything else (the sandbox never got to run model
code, the zygote or the sandbox's jail died, the host closed it, the host ran out of memory)."""


@dataclass(frozen=True, slots=True)
class Death:
    """How a sandbox ended: what happened, whose failure it is, and what the host saw that says so."""

    reason: str
    cause: Cause
    evidence: str


class SandboxDied(RuntimeError):
    """The sandbox is gone (timeout, exit, out of memory, protocol violation, closed); the reason says
    which, `death.cause` whose failure it is and `death.evidence` why the host thinks so.

    Raised by the failing call and by every later call; the host process itself is unaffected."""

    def __init__(self, death: Death) -> None:
        super().__init__(death.reason)
        self.death = death

    @property
    def by_model(self) -> bool:
        """The model's own code ended the sandbox: a wrong answer (reward 0), not a harness failure."""
        return self.death.cause == "model"


class NoResult(LookupError):
    """The model's code never set `result`."""


class SandboxUnavailable(RuntimeError):
    """No isolating backend works on this machine (and `unsafe=True` was not given), or a backend
    that was asked for explicitly cannot run here."""


class ResultNotEncodable(WireError):
    """`result` holds something the wire format cannot carry, even read back as a natural answer
    (an arbitrary object, a complex number, a numpy longdouble): the answer is not gradeable, which
    is a wrong answer, not a harness failure."""
