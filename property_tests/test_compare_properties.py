"""Properties of the comparator: float evaluation order (in floats or Fractions of floats),
perturbations, reflexivity, reasons."""

from __future__ import annotations

import math
from fractions import Fraction
from functools import reduce

from hypothesis import assume, given
from hypothesis import strategies as st

from exactgrade import AllClose, Exact, RelTol, compare
from exactgrade import strategies as egst

POLICIES = st.sampled_from([Exact(), RelTol(1e-9), AllClose(1e-5, 1e-7)])
FACTORS = st.lists(egst.positive_fractions(), min_size=1, max_size=12)


@st.composite
def float_evaluation(draw: st.DrawFn, terms: list[Fraction], combine) -> float:
    """Evaluate terms in floats, in a random order and a random association (tree shape)."""
    values = [float(t) for t in draw(st.permutations(terms))]
    while len(values) > 1:
        i = draw(st.integers(0, len(values) - 2))
        values[i:i + 2] = [combine(values[i], values[i + 1])]
    return values[0]


def exact_product(factors: list[Fraction]) -> Fraction:
    return reduce(lambda a, b: a * b, factors, Fraction(1))


@given(st.data(), FACTORS)
def test_products_in_any_float_order_pass_reltol(data: st.DataObject, factors: list[Fraction]) -> None:
    approx = data.draw(float_evaluation(factors, lambda a, b: a * b))
    verdict = compare(exact_product(factors), approx, RelTol(1e-9))
    assert verdict.ok, verdict.reason


@given(st.data(), FACTORS)
def test_sums_in_any_float_order_pass_reltol(data: st.DataObject, terms: list[Fraction]) -> None:
    approx = data.draw(float_evaluation(terms, lambda a, b: a + b))
    verdict = compare(sum(terms, Fraction(0)), approx, RelTol(1e-9))
    assert verdict.ok, verdict.reason


@given(st.data(), FACTORS)
def test_dropping_a_factor_fails(data: st.DataObject, factors: list[Fraction]) -> None:
    assume(len(factors) > 1)
    index = data.draw(st.integers(0, len(factors) - 1))
    assume(factors[index] != 1)
    wrong = factors[:index] + factors[index + 1:]
    approx = data.draw(float_evaluation(wrong, lambda a, b: a * b))
    verdict = compare(exact_product(factors), approx, RelTol(1e-9))
    assert not verdict.ok and "relative difference" in verdict.reason


@st.composite
def fraction_of_floats(draw: st.DrawFn, terms: list[Fraction], combine) -> Fraction:
    """A Fraction as a model mixing float literals into Fraction arithmetic builds it: every
    term goes through a float, and each step is done exactly or in floats, in a random order."""
    values = [Fraction(float(t)) for t in draw(st.permutations(terms))]
    while len(values) > 1:
        i = draw(st.integers(0, len(values) - 2))
        a, b = values[i:i + 2]
        values[i:i + 2] = [combine(a, b) if draw(st.booleans()) else Fraction(combine(float(a), float(b)))]
    return values[0]


@given(st.data(), FACTORS)
def test_fractions_of_reassociated_floats_pass_reltol(data: st.DataObject, factors: list[Fraction]) -> None:
    approx = data.draw(fraction_of_floats(factors, lambda a, b: a * b))
    verdict = compare(exact_product(factors), approx, RelTol(1e-9))
    assert verdict.ok, verdict.reason
    assert compare(exact_product(factors), approx, AllClose(1e-9, 0.0)).ok


@given(st.data(), FACTORS)
def test_a_fraction_of_floats_dropping_a_factor_fails(data: st.DataObject, factors: list[Fraction]) -> None:
    assume(len(factors) > 1)
    index = data.draw(st.integers(0, len(factors) - 1))
    assume(factors[index] != 1)
    wrong = data.draw(fraction_of_floats(factors[:index] + factors[index + 1:], lambda a, b: a * b))
    verdict = compare(exact_product(factors), wrong, RelTol(1e-9))
    assert not verdict.ok and "relative difference" in verdict.reason


@given(st.data(), FACTORS)
def test_doubling_a_factor_fails(data: st.DataObject, factors: list[Fraction]) -> None:
    index = data.draw(st.integers(0, len(factors) - 1))
    wrong = [2 * f if i == index else f for i, f in enumerate(factors)]
    approx = data.draw(float_evaluation(wrong, lambda a, b: a * b))
    verdict = compare(exact_product(factors), approx, RelTol(1e-9))
    assert not verdict.ok and "rtol 1e-09" in verdict.reason


@given(FACTORS, st.floats(2e-9, 10.0), st.booleans())
def test_any_perturbation_above_rtol_fails(factors: list[Fraction], relative: float, down: bool) -> None:
    assume(not down or relative < 1)
    exact = exact_product(factors)
    perturbed = float(exact) * (1 - relative if down else 1 + relative)
    verdict = compare(exact, perturbed, RelTol(1e-9))
    assert not verdict.ok, f"{exact} vs {perturbed!r}"


@given(egst.values(), POLICIES)
def test_compare_is_reflexive(value: object, policy: object) -> None:
    verdict = compare(value, value, policy)
    assert verdict.ok, verdict.reason


@given(st.booleans(), egst.integers(), POLICIES)
def test_bool_never_equals_an_int(flag: bool, number: int, policy: object) -> None:
    pairs = ((flag, number), (number, flag), ([flag], [number]), ({"a": number}, {"a": flag}))
    for expected, actual in pairs:
        verdict = compare(expected, actual, policy)
        assert not verdict.ok and "bool" in verdict.reason


@given(egst.values(max_leaves=6), egst.values(max_leaves=6), POLICIES)
def test_compare_never_raises_and_failures_have_reasons(expected: object, actual: object,
                                                         policy: object) -> None:
    verdict = compare(expected, actual, policy)
    assert isinstance(verdict.ok, bool)
    if not verdict.ok:
        assert verdict.reason and not verdict.reason.startswith("value: internal error"), verdict.reason


@given(egst.finite_floats(), POLICIES)
def test_nan_never_matches_a_finite_reference(reference: float, policy: object) -> None:
    assert not compare(reference, math.nan, policy).ok
    assert not compare(math.nan, reference, policy).ok


@given(egst.sympy_values(), st.sampled_from([1.0, -1.0]))
def test_irrational_values_in_float_pass_and_perturbed_fail(value: object, sign: float) -> None:
    assume(not value.is_Integer)  # type: ignore[attr-defined]  (an integer needs an exact answer)
    approx = float(value.evalf(40))  # type: ignore[attr-defined]
    assume(approx != 0.0)
    assert compare(value, approx, RelTol(1e-9)).ok
    verdict = compare(value, approx * (1 + sign * 1e-8), RelTol(1e-9))
    assert not verdict.ok and "relative difference" in verdict.reason


@given(egst.exact_values(), egst.finite_floats(), st.floats(0, 1), st.floats(1, 10))
def test_looser_tolerance_never_turns_a_pass_into_a_fail(reference: object, answer: float, rtol: float,
                                                          factor: float) -> None:
    if compare(reference, answer, RelTol(rtol)).ok:
        assert compare(reference, answer, RelTol(min(rtol * factor, 1.0))).ok


def test_public_strategies_are_exported() -> None:
    for name in egst.__all__:
        assert callable(getattr(egst, name)), name
