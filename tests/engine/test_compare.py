"""The comparator's rule book as tables: every case asserts ok, a reason fragment, and types."""

from __future__ import annotations

import json
import math
import re
from fractions import Fraction as F

import pytest
import sympy

from exactgrade import AllClose, Exact, RelTol, TensorValue, Verdict, compare

RTOL = RelTol(1e-9)
DECIDES = 60.0
"""Seconds given to a comparison the test needs decided: the slowest here (a sympy proof that
acosh(2) == log(2 + sqrt(3))) takes 0.3-0.6 s on a loaded 2-core VM, so 100x margin (the default
limit, 5 s, gave it 8x). Starting a prover worker is not counted (exactgrade._timeout)."""
NO_TIME = 1e-6
"""Seconds: below any irrational work (one interval node takes microseconds, a proof milliseconds),
so the limit always stops it."""
CLOSE = AllClose(1e-5, 1e-7)
LOG2 = sympy.log(2)
# sqrt(2)**2 - 2, sent unevaluated: exactly zero, but its interval always straddles zero.
HIDDEN_ZERO = sympy.Add(sympy.Pow(sympy.sqrt(2), 2, evaluate=False), -2, evaluate=False)

# Ring all-reduce of M bytes over N ranks at bandwidth B: each rank sends 2 (N-1)/N M bytes.
N, M, B = 8, 2**30, 100 * 10**9
RING_SECONDS = 2 * F(N - 1, N) * M / B
# Training FLOPs / (peak * MFU), with a float answer computed in another association order.
PARAMS, TOKENS, PEAK, MFU = 7 * 10**9, 14 * 10**11, 312 * 10**12, F(2, 5)
TRAIN_SECONDS = 6 * PARAMS * TOKENS / (PEAK * MFU)
TRAIN_FLOAT = 6.0 * (float(PARAMS) * (float(TOKENS) / (float(PEAK) * 0.4)))
# The same with float literals in Fraction arithmetic: Fraction(0.4) is not 2/5 (5e-17 relative).
TRAIN_FRACTION_OF_FLOATS = F(6 * PARAMS * TOKENS) / (F(312e12) * F(0.4))
# 2, written with cancelling terms far larger than 2: 10**999*pi needs ~3300 bits to cancel,
# exp(10**6) more than any working precision.
HUGE_CANCELLING_TWO = sympy.Add(10**999 * sympy.pi, 2, -(10**999) * sympy.pi, evaluate=False)
BEYOND_CANCELLING_TWO = sympy.Add(sympy.exp(10**6), 2, -sympy.exp(10**6), evaluate=False)


def t(dtype: str, shape: tuple[int, ...], *data: object) -> TensorValue:
    return TensorValue(dtype, shape, tuple(data))


