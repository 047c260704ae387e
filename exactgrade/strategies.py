"""Hypothesis strategies for every kind of graded value, for anyone writing property tests.

    from exactgrade import strategies as egst

    @given(egst.values())
    def test_round_trip(value): ...

Every strategy draws values inside the wire format's limits, so `wire.encode` accepts them.
Sympy expressions are built with sympy's normal evaluation from small parts (rationals, pi, E,
square roots, log and exp of small rationals), so they are canonical and cheap to compare.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from hypothesis import strategies as st

from exactgrade.values import (
    BOOL_DTYPES,
    FLOAT_DTYPES,
    INT_DTYPES,
    TensorValue,
    dtype_family,
    typed_equal,
)

__all__ = [
    "answers",
    "categoricals",
    "exact_values",
    "finite_floats",
    "floats",
    "fractions",
    "integers",
    "positive_fractions",
    "scalars",
    "sympy_values",
    "tensor_values",
    "typed_equal",
    "values",
]

_INT_RANGES = {"uint8": (0, 255), "int8": (-128, 127), "int16": (-(1 << 15), (1 << 15) - 1),
               "int32": (-(1 << 31), (1 << 31) - 1), "int64": (-(1 << 63), (1 << 63) - 1)}


def integers(max_digits: int = 40) -> st.SearchStrategy[int]:
    """Python ints (never bool) with at most max_digits digits."""
    bound = 10**max_digits - 1
    return st.integers(-bound, bound)


def fractions(max_digits: int = 20) -> st.SearchStrategy[Fraction]:
    """Fractions whose numerator and denominator have at most max_digits digits."""
    bound = 10**max_digits - 1
    return st.builds(Fraction, st.integers(-bound, bound), st.integers(1, bound))


def positive_fractions(max_value: int = 10**6) -> st.SearchStrategy[Fraction]:
    """Fractions n/d with 1 <= n, d <= max_value: exactly representable scale, safe in float."""
    return st.builds(Fraction, st.integers(1, max_value), st.integers(1, max_value))


def finite_floats() -> st.SearchStrategy[float]:
    """Finite floats, including -0.0 and subnormals."""
    return st.floats(allow_nan=False, allow_infinity=False)


def floats() -> st.SearchStrategy[float]:
    """Any float, nan and infinities included."""
    return st.floats(allow_nan=True, allow_infinity=True)


def categoricals() -> st.SearchStrategy[Any]:
    """str, bool and None."""
    return st.one_of(st.none(), st.booleans(), st.text(max_size=20))


@st.composite
def _sympy_atom(draw: st.DrawFn) -> Any:
    import sympy

    small = st.integers(1, 50)
    kind = draw(st.sampled_from(["rational", "pi", "E", "sqrt", "log", "exp"]))
    if kind == "rational":
        return sympy.Rational(draw(st.integers(-50, 50)), draw(small))
    if kind == "pi":
        return sympy.pi
    if kind == "E":
        return sympy.E
    if kind == "sqrt":
        return sympy.sqrt(draw(small))
    if kind == "log":
        return sympy.log(draw(st.integers(2, 50)))
    return sympy.exp(sympy.Rational(draw(st.integers(-5, 5)), draw(st.integers(1, 5))))


@st.composite
def sympy_values(draw: st.DrawFn, max_terms: int = 3) -> Any:
    """Exact sympy expressions: sums of products of up to max_terms whitelisted atoms."""
    import sympy

    terms = draw(st.lists(st.lists(_sympy_atom(), min_size=1, max_size=max_terms), min_size=1,
                          max_size=max_terms))
    return sympy.Add(*(sympy.Mul(*factors) for factors in terms))


def exact_values() -> st.SearchStrategy[Any]:
    """int, Fraction or an exact sympy expression."""
    return st.one_of(integers(), fractions(), sympy_values())


def scalars() -> st.SearchStrategy[Any]:
    """Any non-container, non-tensor value."""
    return st.one_of(categoricals(), integers(), fractions(), floats(), sympy_values())


@st.composite
def tensor_values(draw: st.DrawFn, dtype: str | None = None, max_dims: int = 3,
                  max_side: int = 4) -> TensorValue:
    """TensorValues of any (or the given) dtype; float data includes nan, inf and -0.0."""
    if dtype is None:
        dtype = draw(st.sampled_from(sorted(FLOAT_DTYPES | INT_DTYPES | BOOL_DTYPES)))
    shape = tuple(draw(st.lists(st.integers(0, max_side), max_size=max_dims)))
    size = 1
    for n in shape:
        size *= n
    family = dtype_family(dtype)
    if family == "float":
        element = floats()
    elif family == "int":
        element = st.integers(*_INT_RANGES[dtype])
    else:
        element = st.booleans()
    data = draw(st.lists(element, min_size=size, max_size=size))
    return TensorValue(dtype, shape, tuple(data))


def values(max_leaves: int = 12) -> st.SearchStrategy[Any]:
    """Any graded value: scalars and tensors, nested in lists and str-keyed dicts."""
    leaves = st.one_of(scalars(), tensor_values())
    keys = st.text(max_size=8)  # includes keys starting with "$", which the wire format escapes
    return st.recursive(
        leaves,
        lambda children: st.one_of(st.lists(children, max_size=4),
                                   st.dictionaries(keys, children, max_size=4)),
        max_leaves=max_leaves,
    )


def answers(max_rows: int = 4) -> st.SearchStrategy[dict[str, list[Any]]]:
    """Task answers: {"rows": [row, ...]} with each row a str-keyed dict of values."""
    row = st.dictionaries(st.text(min_size=1, max_size=8), values(max_leaves=4), max_size=4)
    return st.builds(lambda rows: {"rows": rows}, st.lists(row, max_size=max_rows))
