"""exactgrade's grading speed against math-verify on the same (reference, answer) pairs, in one run.

Each grader gets the pair the way it is used in practice, starting from text:
- exactgrade: the reference and the answer as wire strings (what a dataset row and the sandbox
  read-back hold); timed work = wire.decode(reference) + wire.decode(answer) + compare(...).
- math-verify: the reference as LaTeX in math mode ("$\\frac{7}{4}$") and the answer as a boxed
  LaTeX/decimal string ("\\boxed{1.75}"), the form a model's final answer takes; timed work =
  parse(gold) + parse(answer) + verify(gold, answer), with math-verify's default settings
  (signal-based 5 s timeouts, float_rounding=6). Floats are written as positional decimals
  ("0.0000012", never "1.2e-06", which math-verify reads as 1.2*E - 6), so it is not handicapped.

Both run in this process, interleaved in chunks of 200 pairs (so load from other jobs falls on
both alike), after a warm-up of 50 pairs each (imports; exactgrade's prover worker). Each pair is
timed on its own; encoding and LaTeX rendering happen outside the timed region.

Pairs are drawn from eight kinds, half of them correct by exactgrade's rules (exact keys, RelTol
1e-9, an int needs an int). The agreement columns show where the graders' policies differ; they
are not a test of either. Tensors are left out: math-verify has no tensor answers.

Symbolic pairs (issue 20) are a second table in the same run: expressions in symbols (p, m
positive integers; x without assumptions, as math-verify's parser makes it), each correct answer
an identity-preserving rewrite (expanded, factored, partial fractions, trigonometric and
hyperbolic identities, logarithm and exponential laws) and each wrong one a mutation (a changed
constant or exponent, a flipped sign, a dropped term), plus math-verify's own false passes
(issues #14 and #41) and the two true equalities exactgrade refused before issue 20. Here
math-verify gets the pairs pre-parsed (the same sympy objects; for the issue pairs, its own
parse() of the LaTeX, done outside the timed region): timed work = verify(gold, answer) only.
exactgrade's timed work is still wire.decode of both + compare (in-process objects for the two
factorial pairs, whose 5,700-digit integers the wire refuses). Every label is the mathematical
truth on the symbols' domain, so an agreement short of the pair count is a mislabel.

    python benchmarks/bench_compare.py [--pairs 10000] [--symbolic-pairs 2000] [--seed 0]
"""

from __future__ import annotations

import argparse
import math
import random
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

import sympy

from exactgrade import Exact, Policy, RelTol, compare, wire

WORDS = ["compute", "memory", "bandwidth", "latency", "overlap"]
NON_SQUARES = [n for n in range(2, 51) if math.isqrt(n) ** 2 != n]  # sqrt(n) and log(n) irrational


@dataclass(frozen=True)
class Pair:
    kind: str
    correct: bool  # the label by exactgrade's rules
    reference: Any
    answer: Any
    policy: Policy
    gold_latex: str  # what math-verify gets
    answer_latex: str
    parsed: tuple[Any, Any] | None = None  # symbolic pairs: math-verify gets these sympy objects


def decimal_text(x: float) -> str:
    """A float as a positional decimal (the shortest repr digits, no exponent)."""
    return format(Decimal(repr(x)), "f")


def latex(value: Any) -> str:
    if type(value) is Fraction:
        return rf"\frac{{{value.numerator}}}{{{value.denominator}}}"
    if type(value) is float:
        return decimal_text(value)
    if type(value) is str:
        return rf"\text{{{value}}}"
    if type(value) is int:
        return str(value)
    return sympy.latex(value, ln_notation=True)


def pair(kind: str, correct: bool, reference: Any, answer: Any, policy: Policy,
         answer_text: str | None = None) -> Pair:
    return Pair(kind, correct, reference, answer, policy, f"${latex(reference)}$",
                rf"\boxed{{{answer_text if answer_text is not None else latex(answer)}}}")