# (id, expected, actual, policy, ok, fragment of the reason when not ok)
CASES = [
    # numbers: exact references, float answers
    ("reassociated-passes", TRAIN_SECONDS, TRAIN_FLOAT, RTOL, True, ""),
    ("reassociated-exact-policy-refuses-float", TRAIN_SECONDS, TRAIN_FLOAT, Exact(), False,
     "a float was given where an exact value is required"),
    ("ring-allreduce-correct", RING_SECONDS, 2 * 7 / 8 * 2**30 / 1e11, RTOL, True, ""),
    ("ring-allreduce-missing-(N-1)/N", RING_SECONDS, 2 * 2**30 / 1e11, RTOL, False,
     "relative difference 0.143"),
    ("factor-of-2", F(7, 4), 3.5, RTOL, False, "relative difference 1 > rtol 1e-09"),
    ("factor-of-1/2", F(7, 4), 0.875, RTOL, False, "relative difference 0.5"),
    ("one-part-in-a-million", F(7, 4), 1.75 * (1 + 1e-6), RTOL, False, "relative difference 1e-06"),
    ("one-part-in-ten-billion", F(7, 4), 1.75 * (1 + 1e-10), RTOL, True, ""),
    ("issue-example-reltol", F(7, 4), 1.75, RTOL, True, ""),
    ("issue-example-exact", F(7, 4), 1.75, None, False, "a float was given where an exact value is required"),
    ("exact-vs-exact-equal", F(7, 4), F(14, 8), None, True, ""),
    # exact answers under a tolerance: the same rule as a float answer, decided exactly
    ("exact-answer-within-rtol", F(7, 4), F(1750000001, 10**9), RTOL, True, ""),
    ("exact-answer-outside-rtol", F(7, 4), F(1750001, 10**6), RTOL, False,
     "not close: relative difference 5.71e-07 > rtol 1e-09 (policy RelTol(rtol=1e-09))"),
    ("exact-answer-within-rtol-under-exact", F(7, 4), F(1750000001, 10**9), None, False,
     "exact values differ"),
    ("fraction-of-float-literals-passes", TRAIN_SECONDS, TRAIN_FRACTION_OF_FLOATS, RTOL, True, ""),
    ("fraction-of-float-literals-under-exact", TRAIN_SECONDS, TRAIN_FRACTION_OF_FLOATS, None, False,
     "exact values differ"),
    ("fraction-of-float-literals-dropped-mfu", TRAIN_SECONDS, TRAIN_FRACTION_OF_FLOATS * F(0.4), RTOL, False,
     "relative difference 0.6 > rtol 1e-09"),
    ("int-reference-close-fraction-still-exact", 11, F(11 * 10**12 + 1, 10**12), RTOL, False,
     "exact values differ"),
    ("irrational-exact-answer-within-rtol", sympy.sqrt(2), sympy.sqrt(2) * (1 + sympy.Rational(1, 10**12)),
     RTOL, True, ""),
    ("irrational-exact-answer-outside-rtol", sympy.sqrt(2), sympy.sqrt(2) * (1 + sympy.Rational(1, 10**6)),
     RTOL, False, "relative difference 1e-06"),
    ("exact-answer-allclose-atol", F(0), F(1, 10**8), CLOSE, True, ""),
    ("exact-answer-allclose-outside", F(0), F(2, 10**7), CLOSE, False, "absolute difference 2e-07"),
    ("log-ratio-under-reltol-needs-no-proof", F(3), sympy.log(8) / LOG2, RTOL, True, ""),
    ("log-ratio-under-zero-tolerance-is-proven", F(3), sympy.log(8) / LOG2, RelTol(0.0), True, ""),
    ("zero-tolerance-exact-answers-differ", F(7, 4), F(1750000001, 10**9), AllClose(0.0, 0.0), False,
     "exact values differ"),
    # huge cancelling terms: wide intervals are not "agreement", and the prover is not consulted
    ("huge-cancelling-terms-differ-by-one", 1, HUGE_CANCELLING_TWO, None, False, "exact values differ"),
    ("cancelling-beyond-every-precision", 1, BEYOND_CANCELLING_TWO, None, False,
     "could not separate the values at 4096 bits: their difference is not small relative to them"),
    ("nan-for-exact", F(1, 3), math.nan, RTOL, False, "got float nan"),
    ("inf-for-exact", F(1, 3), math.inf, RTOL, False, "got float inf"),
    ("zero-reference-needs-zero", F(0), 1e-300, RTOL, False, "not close"),
    ("zero-reference-zero-float", F(0), -0.0, RTOL, True, ""),
    # integer references
    ("int-given-float", 11, 11.0, RTOL, False, "an integer reference needs an exact integer answer"),
    ("int-given-float-allclose", 11, 11.0, CLOSE, False,
     "an integer reference needs an exact integer answer"),
    ("int-given-fraction-equal", 11, F(22, 2), None, True, ""),
    ("int-given-sympy-integer", 11, sympy.Integer(11), None, True, ""),
    ("int-given-other-int", 11, 12, None, False, "exact values differ"),
    ("int-given-log-ratio", 3, sympy.log(8) / LOG2, None, True, ""),
    # 0/0 and log(0) - log(0) are not numbers; sympy's prover would cancel them to 1 and 0
    ("zero-over-zero-is-not-one", 1, sympy.Mul(HIDDEN_ZERO, sympy.Pow(HIDDEN_ZERO, -1, evaluate=False),
                                               evaluate=False), None, False,
     "cannot evaluate a logarithm, root or reciprocal of a value that may be zero"),
    ("log-zero-minus-log-zero-is-not-zero", LOG2,
     sympy.Add(LOG2, sympy.log(HIDDEN_ZERO, evaluate=False),
               sympy.Mul(-1, sympy.log(HIDDEN_ZERO, evaluate=False), evaluate=False), evaluate=False),
     None, False, "cannot evaluate a logarithm"),
    ("integral-fraction-reference-is-not-an-int", F(4), 4.0, RTOL, True, ""),
    ("sympy-integer-reference-is-not-an-int", sympy.Integer(4), 4.0, RTOL, True, ""),
    ("sympy-integer-reference-under-exact", sympy.Integer(4), 4.0, None, False, "a float was given"),
    # categorical: exact and only with their own kind
    ("compute-vs-memory", "compute", "memory", None, False, "expected str 'compute', got str 'memory'"),
    ("string-for-float", 250.0, "250.0", RTOL, False, "a str only equals a str"),
    ("float-for-string", "250.0", 250.0, RTOL, False, "a str only equals a str"),
    ("true-for-1", 1, True, RTOL, False, "a bool only equals a bool"),
    ("1-for-true", True, 1, RTOL, False, "a bool only equals a bool"),
    ("false-for-0", 0, False, None, False, "a bool only equals a bool"),
    ("none-for-0", 0, None, None, False, "None only equals None"),
    ("0-for-none", None, 0, None, False, "None only equals None"),
    ("same-bool", False, False, None, True, ""),
    ("same-str", "compute", "compute", None, True, ""),
    # bits vs nats
    ("nats-given-for-bits-float", F(3, 2), 1.5 * math.log(2), RTOL, False, "relative difference 0.307"),
    ("nats-given-for-bits-exact", F(3, 2), 3 * LOG2 / 2, None, False, "exact values differ"),
    ("bits-given-for-nats-float", 3 * LOG2 / 2, 1.5, RTOL, False, "relative difference 0.443"),
    ("nats-correct-float", 3 * LOG2 / 2, 1.5 * math.log(2), RTOL, True, ""),
    ("nats-correct-exact", 3 * LOG2 / 2, sympy.log(8) / 2, None, True, ""),
    ("irrational-one-part-in-a-million", sympy.sqrt(2) / 2, math.sqrt(2) / 2 * (1 + 1e-6), RTOL, False,
     "relative difference 1e-06"),
    ("irrational-float-under-exact", sympy.sqrt(2) / 2, math.sqrt(2) / 2, None, False,
     "a float was given where an exact value is required"),
    ("irrational-allclose", sympy.pi, 3.14159, CLOSE, True, ""),
    ("irrational-allclose-too-far", sympy.pi, 3.1415, CLOSE, False, "absolute difference 9.27e-05"),
    # float references (torch kernel outputs)
    ("float-ref-reltol", 0.1 + 0.2, 0.3, RTOL, True, ""),
    ("float-ref-exact-policy", 0.1 + 0.2, 0.3, None, False, "values differ (policy Exact())"),
    ("float-ref-exact-answer", 0.5, F(1, 2), None, True, ""),
    ("float-ref-allclose-atol", 0.0, 5e-8, CLOSE, True, ""),
    ("float-ref-allclose-outside", 0.0, 2e-7, CLOSE, False, "absolute difference 2e-07"),
    ("nan-ref-nan", math.nan, math.nan, CLOSE, True, ""),
    ("inf-ref-inf", math.inf, math.inf, CLOSE, True, ""),
    ("inf-ref-minus-inf", math.inf, -math.inf, CLOSE, False, "non-finite"),
    ("nan-for-float", 1.0, math.nan, CLOSE, False, "non-finite"),
    # tensors
    ("tensor-close", t("float32", (2,), 1.0, 2.0), t("float32", (2,), 1.0, 2.00001), CLOSE, True, ""),
    ("tensor-float-widths-may-differ", t("float32", (2,), 1.0, 2.0), t("float64", (2,), 1.0, 2.0), CLOSE,
     True, ""),
    ("tensor-broadcastable-shape", t("float32", (2, 3), *[1.0] * 6), t("float32", (3,), 1.0, 1.0, 1.0), CLOSE,
     False, "shape differs: expected (2, 3), got (3,) (no broadcasting)"),
    ("tensor-extra-unit-dim", t("float32", (3,), 1.0, 1.0, 1.0), t("float32", (1, 3), 1.0, 1.0, 1.0), CLOSE,
     False, "shape differs"),
    ("tensor-values", t("float32", (2, 2), 1.0, 2.0, 3.0, 4.0), t("float32", (2, 2), 1.0, 2.5, 3.0, 4.1),
     CLOSE, False, "2 / 4 elements differ (50.0%); greatest absolute difference 0.5 at index (0, 1)"),
    ("tensor-int-ref-float-answer", t("int64", (1,), 3), t("float32", (1,), 3.0), CLOSE, False,
     "dtype family differs: expected int64 (int), got float32 (float) (the values themselves are equal"),
    ("tensor-int-ref-other-floats", t("int64", (2,), 3, 4), t("float32", (2,), 3.0, 4.5), CLOSE, False,
     "dtype family differs: expected int64 (int), got float32 (float)$"),
    ("tensor-float-ref-int-answer", t("float32", (1,), 3.0), t("int64", (1,), 3), CLOSE, False,
     "dtype family differs"),
    ("tensor-int-widths", t("int64", (2,), 3, 4), t("int32", (2,), 3, 4), CLOSE, True, ""),
    ("tensor-int-exact", t("int64", (2,), 3, 4), t("int64", (2,), 3, 5), CLOSE, False,
     "int64 tensors are not equal: 1 / 2 elements differ (50.0%); first at index (1,)"),
    ("tensor-bool-vs-int", t("bool", (1,), True), t("int64", (1,), 1), CLOSE, False, "dtype family differs"),
    ("tensor-nan-matches-nan", t("float32", (1,), math.nan), t("float32", (1,), math.nan), CLOSE, True, ""),
    ("tensor-nan-for-number", t("float32", (1,), 1.0), t("float32", (1,), math.nan), CLOSE, False,
     "greatest absolute difference inf"),
    ("tensor-exact-policy-says-equal", t("float32", (1,), 1.0), t("float32", (1,), 1.0000001), None, False,
     "tensors are not equal under Exact()"),
    ("tensor-reltol-no-atol", t("float64", (1,), 0.0), t("float64", (1,), 1e-300), RTOL, False,
     "tensors are not close under RelTol(rtol=1e-09)"),
    ("scalar-ref-tensor-answer", 3.0, t("float32", (), 3.0), CLOSE, False, "a tensor only equals a tensor"),
    ("tensor-ref-scalar-answer", t("float32", (), 3.0), 3.0, CLOSE, False,
     "a tensor only equals a tensor (the values themselves are equal: only the kind is wrong)"),
    ("tensor-ref-other-scalar", t("float32", (), 3.0), 3.5, CLOSE, False, "a tensor only equals a tensor$"),
    ("zero-d-tensor", t("float32", (), 3.0), t("float64", (), 3.0), CLOSE, True, ""),
    # containers and paths
    ("nested-path", {"rows": [{"grad": F(1)}, {"grad": F(1)}, {"grad": F(1, 2)}]},
     {"rows": [{"grad": F(1)}, {"grad": F(1)}, {"grad": 0.5}]}, None, False,
     "rows[2]['grad']: expected Fraction 1/2, got float 0.5"),
    ("first-difference-wins", [1, 2, 3], [1, 5, 6], None, False, "[1]: expected int 2, got int 5"),
    ("list-length", [1, 2, 3], [1, 2], None, False, "expected a list of length 3, got length 2"),
    ("missing-key", {"a": 1, "b": 2}, {"a": 1}, None, False, "missing key 'b'"),
    ("extra-key", {"a": 1}, {"a": 1, "b": 2}, None, False, "unexpected key 'b'"),
    ("list-for-dict", {"a": 1}, [1], None, False, "expected dict"),
    ("dict-equal-any-order", {"a": 1, "b": [F(1, 2), "x"]}, {"b": [F(1, 2), "x"], "a": 1}, None, True, ""),
    ("rows-allclose", {"rows": [{"y": t("float32", (2,), 0.5, 0.25)}]},
     {"rows": [{"y": t("float32", (2,), 0.5, 0.2500001)}]}, CLOSE, True, ""),
    # unsupported kinds fail instead of raising
    ("set-answer", {1}, {1}, None, False, "unsupported type set"),
    ("object-answer", 1, object(), None, False, "the answer has an unsupported type object"),
    ("int-subclass-answer", 1, type("Sneaky", (int,), {"__eq__": lambda s, o: True})(2), None, False,
     "unsupported type Sneaky"),
    ("float-subclass-reference", type("F", (float,), {})(1.0), 1.0, None, False, "unsupported type F"),
    ("symbol-answer", 1, sympy.Symbol("x"), None, False,
     "the answer has the symbol x, which the reference does not have (its symbols: none)"),
    ("complex-sympy-answer", 1, sympy.I, None, False, "unsupported sympy node ImaginaryUnit"),
]


