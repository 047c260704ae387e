"""deeplearning linalg: the independent check each level 2-5 keeps beside its reference passes a
generated instance and catches that instance with a broken key, with its own reason."""

from __future__ import annotations

import dataclasses
from fractions import Fraction as F
from functools import cache

import pytest

import exactgrade
from exactgrade.domains.deeplearning import check

RATIONAL = "differs from exactgrade.rational, which gives"
MATRIX = "differ from exactgrade.rational.matrix"


@cache
def generated(family: str, level: int):
    return exactgrade.generate("deeplearning", seed=3, index=0, level=level, family=family)


def bumped(key: str, amount=F(1, 7)):
    """A breaker: the last key row's ``key`` moved by ``amount`` (every entry of a list)."""

    def breaker(task):
        rows = [dict(r) for r in task.expected["rows"]]
        value = rows[-1][key]
        if isinstance(value, list):
            rows[-1][key] = [v + amount for v in value]
        else:
            rows[-1][key] = amount if value is None else value + amount
        return dataclasses.replace(task, expected={"rows": rows})

    return breaker


CASES = [
    ("inverse", 2, bumped("x"), "a solution x does not satisfy A x = b"),
    ("inverse", 3, bumped("det"), RATIONAL),
    ("inverse", 4, bumped("t"), "A is not singular at t ="),
    ("inverse", 5, bumped("max_entry"), "Gauss-Jordan gives (largest entry, entries)"),
    ("least_squares", 2, bumped("rss"), MATRIX),
    ("least_squares", 3, bumped("prediction"), RATIONAL),
    ("least_squares", 4, bumped("rss"), RATIONAL),
    ("least_squares", 5, bumped("w"), "the optimality conditions give w ="),
    ("rank", 2, bumped("nullity", 1), RATIONAL),
    ("rank", 3, bumped("rank", 1), RATIONAL),
    ("rank", 4, bumped("k", 1), RATIONAL),
    ("rank", 5, bumped("essential", 1), RATIONAL),
    ("projection", 2, bumped("residual"), MATRIX),
    ("projection", 3, bumped("distance_sq"), RATIONAL),
    ("projection", 4, bumped("distance_sq"), RATIONAL),
    ("projection", 5, bumped("total_sq"), RATIONAL),
    ("eigenvalues", 2, bumped("max", 1), "differs from numpy's eigenvalues"),
    ("eigenvalues", 3, bumped("sum_squares", 1), "the sums of squared eigenvalues differ from trace(M M)"),
    ("eigenvalues", 4, bumped("shift", 1), RATIONAL),
    ("eigenvalues", 5, bumped("below", 1), "numpy counts"),
    ("pca", 2, bumped("variance", 1), "differs from numpy's eigenvalues"),
    ("pca", 3, bumped("variance"), RATIONAL),
    ("pca", 4, bumped("ratio"), RATIONAL),
    ("pca", 5, bumped("ratio"), RATIONAL),
]


def test_every_linalg_level_above_one_is_covered():
    families = {f for f, _, _, _ in CASES}
    every = {(f, level) for f in families for level in (2, 3, 4, 5)}
    assert {(f, level) for f, level, _, _ in CASES} == every
    assert len(families) == 6


@pytest.mark.parametrize(
    ("family", "level", "breaker", "reason"), CASES, ids=[f"{f}-L{level}" for f, level, _, _ in CASES]
)
def test_the_level_check_passes_an_instance_and_catches_its_broken_key(family, level, breaker, reason):
    task = generated(family, level)
    assert callable(task.meta["independent"])
    assert check(task) == []
    problems = check(breaker(task))
    assert any(reason in str(p) for p in problems), problems