def make_pairs(count: int, seed: int) -> list[Pair]:
    rng = random.Random(seed)
    makers: list[Callable[[random.Random, bool], Pair]] = [
        integer_pair, integer_as_float_pair, fraction_pair, fraction_float_pair, irrational_float_pair,
        irrational_exact_pair, bits_nats_pair, categorical_pair,
    ]
    return [makers[i % len(makers)](rng, (i // len(makers)) % 2 == 0) for i in range(count)]


def integer_pair(rng: random.Random, correct: bool) -> Pair:
    n = rng.randint(1, 10**12)
    return pair("int", correct, n, n if correct else n + rng.choice([-1, 1]), Exact())


def integer_as_float_pair(rng: random.Random, correct: bool) -> Pair:
    n = rng.randint(1, 10**6)
    # Correct: the exact int; wrong by the project's rules: the same number as a float.
    return pair("int given as float", correct, n, n if correct else float(n), RelTol(1e-9),
                None if correct else f"{n}.0")


def fraction_pair(rng: random.Random, correct: bool) -> Pair:
    p, q, k = rng.randint(1, 10**4), rng.randint(2, 10**4), rng.randint(2, 9)
    reference = Fraction(p, q)
    if correct:
        return pair("fraction exact", True, reference, Fraction(k * p, k * q), Exact(),
                    rf"\frac{{{k * p}}}{{{k * q}}}")
    return pair("fraction exact", False, reference, Fraction(p, q + 1), Exact())


def fraction_float_pair(rng: random.Random, correct: bool) -> Pair:
    reference = Fraction(rng.randint(1, 10**6), rng.randint(1, 10**6)) * Fraction(10) ** rng.randint(-6, 6)
    value = float(reference)
    if not correct:
        value *= rng.choice([1 + 1e-6, 1 - 1e-6, 2.0, 7 / 8])  # part in a million, factor 2, missing (N-1)/N
    return pair("fraction vs float", correct, reference, value, RelTol(1e-9))


def irrational_float_pair(rng: random.Random, correct: bool) -> Pair:
    a, b, c = rng.randint(1, 50), rng.choice(NON_SQUARES), rng.randint(1, 50)
    reference = sympy.Rational(a, c) * (sympy.sqrt(b) if rng.random() < 0.5 else sympy.log(b))
    value = float(reference.evalf(30))
    if not correct:
        value *= rng.choice([1 + 1e-6, 2.0, math.log(2)])
    return pair("irrational vs float", correct, reference, value, RelTol(1e-9))


def irrational_exact_pair(rng: random.Random, correct: bool) -> Pair:
    a, b, c, k = rng.randint(1, 20), rng.choice([2, 3, 5, 6, 7]), rng.randint(1, 20), rng.randint(2, 4)
    if rng.random() < 0.5:
        reference = sympy.Rational(a, c) * sympy.sqrt(b)
        answer = sympy.sqrt(a * a * b) / c if correct else sympy.Rational(a, c) * sympy.sqrt(b + 1)
    else:  # log(b**k) and k*log(b) differ in form: exactgrade needs a proof for these
        reference = sympy.Rational(a * k, c) * sympy.log(b)
        answer = sympy.Rational(a, c) * sympy.log(b**k) if correct else sympy.Rational(a, c) * sympy.log(b)
    return pair("irrational exact", correct, reference, answer, Exact())


def bits_nats_pair(rng: random.Random, correct: bool) -> Pair:
    bits = Fraction(rng.randint(1, 64), 2 ** rng.randint(0, 6))  # entropies of dyadic distributions
    value = float(bits) if correct else float(bits) * math.log(2)  # wrong: nats given for bits
    return pair("bits vs nats", correct, bits, value, RelTol(1e-9))


def categorical_pair(rng: random.Random, correct: bool) -> Pair:
    word = rng.choice(WORDS)
    answer = word if correct else rng.choice([w for w in WORDS if w != word])
    return pair("categorical", correct, word, answer, Exact())


# -- symbolic pairs (issue 20) ----------------------------------------------------------------------

P, M = sympy.symbols("p m", positive=True, integer=True)
X = sympy.Symbol("x")


def symbolic_pair(kind: str, correct: bool, reference: Any, answer: Any) -> Pair:
    return Pair(kind, correct, reference, answer, Exact(), "", "", (reference, answer))


def rational_pair(rng: random.Random, correct: bool) -> Pair:
    a, b, c = rng.randint(2, 9), rng.randint(1, 9), rng.randint(2, 9)
    shape = rng.randrange(4)
    if shape == 0:  # a pipeline bubble fraction, rewritten
        key = a * (P - 1) / (M + P - 1)
        answer = a - a * M / (M + P - 1) if correct else a * (P - 1) / (M + P)
    elif shape == 1:
        key = (a * X + b) / c
        answer = sympy.expand(key) if correct else (a * X + b + 1) / c
    elif shape == 2:  # partial fractions
        key = 1 / (X * (X + a))
        answer = sympy.apart(key, X) if correct else 1 / X - 1 / (X + a)
    else:
        key = (X + a) ** 3 * (P + b)
        answer = sympy.expand(key) if correct else sympy.expand(key) + X * P
    return symbolic_pair("symbolic rational", correct, key, answer)


def elementary_pair(rng: random.Random, correct: bool) -> Pair:
    a, b = rng.randint(2, 9), rng.randint(1, 9)
    shape = rng.randrange(6)
    if shape == 0:
        key, right, wrong = a * sympy.tan(X) ** 2 + a, a * sympy.sec(X) ** 2, a * sympy.sec(X) ** 2 - a
    elif shape == 1:
        s, c = sympy.sin(X), sympy.cos(X)
        key, right, wrong = a * sympy.sin(2 * X), 2 * a * s * c, a * s * c
    elif shape == 2:
        key, right, wrong = a * sympy.cosh(X) ** 2, a * sympy.sinh(X) ** 2 + a, a * sympy.sinh(X) ** 2 - a
    elif shape == 3:
        key, right = sympy.exp(a * X + b), sympy.exp(b) * sympy.exp(X) ** a
        wrong = sympy.exp(b) * sympy.exp(X) ** (a + 1)
    elif shape == 4:
        key = sympy.log(P**a * M)
        right, wrong = a * sympy.log(P) + sympy.log(M), a * sympy.log(P) - sympy.log(M)
    else:
        key = sympy.asinh(b * X)
        right = sympy.log(b * X + sympy.sqrt(b**2 * X**2 + 1))
        wrong = sympy.log(b * X + sympy.sqrt(b**2 * X**2 - 1))
    return symbolic_pair("symbolic elementary", correct, key, right if correct else wrong)


# (gold LaTeX, answer LaTeX, the truth): math-verify's issue #14 and #41 false passes, and the two
# true equalities (x+2)/7 = x/7 + 2/7 and tan(y)**2 + 1 = sec(y)**2 that exactgrade refused before.
ISSUE_PAIRS = [
    (r"$1-\frac{1}{e}$", r"$1+\frac{1}{e}$", False),
    (r"$\frac{1}{2^{99}}$", r"$\frac{1}{2^{98}}$", False),
    (r"$\frac{1}{2004!}$", r"$\frac{1}{2006!}$", False),
    (r"$4$", r"$4\sqrt{2}$", False),
    (r"$\frac{x+2}{7}$", r"$\frac{x}{7}+\frac{2}{7}$", True),
    (r"$\tan(y)^2+1$", r"$\sec(y)^2$", True),
]


def issue_pairs(count: int) -> list[Pair]:
    from math_verify import parse

    parsed = [(parse(gold)[0], parse(answer)[0], truth) for gold, answer, truth in ISSUE_PAIRS]
    return [symbolic_pair("math-verify issues", truth, gold, answer)
            for gold, answer, truth in (parsed[i % len(parsed)] for i in range(count))]


def make_symbolic_pairs(count: int, seed: int) -> list[Pair]:
    rng = random.Random(seed)
    issues = count // 10
    makers = [rational_pair, elementary_pair]
    rest = count - issues
    return ([makers[i % 2](rng, (i // 2) % 2 == 0) for i in range(rest)] + issue_pairs(issues))


def _wire_or_value(value: Any) -> tuple[bool, Any]:
    try:
        return True, wire.encode(value)
    except wire.WireError:
        return False, value


def grade_exactgrade(pairs: list[Pair]) -> list[tuple[float, bool]]:
    """(seconds, ok) per pair: decode both wire strings, then compare."""
    results = []
    for p in pairs:
        # what a row/the sandbox hold (a value the wire refuses is compared in-process)
        (ref_wire, reference), (ans_wire, answer) = _wire_or_value(p.reference), _wire_or_value(p.answer)
        started = time.perf_counter()
        ok = compare(wire.decode(reference) if ref_wire else reference,
                     wire.decode(answer) if ans_wire else answer, p.policy).ok
        results.append((time.perf_counter() - started, ok))
    return results


def grade_math_verify(pairs: list[Pair]) -> list[tuple[float, bool]]:
    """(seconds, ok) per pair: parse both LaTeX strings, then verify (verify only if pre-parsed)."""
    from math_verify import parse, verify

    results = []
    for p in pairs:
        if p.parsed is not None:
            gold, answer = p.parsed
            started = time.perf_counter()
            ok = bool(verify(gold, answer))
        else:
            started = time.perf_counter()
            ok = bool(verify(parse(p.gold_latex), parse(p.answer_latex)))
        results.append((time.perf_counter() - started, ok))
    return results


def run(pairs: list[Pair], chunk: int) -> tuple[list[tuple[float, bool]], list[tuple[float, bool]]]:
    """Both graders on the same pairs, interleaved chunk by chunk so that load from other jobs on
    the machine falls on both alike."""
    eg_results: list[tuple[float, bool]] = []
    mv_results: list[tuple[float, bool]] = []
    for start in range(0, len(pairs), chunk):
        part = pairs[start:start + chunk]
        eg_results += grade_exactgrade(part)
        mv_results += grade_math_verify(part)
    return eg_results, mv_results


def report(title: str, pairs: list[Pair], eg_results: list[tuple[float, bool]],
           mv_results: list[tuple[float, bool]]) -> None:
    rows: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0, 0.0, 0.0])
    for p, (eg_s, eg_ok), (mv_s, mv_ok) in zip(pairs, eg_results, mv_results, strict=True):
        row = rows[p.kind]
        row[0] += 1
        row[1] += eg_ok == p.correct
        row[2] += mv_ok == p.correct
        row[3] += eg_s
        row[4] += mv_s
    print(f"\n{title}\n")
    print(f"{'kind':<22}{'pairs':>6}{'exactgrade':>12}{'math-verify':>13}{'exactgrade':>14}{'math-verify':>13}")
    print(f"{'':<22}{'':>6}{'agrees':>12}{'agrees':>13}{'pairs/s':>14}{'pairs/s':>13}")
    for kind, (n, eg_agree, mv_agree, eg_s, mv_s) in rows.items():
        print(f"{kind:<22}{n:>6}{eg_agree:>12}{mv_agree:>13}{n / eg_s:>14.0f}{n / mv_s:>13.0f}")
    eg_total = sum(seconds for seconds, _ in eg_results)
    mv_total = sum(seconds for seconds, _ in mv_results)
    eg_rate, mv_rate = len(pairs) / eg_total, len(pairs) / mv_total
    print(f"\nexactgrade  : {eg_total:8.2f} s  {eg_rate:10.0f} pairs/s")
    print(f"math-verify : {mv_total:8.2f} s  {mv_rate:10.0f} pairs/s")
    print(f"ratio       : exactgrade grades {eg_rate / mv_rate:.1f}x as many pairs per second as math-verify")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=10_000)
    parser.add_argument("--symbolic-pairs", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--chunk", type=int, default=200, help="pairs per interleaved chunk")
    args = parser.parse_args()

    pairs = make_pairs(args.pairs, args.seed)
    symbolic = make_symbolic_pairs(args.symbolic_pairs, args.seed)
    warmup = make_pairs(50, args.seed + 1) + make_symbolic_pairs(20, args.seed + 1)
    grade_exactgrade(warmup)
    grade_math_verify(warmup)

    if pairs:
        report(f"{len(pairs)} pairs (seed {args.seed}), half correct by exactgrade's rules; agreement = "
               f"verdicts matching that label", pairs, *run(pairs, args.chunk))
    if symbolic:
        report(f"{len(symbolic)} symbolic pairs (seed {args.seed}), math-verify given them pre-parsed; "
               f"agreement = verdicts matching the mathematical truth", symbolic, *run(symbolic, args.chunk))


if __name__ == "__main__":
    main()