@pytest.mark.parametrize(("expected", "actual", "policy", "ok", "fragment"),
                         [case[1:] for case in CASES], ids=[case[0] for case in CASES])
@pytest.mark.timing
def test_comparator_table(expected: object, actual: object, policy: object, ok: bool, fragment: str) -> None:
    verdict = compare(expected, actual, policy, time_limit=DECIDES)
    assert type(verdict) is Verdict and type(verdict.ok) is bool and type(verdict.reason) is str
    assert verdict.ok is ok, verdict.reason
    if ok:
        assert verdict.reason == ""
    elif fragment.endswith("$"):  # the reason ends there
        assert verdict.reason.endswith(fragment[:-1]), verdict.reason
    else:
        assert fragment in verdict.reason, verdict.reason


def test_case_ids_are_unique() -> None:
    assert len({case[0] for case in CASES}) == len(CASES)


@pytest.mark.parametrize("value", [case[1] for case in CASES], ids=[case[0] for case in CASES])
def test_every_reference_in_the_table_equals_itself(value: object) -> None:
    for policy in (None, RTOL, CLOSE):
        verdict = compare(value, value, policy)
        if "unsupported" in compare(value, value).reason:
            assert not verdict.ok
        else:
            assert verdict.ok, verdict.reason


def test_failed_verdict_names_path_and_policy() -> None:
    verdict = compare({"rows": [{"t": F(1, 3)}]}, {"rows": [{"t": 0.3}]}, RTOL)
    assert not verdict.ok
    assert verdict.path == ("rows", 0, "t")
    assert verdict.reason.startswith("rows[0]['t']: ")
    assert "policy RelTol(rtol=1e-09)" in verdict.reason


