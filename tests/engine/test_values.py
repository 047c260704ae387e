"""TensorValue and dtype families: validation, immutability, torch conversion."""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import pytest
import sympy
import torch

from exactgrade import TensorValue
from exactgrade.values import BOOL_DTYPES, DTYPES, FLOAT_DTYPES, INT_DTYPES, dtype_family, typed_equal


@pytest.mark.parametrize(("dtype", "family"), [
    ("float32", "float"), ("bfloat16", "float"), ("float64", "float"), ("uint8", "int"), ("int64", "int"),
    ("bool", "bool"),
])
def test_dtype_family(dtype: str, family: str) -> None:
    assert dtype_family(dtype) == family


def test_dtype_sets_partition_dtypes() -> None:
    assert FLOAT_DTYPES | INT_DTYPES | BOOL_DTYPES == DTYPES
    assert not (FLOAT_DTYPES & INT_DTYPES or INT_DTYPES & BOOL_DTYPES or FLOAT_DTYPES & BOOL_DTYPES)


@pytest.mark.parametrize("dtype", ["complex64", "torch.float32", "float", ""])
def test_unknown_dtype(dtype: str) -> None:
    with pytest.raises(ValueError, match="unknown dtype"):
        dtype_family(dtype)


# (id, dtype, shape, data, fragment of the ValueError)
INVALID = [
    ("unknown-dtype", "complex64", (1,), (1.0,), "unknown dtype"),
    ("shape-list", "float32", [1], (1.0,), "must be a tuple of non-negative ints"),
    ("shape-negative", "float32", (-1,), (), "must be a tuple of non-negative ints"),
    ("shape-bool", "float32", (True,), (1.0,), "must be a tuple of non-negative ints"),
    ("data-list", "float32", (1,), [1.0], "data must be a tuple"),
    ("too-few", "float32", (2, 2), (1.0, 2.0, 3.0), "data has 3 elements but shape (2, 2) needs 4"),
    ("too-many", "float32", (), (1.0, 2.0), "needs 1"),
    ("int-in-float", "float32", (1,), (1,), "dtype float32 needs float elements, got int"),
    ("bool-in-int", "int64", (1,), (True,), "dtype int64 needs int elements, got bool"),
    ("int-in-bool", "bool", (1,), (1,), "dtype bool needs bool elements, got int"),
    ("float-in-int", "int32", (1,), (1.0,), "needs int elements, got float"),
]


@pytest.mark.parametrize(("dtype", "shape", "data", "fragment"), [c[1:] for c in INVALID],
                         ids=[c[0] for c in INVALID])
def test_invalid_tensor_values(dtype: str, shape: object, data: object, fragment: str) -> None:
    with pytest.raises(ValueError) as error:
        TensorValue(dtype, shape, data)  # type: ignore[arg-type]
    assert fragment in str(error.value)


def test_tensor_value_is_frozen_and_hashable() -> None:
    value = TensorValue("float32", (2,), (1.0, math.nan))
    assert hash(value) == hash(TensorValue("float32", (2,), (1.0, math.nan)))
    assert value == value and value != TensorValue("float64", (2,), (1.0, math.nan))
    with pytest.raises(dataclasses.FrozenInstanceError):
        value.dtype = "float64"  # type: ignore[misc]


@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_torch_round_trip(dtype: str) -> None:
    tensor = (torch.arange(6) % 3).reshape(2, 3).to(getattr(torch, dtype))
    value = TensorValue.from_torch(tensor)
    assert value.dtype == dtype and value.shape == (2, 3)
    element_type = {"float": float, "int": int, "bool": bool}[dtype_family(dtype)]
    assert all(type(x) is element_type for x in value.data)
    back = value.to_torch()
    assert back.dtype == tensor.dtype and torch.equal(back, tensor)


def test_from_torch_is_row_major_for_views_and_detaches() -> None:
    base = torch.arange(6, dtype=torch.float32).reshape(2, 3).requires_grad_()
    value = TensorValue.from_torch(base.t() * 1)
    assert value.shape == (3, 2)
    assert value.data == (0.0, 3.0, 1.0, 4.0, 2.0, 5.0)


def test_from_torch_keeps_special_floats() -> None:
    value = TensorValue.from_torch(torch.tensor([math.nan, -math.inf, -0.0]))
    assert math.isnan(value.data[0]) and value.data[1] == -math.inf
    assert math.copysign(1.0, value.data[2]) == -1.0


def test_from_torch_rejects_unsupported_dtype() -> None:
    with pytest.raises(ValueError, match="unknown dtype 'complex64'"):
        TensorValue.from_torch(torch.ones(1, dtype=torch.complex64))


TYPED_EQUAL_CASES = [
    (1, 1, True),
    (1, True, False),
    (1, Fraction(1), False),
    (1, 1.0, False),
    (0.0, -0.0, False),
    ([1, 2], (1, 2), False),
    ({"a": 1, "b": 2}, {"b": 2, "a": 1}, True),
    ({"a": 1}, {"a": 1, "b": 2}, False),
    ({"a": [Fraction(1, 2)]}, {"a": [Fraction(2, 4)]}, True),
    (TensorValue("float32", (1,), (1.0,)), TensorValue("float64", (1,), (1.0,)), False),
    (TensorValue("int64", (2, 1), (1, 2)), TensorValue("int64", (1, 2), (1, 2)), False),
    # symbols: the same name and domain, however the assumptions were spelled (sympy's own equality)
    (sympy.Symbol("p", positive=True), sympy.Symbol("p", positive=True, real=True), True),
    (sympy.Symbol("p", positive=True), sympy.Symbol("p"), False),
    (sympy.Symbol("p", positive=True), sympy.Symbol("q", positive=True), False),
    (sympy.Symbol("x") + 1, 1 + sympy.Symbol("x"), True),
]


@pytest.mark.parametrize(("a", "b", "same"), TYPED_EQUAL_CASES)
def test_typed_equal(a, b, same):
    assert typed_equal(a, b) is same
