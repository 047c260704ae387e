"""Policies: defaults, validation, descriptions, and the plain-dict form used on the wire."""

from __future__ import annotations

import dataclasses
import math

import pytest

from exactgrade import AllClose, Exact, RelTol
from exactgrade.policy import policy_from_value, policy_to_value


def test_defaults() -> None:
    assert RelTol().rtol == 1e-9
    assert (AllClose().rtol, AllClose().atol) == (1e-5, 1e-7)
    assert Exact() == Exact()


@pytest.mark.parametrize(("policy", "text"), [(Exact(), "Exact()"), (RelTol(1e-9), "RelTol(rtol=1e-09)"),
                                              (AllClose(1e-5, 1e-7), "AllClose(rtol=1e-05, atol=1e-07)")])
def test_describe(policy: object, text: str) -> None:
    assert policy.describe() == text  # type: ignore[attr-defined]


# (id, constructor, kwargs, fragment)
INVALID = [
    ("negative-rtol", RelTol, {"rtol": -1e-9}, "rtol=-1e-09 must be a finite number >= 0"),
    ("nan-rtol", RelTol, {"rtol": math.nan}, "rtol=nan"),
    ("inf-rtol", RelTol, {"rtol": math.inf}, "rtol=inf"),
    ("bool-rtol", RelTol, {"rtol": True}, "rtol=True"),
    ("str-rtol", RelTol, {"rtol": "1e-9"}, "rtol='1e-9'"),
    ("negative-atol", AllClose, {"atol": -1.0}, "atol=-1.0"),
    ("nan-atol", AllClose, {"atol": math.nan}, "atol=nan"),
    ("none-rtol", AllClose, {"rtol": None}, "rtol=None"),
]


@pytest.mark.parametrize(("cls", "kwargs", "fragment"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_tolerances(cls: type, kwargs: dict, fragment: str) -> None:
    with pytest.raises(ValueError) as error:
        cls(**kwargs)
    assert fragment in str(error.value)


def test_policies_are_frozen_and_hashable() -> None:
    assert len({RelTol(1e-9), RelTol(1e-9), AllClose(), Exact()}) == 3
    with pytest.raises(dataclasses.FrozenInstanceError):
        RelTol().rtol = 0.1  # type: ignore[misc]


@pytest.mark.parametrize(("policy", "value"), [
    (Exact(), {"kind": "Exact"}),
    (RelTol(1e-9), {"kind": "RelTol", "rtol": 1e-9}),
    (RelTol(0), {"kind": "RelTol", "rtol": 0.0}),
    (AllClose(1e-5, 1e-7), {"kind": "AllClose", "rtol": 1e-5, "atol": 1e-7}),
])
def test_value_round_trip(policy: object, value: dict) -> None:
    converted = policy_to_value(policy)  # type: ignore[arg-type]
    assert converted == value
    assert all(type(v) is float for k, v in converted.items() if k != "kind")
    assert policy_from_value(converted) == policy


@pytest.mark.parametrize(("value", "fragment"), [
    ("RelTol", "a policy is a dict, got str"),
    ({"kind": "Loose"}, "malformed policy"),
    ({"kind": "RelTol"}, "malformed policy"),
    ({"kind": "Exact", "rtol": 0.0}, "malformed policy"),
    ({"kind": "RelTol", "rtol": 1e-9, "atol": 0.0}, "malformed policy"),
    ({"kind": "RelTol", "rtol": 1}, "tolerances must be floats"),
    ({"kind": "RelTol", "rtol": "1e-9"}, "tolerances must be floats"),
    ({"kind": "RelTol", "rtol": -1.0}, "must be a finite number >= 0"),
])
def test_malformed_values(value: object, fragment: str) -> None:
    with pytest.raises(ValueError) as error:
        policy_from_value(value)
    assert fragment in str(error.value)


def test_policy_to_value_rejects_non_policies() -> None:
    with pytest.raises(TypeError, match="not a policy: str"):
        policy_to_value("Exact")  # type: ignore[arg-type]