def test_tolerance_is_decided_exactly_at_the_boundary() -> None:
    # |a - 1| == rtol exactly in rationals: the boundary is inclusive.
    rtol = 2.0**-30
    assert compare(F(1), 1 + rtol, RelTol(rtol)).ok
    assert not compare(F(1), 1 + 2 * rtol, RelTol(rtol)).ok
    ref = t("float64", (1,), 1.0)
    assert compare(ref, t("float64", (1,), 1 + rtol), AllClose(rtol, 0.0)).ok
    assert not compare(ref, t("float64", (1,), 1 + 2 * rtol), AllClose(rtol, 0.0)).ok


def test_irrational_reference_decided_near_the_boundary() -> None:
    # math.sqrt(2) is within half an ulp (~1.1e-16 relative) of sqrt(2).
    assert compare(sympy.sqrt(2), math.sqrt(2), RelTol(2e-16)).ok
    assert not compare(sympy.sqrt(2), math.sqrt(2), RelTol(1e-17)).ok


@pytest.mark.timing
def test_equality_needing_a_proof_passes_with_time_and_fails_without() -> None:
    hard = (sympy.log(8) / LOG2, 3)  # agree to every digit; only sympy can prove it
    assert compare(*hard, time_limit=DECIDES).ok
    verdict = compare(*hard, time_limit=NO_TIME)  # 1e-4 s raced a fast machine's 64- and 256-bit steps
    assert not verdict.ok
    assert "could not decide in time" in verdict.reason


