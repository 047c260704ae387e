"""The symbolic point test's agreement grows with the pair's size.

Each wrong answer below differs from its key as a function by less than the old fixed agreement
(2**-192 relative) at every sampled point; each used to pass some or all of the time. Now each
fails every time it is graded, with a reason naming a point. The correct rewrites of the same keys
(and of keys with tiny parts of their own) still pass every time.
"""

from __future__ import annotations

import re

import pytest
import sympy

from exactgrade import Exact, Verdict, compare

X = sympy.Symbol("x")
T = sympy.Symbol("t", positive=True)
P = sympy.Symbol("p", positive=True, integer=True)
K = sympy.Symbol("k", integer=True)
GRADES = 20  # gradings of each wrong answer, each with fresh random points
DECIDES = 60.0  # every comparison here is decided: 10x margin on a loaded machine (docs/timing.md)
pytestmark = pytest.mark.timing


def unevaluated(function, *args):
    return function(*args, evaluate=False)


def power(base, exponent):
    return unevaluated(sympy.Pow, base, exponent)


def bump(centre, width):
    return sympy.exp(-width * (X - centre) ** 2)


# (id, key, wrong answer): the difference is below 2**-192 relative at every sampled point.
WRONG = [
    # the four, and other functions and other tiny constants
    ("sin-plus-2**-300", sympy.sin(X), sympy.sin(X) + sympy.Rational(1, 2**300)),
    ("sin-plus-unevaluated-2**-300", sympy.sin(X), sympy.sin(X) + power(2, -300)),
    ("cos-plus-2**-1000", sympy.cos(X), sympy.cos(X) + power(2, -1000)),
    ("atan-plus-10**-100", sympy.atan(X), sympy.atan(X) + power(10, -100)),
    ("log-plus-3**-200", sympy.log(T), sympy.log(T) + power(3, -200)),
    ("exp-times-1-plus-2**-250", sympy.exp(X), sympy.exp(X) * (1 + power(2, -250))),
    ("integer-plus-2**(-p-200)", P / (P + 1), P / (P + 1) + 2 ** (-P - 200)),
    ("integer-plus-2**(-p-1000)", P / (P + 1), P / (P + 1) + 2 ** (-P - 1000)),
    ("integer-plus-3**(-p-130)", P / (P + 1), P / (P + 1) + 3 ** (-P - 130)),
    ("integer-plus-2**(-k**2-200)", K**2 + 1, K**2 + 1 + 2 ** (-K**2 - 200)),
    ("sqrt-of-t-plus-2**-500", sympy.sqrt(T), sympy.sqrt(T + sympy.Rational(1, 2**500))),
    ("log-of-t-plus-2**-300", sympy.log(T), sympy.log(T + power(2, -300))),
    ("exp-of-x-plus-2**-300", sympy.exp(X), sympy.exp(X + power(2, -300))),
    # bumps exp(-w*(x-c)**2), at the centre and at others inside and outside the sampled range
    ("bump-10**6-at-0", X / 7, X / 7 + bump(0, 10**6)),
    ("bump-10**6-at-3", X / 7, X / 7 + bump(3, 10**6)),
    ("bump-10**4-at-minus-10", X / 7, X / 7 + bump(-10, 10**4)),
    ("bump-1-at-40", X / 7, X / 7 + bump(40, 1)),
    ("bump-10**7-at-1/3", sympy.sin(X), sympy.sin(X) + bump(sympy.Rational(1, 3), 10**7)),
    # smallness with no small value anywhere: a lopsided sum, a saturated function, a critical point
    ("log-of-2**300-plus-1-over-log-of-2**300", X,
     X * unevaluated(sympy.Mul, sympy.log(unevaluated(sympy.Add, power(2, 300), 1)),
                     power(sympy.log(power(2, 300)), -1))),
    ("atan-of-2**300-over-pi/2", X, X * unevaluated(sympy.Mul, 2, sympy.atan(power(2, 300)), 1 / sympy.pi)),
    ("tanh-of-100", X, X * sympy.tanh(100)),
    ("cosh-over-exp", X, X * unevaluated(sympy.Mul, 2, sympy.cosh(100), sympy.exp(-100))),
    ("cos-of-2**-150", X, X * sympy.cos(power(2, -150))),
    ("rational-next-to-one", X, X * sympy.Rational(2**300 + 1, 2**300)),
    ("cancelling-sum", sympy.sin(X),
     unevaluated(sympy.Add, sympy.sin(X), sympy.sqrt(unevaluated(sympy.Add, power(2, 600), 1)),
                 -power(2, 300))),
]

