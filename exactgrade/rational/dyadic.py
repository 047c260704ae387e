"""Exact base-2 logarithms of dyadic probabilities.

Here a *dyadic* value means an integer power of two, 2**k for some integer k (1/8, 1/2, 1, 4):
exactly the positive rationals whose log2 is an integer. (The wider "m / 2**k" sense is not
enough: log2(3/8) is irrational.) Information quantities built from such probabilities are
exact rationals in bits.
"""

from __future__ import annotations

from fractions import Fraction

from exactgrade.rational.convert import as_fraction
from exactgrade.rational.errors import NotDyadicError


def is_dyadic(p: int | Fraction) -> bool:
    """p == 2**k for an integer k (p > 0)"""
    q = as_fraction(p)
    if q <= 0:
        return False
    n, d = q.numerator, q.denominator
    return (n == 1 and d & (d - 1) == 0) or (d == 1 and n & (n - 1) == 0)


def log2_dyadic(p: int | Fraction) -> int:
    """log2(p) for a dyadic rational p = 2**k, exactly; NotDyadicError otherwise"""
    q = as_fraction(p)
    if not is_dyadic(q):
        raise NotDyadicError(f"p={q} is not an integer power of two, so log2(p) is not an integer")
    if q.numerator == 1:
        return -(q.denominator.bit_length() - 1)
    return q.numerator.bit_length() - 1