def test_not_a_real_number_fails_with_reason() -> None:
    verdict = compare(1, sympy.Pow(sympy.Integer(-2), sympy.Rational(1, 2), evaluate=False))
    assert not verdict.ok and "not a real number" in verdict.reason


def test_too_deep_values_become_a_failed_verdict() -> None:
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    verdict = compare(deep, deep)
    assert not verdict.ok and "internal error" in verdict.reason


def test_not_a_policy() -> None:
    verdict = compare(1, 1, "RelTol")  # type: ignore[arg-type]
    assert not verdict.ok and "not a policy" in verdict.reason


# Cases whose outcome must not depend on which side is the reference. (The rules are otherwise
# deliberately asymmetric: a float reference accepts an exact answer under RelTol, an int
# reference does not accept a float.)
SYMMETRIC = [
    "reassociated-passes", "ring-allreduce-correct", "ring-allreduce-missing-(N-1)/N", "factor-of-2",
    "one-part-in-a-million", "one-part-in-ten-billion", "compute-vs-memory", "string-for-float",
    "true-for-1", "false-for-0", "none-for-0", "nats-given-for-bits-float", "nats-given-for-bits-exact",
    "nats-correct-float", "nats-correct-exact", "tensor-close", "tensor-broadcastable-shape",
    "tensor-extra-unit-dim", "tensor-values", "tensor-int-ref-float-answer", "tensor-int-exact",
    "tensor-bool-vs-int", "scalar-ref-tensor-answer", "list-length", "list-for-dict", "dict-equal-any-order",
    "exact-vs-exact-equal", "int-given-log-ratio", "nan-ref-nan", "inf-ref-minus-inf", "nan-for-float",
]
BY_ID = {case[0]: case[1:] for case in CASES}


@pytest.mark.parametrize("case_id", SYMMETRIC)
@pytest.mark.timing
def test_swapping_reference_and_answer_gives_the_same_outcome(case_id: str) -> None:
    expected, actual, policy, ok, _ = BY_ID[case_id]
    verdict = compare(actual, expected, policy, time_limit=DECIDES)
    assert verdict.ok is ok, verdict.reason
    assert verdict.ok or verdict.reason


@pytest.mark.timing
def test_compare_is_safe_from_several_threads() -> None:
    from concurrent.futures import ThreadPoolExecutor

    pairs = [(sympy.log(2**k) / LOG2, k) for k in range(2, 10)]  # each needs the prover process
    pairs += [(sympy.sqrt(2) * k, math.sqrt(2) * k) for k in range(1, 9)]  # intervals, per thread
    with ThreadPoolExecutor(max_workers=4) as pool:
        verdicts = list(pool.map(lambda pair: compare(*pair, RTOL, time_limit=DECIDES), pairs * 2))
    assert all(verdict.ok for verdict in verdicts), [v.reason for v in verdicts if not v.ok]


def _denested_zero(a: int, b: int) -> sympy.Expr:
    """sqrt(a + b + 2*sqrt(a*b)) - sqrt(a) - sqrt(b), unevaluated: exactly zero."""
    def root(x: sympy.Expr) -> sympy.Expr:
        return sympy.Pow(x, sympy.Rational(1, 2), evaluate=False)

    inner = sympy.Add(sympy.Integer(a + b), sympy.Mul(2, root(sympy.Integer(a * b)), evaluate=False),
                      evaluate=False)
    return sympy.Add(root(inner), sympy.Mul(-1, root(sympy.Integer(a)), evaluate=False),
                     sympy.Mul(-1, root(sympy.Integer(b)), evaluate=False), evaluate=False)


# 3 plus twenty such zeros: agrees with 3 to every bit, and sympy needs about 9 s to give up.
PRIMES = list(sympy.primerange(2, 200))[:40]
HOSTILE_THREE = sympy.Add(3, *(_denested_zero(a, b) for a, b in zip(PRIMES[::2], PRIMES[1::2], strict=True)),
                          evaluate=False)


