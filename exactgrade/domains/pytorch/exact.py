"""Independent recomputation of the answer keys, without torch.

Integer-valued and dyadic results are computed in exact Fraction arithmetic; transcendental
ones (exp, log, sqrt, erf, tanh) with mpmath at DIGITS significant digits. The results are
ExactTensors (dtype, shape, exact values) that the domain check compares with the torch key.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import mpmath

from exactgrade.values import TensorValue, dtype_family

DIGITS = 50
Number = int | Fraction


def to_fraction(x: Any) -> Fraction:
    """The exact value of an int, Fraction, finite float or mpmath mpf."""
    if type(x) is int or type(x) is Fraction:
        return Fraction(x)
    if type(x) is float:
        if not math.isfinite(x):
            raise ValueError(f"{x!r} has no exact value")
        return Fraction(*x.as_integer_ratio())
    if isinstance(x, mpmath.mpf):
        if not mpmath.isfinite(x):
            raise ValueError(f"{x!r} has no exact value")
        mantissa, exponent = x.man_exp  # the magnitude: mpmath keeps the sign apart
        return (-1 if x < 0 else 1) * Fraction(mantissa) * Fraction(2) ** exponent
    raise TypeError(f"cannot take the exact value of {type(x).__name__}")


def hp(x: Any) -> mpmath.mpf:
    """x as an mpmath number at the working precision (exact for dyadic x)."""
    q = to_fraction(x)
    return mpmath.mpf(q.numerator) / q.denominator


def shape_and_flat(nested: Any) -> tuple[tuple[int, ...], list[Any]]:
    """The shape of a rectangular nested list (a bare number has shape ()) and its row-major elements."""
    if not isinstance(nested, list | tuple):
        return (), [nested]
    if not nested:
        return (0,), []
    parts = [shape_and_flat(item) for item in nested]
    shapes = {shape for shape, _ in parts}
    if len(shapes) != 1:
        raise ValueError(f"ragged nested list: sub-shapes {sorted(shapes)}")
    return (len(nested), *shapes.pop()), [x for _, flat in parts for x in flat]


@dataclass(frozen=True, slots=True)
class ExactTensor:
    """A tensor of exact values: Fractions for float dtypes, ints for integer dtypes."""

    dtype: str
    shape: tuple[int, ...]
    values: tuple[Number, ...]

    @classmethod
    def of(cls, dtype: str, nested: Any) -> ExactTensor:
        """From a nested list (or a single number for a 0-d tensor) of ints, Fractions or mpfs."""
        shape, flat = shape_and_flat(nested)
        exact = [to_fraction(x) for x in flat]
        if dtype_family(dtype) == "int":
            if any(q.denominator != 1 for q in exact):
                raise ValueError(f"an {dtype} tensor needs integer values")
            return cls(dtype, shape, tuple(int(q) for q in exact))
        return cls(dtype, shape, tuple(exact))

    def to_tensor_value(self) -> TensorValue:
        """The nearest TensorValue (float elements correctly rounded to double precision)."""
        cast = int if dtype_family(self.dtype) == "int" else float
        return TensorValue(self.dtype, self.shape, tuple(cast(v) for v in self.values))


def values(x: TensorValue) -> list[Any]:
    """A TensorValue as a nested list of exact numbers (Fraction for floats, int for ints)."""
    exact = [Fraction(*v.as_integer_ratio()) if type(v) is float else v for v in x.data]
    return reshape(exact, x.shape)


def reshape(flat: list[Any], shape: tuple[int, ...]) -> Any:
    """A flat row-major list as nested lists of the given shape."""
    if math.prod(shape) != len(flat):
        raise ValueError(f"{len(flat)} values do not fill shape {shape}")
    if not shape:
        return flat[0]
    if len(shape) == 1:
        return list(flat)
    step = math.prod(shape[1:])
    return [reshape(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


def matmul(a: list[list[Any]], b: list[list[Any]]) -> list[list[Any]]:
    """a @ b for nested lists (exact for Fractions)."""
    if len(a[0]) != len(b):
        raise ValueError(f"cannot multiply {len(a)}x{len(a[0])} by {len(b)}x{len(b[0])}")
    columns = transpose(b)
    return [[sum((p * q for p, q in zip(row, column, strict=True)), Fraction(0)) for column in columns]
            for row in a]


def transpose(a: list[list[Any]]) -> list[list[Any]]:
    return [list(column) for column in zip(*a, strict=True)]


def mean(xs: list[Any]) -> Any:
    return sum(xs, Fraction(0)) / len(xs)


def softmax(xs: list[Any]) -> list[mpmath.mpf]:
    exps = [mpmath.exp(hp(x)) for x in xs]
    total = mpmath.fsum(exps)
    return [e / total for e in exps]


def log_softmax(xs: list[Any]) -> list[mpmath.mpf]:
    log_total = mpmath.log(mpmath.fsum(mpmath.exp(hp(x)) for x in xs))
    return [hp(x) - log_total for x in xs]


def sigmoid(x: Any) -> mpmath.mpf:
    return 1 / (1 + mpmath.exp(-hp(x)))


def elementwise(function: Any, nested: Any) -> Any:
    """``function`` applied to every element of a nested list (or to a bare number)."""
    if isinstance(nested, list):
        return [elementwise(function, item) for item in nested]
    return function(nested)


def innermost_rows(nested: Any) -> list[list[Any]]:
    """The last-axis rows of a nested list, in row-major order."""
    if not isinstance(nested[0], list):
        return [nested]
    return [row for item in nested for row in innermost_rows(item)]
