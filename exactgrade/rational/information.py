"""Entropy, cross-entropy, KL divergence and mutual information, exactly.

Bits are exact Fractions (every probability used in a log must be dyadic, see dyadic.py);
nats are exact sympy values, bits * log(2), so a nat given for a bit differs by the factor
ln 2 and never compares equal. Terms with p = 0 contribute 0 (the convention 0 * log 0 = 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from exactgrade.rational.convert import as_fraction, to_sympy
from exactgrade.rational.dyadic import log2_dyadic
from exactgrade.rational.errors import NotADistributionError, ShapeError

Distribution = Sequence[int | Fraction]
Joint = Sequence[Sequence[int | Fraction]]


def distribution(p: Distribution) -> tuple[Fraction, ...]:
    """p as a tuple of Fractions, checked non-negative and summing to exactly 1"""
    q = tuple(as_fraction(x) for x in p)
    if not q or any(x < 0 for x in q):
        raise NotADistributionError(f"probabilities must be non-empty and >= 0, got {list(map(str, q))}")
    if sum(q) != 1:
        raise NotADistributionError(f"probabilities sum to {sum(q)}, not exactly 1")
    return q


def entropy_bits(p: Distribution) -> Fraction:
    """H(p) = -sum_i p_i log2 p_i, in bits"""
    return sum((-x * log2_dyadic(x) for x in distribution(p) if x != 0), Fraction(0))


def cross_entropy_bits(p: Distribution, q: Distribution) -> Fraction:
    """H(p, q) = -sum_i p_i log2 q_i, in bits (infinite support mismatch is refused)"""
    p, q = distribution(p), distribution(q)
    if len(p) != len(q):
        raise ShapeError(f"p has {len(p)} outcomes, q has {len(q)}")
    for i, (pi, qi) in enumerate(zip(p, q, strict=True)):
        if pi != 0 and qi == 0:
            raise NotADistributionError(f"q[{i}] = 0 where p[{i}] = {pi}: the cross-entropy is infinite")
    return sum((-pi * log2_dyadic(qi) for pi, qi in zip(p, q, strict=True) if pi != 0), Fraction(0))


def kl_bits(p: Distribution, q: Distribution) -> Fraction:
    """D(p || q) = H(p, q) - H(p), in bits"""
    return cross_entropy_bits(p, q) - entropy_bits(p)


def joint_table(joint: Joint) -> tuple[tuple[Fraction, ...], ...]:
    """joint[a][b] as Fractions, rectangular, a distribution over all cells"""
    rows = tuple(tuple(as_fraction(x) for x in row) for row in joint)
    if not rows or len({len(r) for r in rows}) != 1:
        raise ShapeError("a joint table must be a non-empty rectangular list of rows")
    distribution([x for row in rows for x in row])
    return rows


def marginals(joint: Joint) -> tuple[tuple[Fraction, ...], tuple[Fraction, ...]]:
    """(p(a), p(b)) from joint[a][b]: row sums and column sums"""
    rows = joint_table(joint)
    return tuple(sum(r) for r in rows), tuple(sum(c) for c in zip(*rows, strict=True))


def mutual_information_bits(joint: Joint) -> Fraction:
    """I(a; b) = H(a) + H(b) - H(a, b), in bits"""
    rows = joint_table(joint)
    pa, pb = marginals(rows)
    return entropy_bits(pa) + entropy_bits(pb) - entropy_bits([x for row in rows for x in row])


def bits_to_nats(bits: int | Fraction):  # -> sympy.Expr
    """bits * log(2), an exact sympy value in nats"""
    import sympy

    return to_sympy(as_fraction(bits)) * sympy.log(2)


def entropy_nats(p: Distribution):
    """H(p) in nats, exactly (sympy)"""
    return bits_to_nats(entropy_bits(p))


def cross_entropy_nats(p: Distribution, q: Distribution):
    """H(p, q) in nats, exactly (sympy)"""
    return bits_to_nats(cross_entropy_bits(p, q))


def kl_nats(p: Distribution, q: Distribution):
    """D(p || q) in nats, exactly (sympy)"""
    return bits_to_nats(kl_bits(p, q))


def mutual_information_nats(joint: Joint):
    """I(a; b) in nats, exactly (sympy)"""
    return bits_to_nats(mutual_information_bits(joint))