@pytest.mark.timing
def test_a_hostile_answer_holding_a_prover_does_not_fail_a_correct_one() -> None:
    import threading
    import time

    from exactgrade import _timeout

    hostile: list[Verdict] = []
    rollout = threading.Thread(target=lambda: hostile.append(compare(3, HOSTILE_THREE, time_limit=4)))
    rollout.start()
    while _timeout.in_use() == 0 and rollout.is_alive():
        time.sleep(0.01)
    assert rollout.is_alive(), hostile  # the hostile proof holds a prover now
    correct = compare(3, sympy.log(8) / LOG2, time_limit=DECIDES)  # needs a proof too
    rollout.join()
    assert correct.ok, correct.reason
    assert not hostile[0].ok
    # sympy either runs out of time or gives up first (it may, on a fast or idle machine): both refuse
    assert "could not decide" in hostile[0].reason and "agree to" in hostile[0].reason, hostile[0].reason


# |a - 1| is exactly rtol: the interval test can never decide, whatever the precision. 40,000
# logarithms of 61-digit integers take about 1 s at 64 bits on a loaded 2-core VM (all four
# precisions: minutes), so a limit of SHORT_LIMIT falls inside the first precision step on any
# machine, by 100x and more. (330 logarithms under a 1 s limit, then 40,000: each raced a faster
# machine, which finished inside the limit.)
EDGE = 1 + F(1e-9)
LOGS_NEXT_TO_ONE = sympy.Add(sympy.Rational(EDGE.numerator, EDGE.denominator),
                             *(term for k in range(20_000) for term in (
                                 sympy.log(sympy.Integer(10**60 + k), evaluate=False),
                                 sympy.Mul(-1, sympy.log(sympy.Integer(10**60 + k), evaluate=False),
                                           evaluate=False))),
                             evaluate=False)
SHORT_LIMIT = 1e-3


@pytest.mark.timing
def test_the_time_limit_stops_a_precision_step_in_the_middle() -> None:
    verdict = compare(1.0, LOGS_NEXT_TO_ONE, RelTol(1e-9), time_limit=SHORT_LIMIT)
    assert not verdict.ok
    assert "could not decide in time: stopped at" in verdict.reason, verdict.reason
    assert "(policy RelTol(rtol=1e-09))" in verdict.reason


@pytest.mark.timing
def test_the_time_limit_is_for_the_whole_call_not_each_element() -> None:
    # Each of these proofs takes a few milliseconds, below the limit; all 5,000 take over 2 minutes on
    # a loaded 2-core VM (each is a round trip to a prover process), thousands of times the limit.
    pairs = [sympy.log(2**k) / LOG2 for k in range(2, 5002)]
    verdict = compare(list(range(2, 5002)), pairs, time_limit=0.05)
    assert not verdict.ok
    assert "could not decide in time" in verdict.reason, verdict.reason
    assert compare(list(range(2, 12)), pairs[:10], time_limit=DECIDES).ok


# -- values with free symbols ------------------------------------------------------------

X, Y = sympy.symbols("x y")  # no assumptions: graded over the reals
RX = sympy.Symbol("x", real=True)
P, Q = sympy.symbols("p q", positive=True, integer=True)  # Q: positive integers too
PR = sympy.Symbol("p", positive=True)  # positive reals
K = sympy.Symbol("k", integer=True)


def uneval(function, *args):
    return function(*args, evaluate=False)


def root(x):
    return sympy.Pow(x, sympy.Rational(1, 2), evaluate=False)


