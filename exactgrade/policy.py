"""Grading policies: frozen values saying how a float may differ from its reference.

Exact() admits no float at all where an exact value is required; RelTol(rtol) admits
|a - ref| <= rtol * |ref| (decided exactly); AllClose(rtol, atol) is the elementwise tensor
rule |a - e| <= atol + rtol * |e|.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


def _check_tolerance(name: str, value: float) -> None:
    if type(value) not in (int, float) or math.isnan(value) or math.isinf(value) or value < 0:
        raise ValueError(f"{name}={value!r} must be a finite number >= 0")


@dataclass(frozen=True, slots=True)
class Exact:
    """Values must be equal exactly; a float never matches an exact reference."""

    def describe(self) -> str:
        return "Exact()"


@dataclass(frozen=True, slots=True)
class RelTol:
    """A float answer passes iff |a - ref| <= rtol * |ref|."""

    rtol: float = 1e-9

    def __post_init__(self) -> None:
        _check_tolerance("rtol", self.rtol)

    def describe(self) -> str:
        return f"RelTol(rtol={self.rtol!r})"


@dataclass(frozen=True, slots=True)
class AllClose:
    """Elementwise |a - e| <= atol + rtol * |e| (tensors and floats)."""

    rtol: float = 1e-5
    atol: float = 1e-7

    def __post_init__(self) -> None:
        _check_tolerance("rtol", self.rtol)
        _check_tolerance("atol", self.atol)

    def describe(self) -> str:
        return f"AllClose(rtol={self.rtol!r}, atol={self.atol!r})"


Policy = Exact | RelTol | AllClose


def policy_to_value(policy: Policy) -> dict[str, str | float]:
    """A plain dict for the wire/dataset: {"kind": "RelTol", "rtol": 1e-09}."""
    if isinstance(policy, Exact):
        return {"kind": "Exact"}
    if isinstance(policy, RelTol):
        return {"kind": "RelTol", "rtol": float(policy.rtol)}
    if isinstance(policy, AllClose):
        return {"kind": "AllClose", "rtol": float(policy.rtol), "atol": float(policy.atol)}
    raise TypeError(f"not a policy: {type(policy).__name__}")


def policy_from_value(value: object) -> Policy:
    """Inverse of policy_to_value; ValueError on anything else."""
    if not isinstance(value, dict):
        raise ValueError(f"a policy is a dict, got {type(value).__name__}")
    fields = {"Exact": set(), "RelTol": {"rtol"}, "AllClose": {"rtol", "atol"}}
    kind = value.get("kind")
    if kind not in fields or set(value) != fields[kind] | {"kind"}:
        raise ValueError(f"malformed policy {value!r}")
    numbers = {k: v for k, v in value.items() if k != "kind"}
    if any(type(v) is not float for v in numbers.values()):
        raise ValueError(f"policy tolerances must be floats: {value!r}")
    return {"Exact": Exact, "RelTol": RelTol, "AllClose": AllClose}[kind](**numbers)