# (id, key, correct answer): rewrites, including of keys with tiny parts of their own.
RIGHT = [
    ("tiny-term-reordered", P / (P + 1) + 2 ** (-P - 200),
     unevaluated(sympy.Add, 2 ** (-P - 200), P / (P + 1))),
    ("root-with-tiny-term", sympy.sqrt(T + sympy.Rational(1, 2**500)),
     power(unevaluated(sympy.Add, sympy.Rational(1, 2**500), T), sympy.Rational(1, 2))),
    ("gaussian-plus-line", X / 7 + sympy.exp(-X**2), unevaluated(sympy.Add, sympy.exp(-X**2), X / 7)),
    ("gaussian-of-fourth-power", sympy.exp(-X**4), 1 / sympy.exp(X**4)),
    ("tanh-as-exponentials", sympy.tanh(X), (sympy.exp(2 * X) - 1) / (sympy.exp(2 * X) + 1)),
    ("logistic-two-ways", 1 / (1 + sympy.exp(-X)), sympy.exp(X) / (sympy.exp(X) + 1)),
    ("cosh-as-exponentials", sympy.cosh(X), (sympy.exp(X) + sympy.exp(-X)) / 2),
    ("expanded-cube-times-exp", (X + 1) ** 3 * sympy.exp(X), sympy.expand((X + 1) ** 3 * sympy.exp(X))),
    ("cos-of-tiny-commuted", X * sympy.cos(power(2, -150)),
     unevaluated(sympy.Mul, sympy.cos(power(2, -150)), X)),
    ("sin-pi-k-beside-a-term", X + K + unevaluated(sympy.sin, sympy.pi * K), K + X),
]


def _assert_differs_at_a_point(verdict: Verdict) -> None:
    assert type(verdict) is Verdict and not verdict.ok
    assert re.search(r"(they differ|the answer cannot be checked) at [a-z]=\S+: ", verdict.reason), \
        verdict.reason


@pytest.mark.parametrize(("key", "answer"), [case[1:] for case in WRONG], ids=[case[0] for case in WRONG])
def test_an_answer_off_by_less_than_the_old_agreement_fails_every_time(key: object, answer: object) -> None:
    for _ in range(GRADES):
        _assert_differs_at_a_point(compare(key, answer, Exact(), time_limit=DECIDES))


@pytest.mark.parametrize(("key", "answer"), [case[1:] for case in RIGHT], ids=[case[0] for case in RIGHT])
def test_a_rewrite_passes_every_time(key: object, answer: object) -> None:
    for _ in range(5):
        verdict = compare(key, answer, Exact(), time_limit=DECIDES)
        assert type(verdict) is Verdict and verdict.ok, verdict.reason


def test_the_reason_says_by_how_much_values_equal_to_six_digits_differ() -> None:
    verdict = compare(sympy.sin(X), sympy.sin(X) + sympy.Rational(1, 2**300), Exact(), time_limit=DECIDES)
    assert re.search(r"they differ at x=\S+: expected (\S+), got \1 \(they differ by -?4\.9\d*e-91\)",
                     verdict.reason), verdict.reason


def test_an_answer_too_small_to_check_fails_saying_how_much_agreement_it_needs() -> None:
    verdict = compare(X / 7, X / 7 + bump(0, 10**6), Exact(), time_limit=DECIDES)
    assert not verdict.ok
    # Which of the two the first point meets depends on where it lands (|x| near 6: exp(-10**6 x**2)
    # is beyond evaluation itself); both are the answer's fault, never a pass.
    assert re.search(r"the answer cannot be checked at x=\S+: (.* call for agreement to 2\*\*-\d+, beyond "
                     r"what 16384-bit evaluation can show|an exponential is too large to evaluate)",
                     verdict.reason), verdict.reason


def test_a_key_too_small_to_check_anywhere_is_undecidable_not_passed() -> None:
    """The bump as the key: no point leaves room to check an answer of its size, so every point is
    skipped (the key's doing, not the answer's) and the comparison fails, saying so."""
    key = X / 7 + bump(0, 10**6)
    verdict = compare(key, unevaluated(sympy.Add, bump(0, 10**6), X / 7), Exact(), time_limit=DECIDES)
    assert not verdict.ok
    assert "could not decide equality: the reference could be checked at only 0 of 64 random points" in \
        verdict.reason, verdict.reason


def test_an_answer_of_huge_constants_is_refused_without_evaluating_at_their_size() -> None:
    """40 integers of 1000 digits that cancel: 2 * 133,000 bits of constants are beyond any check, so
    the answer fails at the first point at 16384 bits at most (not at 266,000), saying why."""
    big = [sign * 10**999 for sign in (1, -1)] * 20
    verdict = compare(sympy.sin(X), unevaluated(sympy.Add, sympy.sin(X), *big), Exact(), time_limit=DECIDES)
    assert not verdict.ok
    assert "the answer cannot be checked at x=" in verdict.reason, verdict.reason


def test_case_ids_are_unique() -> None:
    ids = [case[0] for case in WRONG + RIGHT]
    assert len(set(ids)) == len(ids)