# (id, expected, actual, ok, fragment of the reason when not ok); all under Exact()
SYMBOLIC_CASES = [
    # rational functions: exact canonical form over QQ(symbols)
    ("expanded-linear", (X + 2) / 7, X / 7 + sympy.Rational(2, 7), True, ""),
    ("partial-fractions", 1 / (X * (X + 1)), 1 / X - 1 / (X + 1), True, ""),
    ("factored-vs-expanded", (X + Y) ** 3, sympy.expand((X + Y) ** 3), True, ""),
    ("cancelled-factor", (X**2 - 1) / (X - 1), X + 1, True, ""),
    ("bubble", (P - 1) / (Q + P - 1), 1 - Q / (P + Q - 1), True, ""),
    ("constant-answer", uneval(sympy.Add, X, -X) + 3, 3, True, ""),
    ("dropped-factor", X * (X + 1) / 2, X / 2, False, "they differ at x="),
    ("changed-exponent", X**3 + 1, X**2 + 1, False, "they differ at x="),
    ("flipped-sign", X - Y, Y - X, False, "they differ at"),
    ("swapped-symbols", X / Y, Y / X, False, "they differ at"),
    ("off-by-one", (P - 1) / (Q + P - 1), (P - 1) / (Q + P), False, "they differ at p="),
    ("rational-answer-to-symbolic-key", X + 1, F(1), False, "they differ at x="),
    # elementary functions: random points, intervals
    ("tan-sec", sympy.tan(Y) ** 2 + 1, sympy.sec(Y) ** 2, True, ""),
    ("sin-cos", uneval(sympy.Add, sympy.sin(X) ** 2, sympy.cos(X) ** 2), 1, True, ""),
    ("cosh-sinh", sympy.cosh(X) ** 2, sympy.sinh(X) ** 2 + 1, True, ""),
    ("double-angle", sympy.sin(2 * X), 2 * sympy.sin(X) * sympy.cos(X), True, ""),
    ("exp-product", sympy.exp(X + Y), sympy.exp(X) * sympy.exp(Y), True, ""),
    ("log-product", sympy.log(PR * 3), sympy.log(PR) + sympy.log(3), True, ""),
    ("atan-reciprocal", sympy.atan(PR) + sympy.atan(1 / PR), sympy.pi / 2, True, ""),
    ("asinh-log", sympy.asinh(X), sympy.log(X + sympy.sqrt(X**2 + 1)), True, ""),
    ("tanh-exp", sympy.tanh(X), (sympy.exp(2 * X) - 1) / (sympy.exp(2 * X) + 1), True, ""),
    ("acot-is-atan-of-reciprocal", sympy.acot(X), sympy.atan(1 / X), True, ""),
    # 2048 (not 4096): at |x| near 16, 17**4096 ~ 2**16742 cannot meet 2**-64 absolute at 16384 bits,
    # so a random point there is (rightly) undecidable; 17**2048 ~ 2**8372 always resolves.
    ("integer-power-too-large-to-expand", sympy.Pow(X + 1, 2048, evaluate=False),
     sympy.Pow(sympy.Pow(X + 1, 32, evaluate=False), 64, evaluate=False), True, ""),
    ("hidden-zero-with-a-symbol", X, uneval(sympy.Add, X, HIDDEN_ZERO), True, ""),
    ("wrong-trig-identity", sympy.tan(Y) ** 2 + 1, sympy.sec(Y) ** 2 + 1, False, "they differ at y="),
    ("sin-vs-cos", sympy.sin(X), sympy.cos(X), False, "they differ at x="),
    ("acot-is-not-pi-over-2-minus-atan", sympy.acot(X) + sympy.atan(X), sympy.pi / 2, False,
     "they differ at x=-"),
    ("answer-not-real-where-key-is", sympy.log(X**2), 2 * sympy.log(X), False,
     "but the answer is not a real number there"),
    ("tiny-difference", sympy.exp(X), sympy.exp(X) + sympy.Rational(1, 2**100), False, "they differ at x="),
    ("huge-off-by-one", 2**P - 1, 2**P, False, "they differ at p="),
    ("tiny-halved", 2 ** (-P), 2 ** (-P - 1), False, "they differ at p="),
    ("huge-identity", 2 ** (P + 1) - 2, 2 * (2**P - 1), True, ""),
    # assumptions matter
    ("root-of-square-positive", PR, root(PR**2), True, ""),
    ("root-of-square-real", RX, root(RX**2), False, "they differ at x=-"),
    ("sin-pi-k-integer", uneval(sympy.sin, sympy.pi * K), 0, True, ""),
    ("sin-pi-x-real", uneval(sympy.sin, sympy.pi * RX), 0, False, "they differ at x="),
    ("minus-one-power-integer", sympy.Pow(-1, K), uneval(sympy.cos, sympy.pi * K), True, ""),
    # symbols and assumptions of the answer
    ("other-symbol", X + 1, Y + 1, False,
     "the answer has the symbol y, which the reference does not have (its symbols: x)"),
    ("same-name-other-assumptions", P + 1, PR + 1, False,
     "the answer's symbol p has assumptions (positive) other than the reference's (integer positive)"),
    ("plain-vs-real", X, RX, False, "the answer's symbol x has assumptions (real) other than"),
    ("symbol-in-answer-to-number", F(1, 2), X / 2, False,
     "which the reference does not have (its symbols: none)"),
    ("float-answer", X, 1.5, False, "an expression in symbols only equals an exact value"),
    ("non-analytic-answer", RX, sympy.Abs(RX), False, "Abs is not an analytic function"),
    ("piecewise-answer", RX, sympy.Piecewise((RX, RX > 0), (-RX, True)), False, "not an analytic function"),
    ("floor-answer", X, sympy.floor(X), False, "floor is not an analytic function"),
    ("unsupported-function", X, sympy.gamma(X), False, "unsupported sympy node gamma"),
    # the elementary functions of constants: intervals, and the prover for identities
    ("constant-trig-identity", sympy.tan(1) ** 2 + 1, sympy.sec(1) ** 2, True, ""),
    ("constant-inverse", sympy.asin(sympy.Rational(1, 2)), sympy.pi / 6, True, ""),
    ("constant-sin-cos", sympy.sin(1), sympy.cos(1), False, "exact values differ"),
    ("constant-acosh", sympy.acosh(2), sympy.log(2 + sympy.sqrt(3)), True, ""),
    ("constant-out-of-domain", 1, uneval(sympy.asin, 2), False, "outside its real domain"),
    ("constant-trig-argument-too-large", sympy.sin(2**300), 0, False, "too large to evaluate"),
    # math-verify's false passes (its issues #14 and #41) and the pairs it refused
    ("mv14-e", 1 - 1 / sympy.E, 1 + 1 / sympy.E, False, "exact values differ"),
    ("mv14-powers", sympy.Rational(1, 2**99), sympy.Rational(1, 2**98), False, "exact values differ"),
    ("mv14-factorials", 1 / sympy.factorial(2004), 1 / sympy.factorial(2006), False, "exact values differ"),
    ("mv41-root", 4, 4 * sympy.sqrt(2), False, "exact values differ"),
]


