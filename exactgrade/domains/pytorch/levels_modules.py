"""Shared pieces of the upper levels of the nn_modules, losses and optim families.

``interpolate`` is the independent route of a symbolic key: a reference that is a polynomial in one
symbol (built by sympy, differentiated by sympy) is recomputed as an exact Fraction recurrence at
several rational values of the symbol and rebuilt by Lagrange interpolation; compare() then decides
the two polynomials equal exactly (exactgrade._symbolic, rational-function path).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any


def interpolate(points: Sequence[tuple[Fraction, Fraction]], symbol: Any) -> Any:
    """The sympy polynomial of degree < len(points) in ``symbol`` through the exact points."""
    import sympy

    xs = [Fraction(x) for x, _ in points]
    if len(set(xs)) != len(xs):
        raise ValueError("interpolation points must have distinct abscissae")
    coefficients = [Fraction(0)] * len(points)
    for i, (xi, yi) in enumerate(points):
        basis = [Fraction(1)]  # prod_{j != i} (t - xj) / (xi - xj), lowest degree first
        for j, xj in enumerate(xs):
            if j == i:
                continue
            scale = 1 / (xi - xj)
            shifted = [Fraction(0), *basis]
            basis = [(s - xj * b) * scale for s, b in zip(shifted, [*basis, Fraction(0)], strict=True)]
        coefficients = [c + Fraction(yi) * b for c, b in zip(coefficients, basis, strict=True)]
    return sympy.Add(*(sympy.Rational(c.numerator, c.denominator) * symbol**k
                       for k, c in enumerate(coefficients) if c != 0))


def polynomial_rows(run: Callable[[Fraction], dict[str, Fraction]], degree: int,
                    symbol: Any) -> list[dict[str, Any]]:
    """One row of polynomials in ``symbol`` (degree <= ``degree``) from ``run(value)``, an exact
    recurrence giving every key at one rational value of the symbol."""
    samples = [(Fraction(k, 7), run(Fraction(k, 7))) for k in range(1, degree + 2)]
    keys = samples[0][1].keys()
    return [{key: interpolate([(t, out[key]) for t, out in samples], symbol) for key in keys}]


def near_cut(ordered: Sequence[Any], mass: Any, margin: str = "1e-4") -> str | None:
    """Why a cut at cumulative ``mass`` over the descending probabilities ``ordered`` is too close to call
    in float arithmetic (a running total within ``margin`` of the mass), or None."""
    import mpmath

    total = mpmath.mpf(0)
    for q in ordered:
        total += q
        if abs(total - mass) < mpmath.mpf(margin):
            return "a running total of the sorted probabilities lies within 1e-4 of the mass: too close"
    return None


def distributions_differ(a: Sequence[Sequence[Any]], b: Sequence[Sequence[Any]], gap: float = 1e-3) -> bool:
    """Whether two nested lists of probabilities differ by more than ``gap`` somewhere (far beyond the
    grading tolerance, so an answer built the other way fails)."""
    return any(abs(x - y) > gap for ra, rb in zip(a, b, strict=True) for x, y in zip(ra, rb, strict=True))


__all__ = ["distributions_differ", "interpolate", "near_cut", "polynomial_rows"]
