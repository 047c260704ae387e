"""What two or more tensor_ops families use (written once)."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath

from exactgrade.domains.pytorch.exact import hp, values
from exactgrade.domains.pytorch.sampling import dyadic_tensor
from exactgrade.family import Draw, Reject


def flat_elements(x):
    return [e for row in values(x) for e in row] if len(x.shape) == 2 else values(x)


def sample_matrix(rows: tuple[int, int], cols: tuple[int, int], low: float, high: float, bits: int):
    def sample(draw: Draw, level: int) -> dict:
        shape = (draw.integer(rows[0], max(rows[0], rows[1] + level)),
                 draw.integer(cols[0], max(cols[0], cols[1] + level)))
        return {"x": dyadic_tensor(draw, shape, low * (1 + level) / 2, high * (1 + level) / 2, bits)}
    return sample


def not_constant(name: str):
    """refuse/reject helper: a key tensor whose elements are all equal passes a constant answer."""
    def problem(task) -> str | None:
        value = task.expected["rows"][0][name]
        if len(set(value.data)) < 2:
            return f"a constant answer passes: every element of {name} is {value.data[0]}"
        return None
    return problem


# Levels 4 that ask one answer per setting (several targets, bounds, totals or rows): a search over a
# handful of answers (a sentinel among them) would otherwise pass a constant guess on a large share
# of instances; the whole key is then a tuple of answers, each drawn at its own stated share.
NONE_SHARE = Fraction(1, 5)
"""The chance that one setting of such a level is drawn to have no answer (its -1 sentinel)."""


def draws_none(draw: Draw) -> bool:
    """Whether this setting is drawn to have no answer (with probability NONE_SHARE)."""
    return draw.chance(NONE_SHARE.numerator, NONE_SHARE.denominator)


def one_answer_for_all(name: str):
    """reject helper: every entry of the key tensor ``name`` (an element of a vector, a row of a
    matrix) is the same answer, so guessing that one answer for every setting would pass."""
    def problem(task) -> str | None:
        value = task.expected["rows"][0][name]
        width = len(value.data) // value.shape[0]
        entries = {value.data[i:i + width] for i in range(0, len(value.data), width)}
        if len(entries) < 2:
            return f"a constant answer passes: every entry of {name} is {list(value.data[:width])}"
        return None
    return problem


def some_sentinel(name: str):
    """Branch helper: some setting's answer in the key tensor ``name`` is the -1 sentinel."""
    return lambda task: -1 in task.expected["rows"][0][name].data


def grid_points(draw: Draw, low: Fraction, high: Fraction, bits: int, most: int = 24) -> list[Fraction]:
    """Multiples of 2**-bits in [low, high]: all of them, or ``most`` drawn ones where there are more."""
    scale = 2**bits
    ks = range(math.ceil(Fraction(low) * scale), math.floor(Fraction(high) * scale) + 1)
    return [Fraction(k, scale) for k in (ks if len(ks) <= most else draw.sample(ks, most))]


def thresholds(draw: Draw, answer_of, intervals: dict, count: int, bits: int) -> list[float]:
    """``count`` distinct thresholds on the 2**-bits grid, each drawn for an answer chosen first:
    -1 with probability NONE_SHARE, else one of the reachable answers uniformly. ``intervals`` maps
    each answer to the range where its thresholds lie; ``answer_of(b)`` (exact) keeps the grid points
    that give that answer (it returns None for one too near an edge to decide in floating point).
    Choosing the answer before the threshold keeps the shares as stated, whatever is redrawn later."""
    pools = {answer: [b for b in grid_points(draw, low, high, bits) if answer_of(b) == answer]
             for answer, (low, high) in intervals.items()}
    chosen = []
    for _ in range(count):
        reachable = [answer for answer, pool in pools.items() if answer != -1 and pool]
        if len(reachable) < 2:
            raise Reject("fewer than two answers are left for a threshold to reach")
        none = pools.get(-1) and draws_none(draw)
        pool = pools[-1] if none else pools[draw.choice(reachable)]
        chosen.append(pool.pop(draw.below(len(pool))))
    return [float(b) for b in chosen]


def softmax_row(row):
    exps = [mpmath.exp(hp(e)) for e in row]
    total = mpmath.fsum(exps)
    return [e / total for e in exps]