@pytest.mark.parametrize(("expected", "actual", "ok", "fragment"),
                         [case[1:] for case in SYMBOLIC_CASES], ids=[case[0] for case in SYMBOLIC_CASES])
@pytest.mark.timing
def test_symbolic_table(expected: object, actual: object, ok: bool, fragment: str) -> None:
    verdict = compare(expected, actual, Exact(), time_limit=DECIDES)
    assert type(verdict) is Verdict and verdict.ok is ok, verdict.reason
    assert fragment in verdict.reason, verdict.reason


def test_symbolic_case_ids_are_unique() -> None:
    assert len({case[0] for case in SYMBOLIC_CASES}) == len(SYMBOLIC_CASES)


@pytest.mark.parametrize("policy", [RTOL, CLOSE], ids=["reltol", "allclose"])
def test_symbols_are_graded_under_exact_only(policy: object) -> None:
    verdict = compare(X + 1, X + 1, policy)
    assert not verdict.ok
    assert "a value with free symbols is graded under Exact() only" in verdict.reason


def test_the_reference_symbols_are_those_of_the_whole_reference() -> None:
    """A leaf whose key is a constant still allows the symbols the rest of the key has."""
    key = {"rows": [{"share": X / (X + 1), "total": 1}]}
    total = sympy.sin(X) ** 2 + sympy.cos(X) ** 2
    assert compare(key, {"rows": [{"share": 1 - 1 / (X + 1), "total": total}]}).ok
    verdict = compare(key, {"rows": [{"share": X / (X + 1), "total": uneval(sympy.Add, 1, Y, -Y)}]})
    assert not verdict.ok and verdict.path == ("rows", 0, "total")
    assert "the answer has the symbol y" in verdict.reason


def test_a_reference_symbol_with_two_domains_is_refused() -> None:
    verdict = compare([X, RX], [X, RX])
    assert not verdict.ok
    assert "symbol x appears in the reference with two sets of assumptions" in verdict.reason


@pytest.mark.timing
def test_a_decoded_hostile_expression_is_decided_or_refused_in_time() -> None:
    """The wire's worst symbolic shapes: a chain of functions as deep as the wire allows, 1000 nodes of
    them, a power too large to expand with huge coefficients. Each is decided (a difference at a
    point) or refused with a reason; none raises."""
    from exactgrade import wire

    chain: list = ["Symbol", "x"]
    for index in range(60):
        chain = [("sin", "cosh", "atan", "exp")[index % 4], chain]
    wide = ["Add", *([("tan", "asinh", "sech")[i % 3], ["Symbol", "x"]] for i in range(499))]
    expansions = ["Pow", ["Pow", ["Add", ["Symbol", "x"], ["Integer", 10**999]], ["Integer", 64]],
                  ["Integer", 64]]
    for tree in (chain, wide, expansions):
        answer = wire.decode(f'{{"$sym":{json.dumps(tree)}}}')
        verdict = compare(X, answer)
        assert not verdict.ok
        assert "they differ at x=" in verdict.reason or "could not decide" in verdict.reason, verdict.reason


# x times LOGS_NEXT_TO_ONE (not exactly x): a point needs 40,000 logarithms, about 1 s on a loaded
# 2-core VM, 1,000 times SHORT_LIMIT (1 s itself was raced: a fast machine decided "they differ at
# x=..." inside it). Which stage the limit stops (expanding the answer, or evaluating it at some
# precision) is the machine's speed; that it stops is not.
@pytest.mark.timing
def test_the_time_limit_holds_for_symbolic_answers() -> None:
    verdict = compare(X, sympy.Mul(X, LOGS_NEXT_TO_ONE, evaluate=False), time_limit=SHORT_LIMIT)
    assert not verdict.ok
    assert re.search(r"could not decide in time: stopped (while expanding|at \d+ bits)", verdict.reason), \
        verdict.reason
