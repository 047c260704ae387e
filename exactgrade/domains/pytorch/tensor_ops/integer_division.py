"""The integer_division family of tensor_ops: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.pytorch.common import PY_INT, Inputs, f32, i64, pytorch_level, tensor
from exactgrade.domains.pytorch.exact import ExactTensor, values
from exactgrade.domains.pytorch.shared import dims
from exactgrade.domains.pytorch.tensor_ops.shared import draws_none, one_answer_for_all, some_sentinel
from exactgrade.family import Branch, Draw, Reject, five_levels


# pt-004 -------------------------------------------------------------------------------------------
def integer_division(a, b):
    import torch

    return {"rows": [{
        "floor_quotient": torch.div(a, b, rounding_mode="floor"),
        "trunc_quotient": torch.div(a, b, rounding_mode="trunc"),
        "remainder": torch.remainder(a, b),
        "fmod": torch.fmod(a, b),
        "true_quotient": a / b,
    }]}


def _integer_division(a, b):
    pairs = list(zip(values(a), values(b), strict=True))
    floor = [p // q for p, q in pairs]
    trunc = [int(Fraction(p, q)) for p, q in pairs]  # int() of a Fraction rounds toward zero
    return [{
        "floor_quotient": ExactTensor.of("int64", floor),
        "trunc_quotient": ExactTensor.of("int64", trunc),
        "remainder": ExactTensor.of("int64", [p - q * f for (p, q), f in zip(pairs, floor, strict=True)]),
        "fmod": ExactTensor.of("int64", [p - q * t for (p, q), t in zip(pairs, trunc, strict=True)]),
        "true_quotient": ExactTensor.of("float32", [Fraction(p, q) for p, q in pairs]),
    }]


def _sample_division(draw: Draw, level: int) -> dict:
    n = 6 + 2 * (level - 1)
    bound = 10 * level + 5
    a = [draw.integer(-bound, bound) for _ in range(n)]
    b = [draw.integer(1, 2 + 2 * level) * draw.choice((-1, 1)) for _ in range(n)]
    return {"a": tensor("int64", a), "b": tensor("int64", b)}


def _signs_mixed(inputs: Inputs) -> str | None:
    pairs = list(zip(values(inputs["a"]), values(inputs["b"]), strict=True))
    if not any(p % q != 0 and (p < 0) != (q < 0) for p, q in pairs):
        return "no inexact quotient of mixed signs: floor and trunc would agree everywhere"
    return None


LEVEL_1 = pytorch_level(
    "tensor_ops",
    reference=integer_division,
    independent=_integer_division,
    question="""Divide the integer tensor `a` by `b` elementwise in five ways: `floor_quotient` (rounded
        toward negative infinity), `trunc_quotient` (rounded toward zero), `remainder` =
        torch.remainder(a, b), `fmod` = torch.fmod(a, b), and `true_quotient` = a / b with torch's true
        division of the two int64 tensors.""",
    answer=lambda i: ({"floor_quotient": i64(*dims(i["a"])), "trunc_quotient": i64(*dims(i["a"])),
                       "remainder": i64(*dims(i["a"])), "fmod": i64(*dims(i["a"])),
                       "true_quotient": f32(*dims(i["a"]))},),
    sample=_sample_division,
    refuse=_signs_mixed,
)


LEVEL_2 = pytorch_level(
    "tensor_ops",
    integer_division,
    _integer_division,
    """For every pair (a, b) of the int64 tensors `a` and `b` (elementwise), give: `floor_quotient`,
        the largest integer q with q <= a/b; `trunc_quotient`, a/b with its fractional part dropped
        (rounded toward zero); `remainder`, a - b*floor_quotient; `fmod`, a - b*trunc_quotient; and
        `true_quotient`, the real quotient a/b as a float32 tensor.""",
    lambda i: ({"floor_quotient": i64(*dims(i["a"])), "trunc_quotient": i64(*dims(i["a"])),
                "remainder": i64(*dims(i["a"])), "fmod": i64(*dims(i["a"])),
                "true_quotient": f32(*dims(i["a"]))},),
    _sample_division,
    refuse=_signs_mixed,
)

# integer_division L3: Euclidean division (remainder never negative) -------------------------------
def euclidean_division(a, b):
    import torch

    r = torch.remainder(a, b.abs())
    return {"rows": [{"q": (a - r) // b, "r": r}]}


def _euclidean_division(a, b):
    pairs = list(zip(values(a), values(b), strict=True))
    rs = [p % abs(q) for p, q in pairs]
    return [{"q": ExactTensor.of("int64", [(p - r) // q for (p, q), r in zip(pairs, rs, strict=True)]),
             "r": ExactTensor.of("int64", rs)}]


def _euclid_differs(inputs: Inputs) -> str | None:
    pairs = list(zip(values(inputs["a"]), values(inputs["b"]), strict=True))
    if not any(q < 0 and p % q != 0 for p, q in pairs):
        return "no inexact quotient by a negative divisor: Euclidean and floor division would agree"
    return _signs_mixed(inputs)


LEVEL_3 = pytorch_level(
    "tensor_ops",
    euclidean_division,
    _euclidean_division,
    """For every pair (a, b) of the int64 tensors `a` and `b` (elementwise), give the integers `q`
        and `r` with a = b*q + r and 0 <= r < |b| (both int64 tensors).""",
    lambda i: ({"q": i64(*dims(i["a"])), "r": i64(*dims(i["a"]))},),
    _sample_division,
    refuse=_euclid_differs,
)


# integer_division L4: per row, the smallest divisor on which the two roundings agree -------------
def agreeing_divisor(a, limit):
    import torch

    divisors = []
    for row in a:
        agree = [d for d in range(2, limit + 1) if torch.equal(torch.div(row, d, rounding_mode="floor"),
                                                               torch.div(row, d, rounding_mode="trunc"))]
        divisors.append(agree[0] if agree else -1)
    return {"rows": [{"divisor": torch.tensor(divisors)}]}


def _agreeing_divisor(a, limit):
    divisors = []
    for row in values(a):
        agree = [d for d in range(2, limit + 1) if all(p // d == int(Fraction(p, d)) for p in row)]
        divisors.append(agree[0] if agree else -1)
    return [{"divisor": ExactTensor.of("int64", divisors)}]


def _smallest_agreeing(row: list[int], limit: int) -> int:
    """The smallest d in 2..limit on which floor and truncation agree for every element of row
    (they differ exactly on a negative element that d does not divide), or -1: the sampler draws
    each row for an answer chosen first."""
    negatives = math.gcd(*(p for p in row if p < 0))
    return next((d for d in range(2, limit + 1) if negatives % d == 0), -1)


DIVISION_ROWS = 4


_ODD_PRIMES = (3, 5, 7, 11, 13)


def _sample_agreeing(draw: Draw, level: int) -> dict:
    n, bound, limit = 2 + 2 * level, 10 * level + 5, draw.integer(10, 14)
    answers = [p for p in _ODD_PRIMES if p <= limit]
    rows = []
    for _ in range(DIVISION_ROWS):
        none = draws_none(draw)
        # a row without an answer: negatives with no common factor, or all multiples of a prime above limit
        base = draw.choice((1, draw.choice([p for p in (13, 17, 19) if p > limit]))) if none else \
            draw.choice(answers)
        want = -1 if none else base
        for _ in range(50):
            negatives = draw.integer(2, n - 2)
            row = [-base * draw.integer(1, bound // base) for _ in range(negatives)]
            row += [draw.integer(1, bound) for _ in range(n - negatives)]
            if any(p % 2 for p in row if p < 0) and _smallest_agreeing(row, limit) == want:
                break
        else:
            raise Reject("no row with the drawn answer was found")
        rows.append(draw.shuffled(row))
    return {"a": tensor("int64", rows), "limit": limit}


def _has_negative_inexact_at_two(inputs: Inputs) -> str | None:
    if not all(any(p < 0 and p % 2 for p in row) for row in values(inputs["a"])):
        return "a row's negative elements are all even: its divisor would be 2 without any search"
    return None


LEVEL_4 = pytorch_level(
    "tensor_ops",
    agreeing_divisor,
    _agreeing_divisor,
    """Dividing an integer by a positive integer d and rounding the quotient down (toward negative
        infinity) can differ from rounding it toward zero. Each row of the int64 matrix `a` is a
        separate set of integers. Give `divisor`, an int64 vector with one entry per row of a: the
        smallest integer d with 2 <= d <= `limit` for which the two roundings of e/d agree for every
        element e of that row, or -1 if no such d exists.""",
    lambda i: ({"divisor": i64(i["a"].shape[0])},),
    _sample_agreeing,
    refuse=_has_negative_inexact_at_two,
    reject=one_answer_for_all("divisor"),
)


# integer_division L5: floor and truncating quotients summed over 10^11..10^12 terms ---------------
def division_sums(a, b, c, n):
    def floor_sum(n, m, a, b):      # sum over i < n of floor((a*i + b) / m), m > 0: Euclid-like steps
        total = 0
        if a < 0 or a >= m:
            total += (n - 1) * n // 2 * (a // m)
            a %= m
        if b < 0 or b >= m:
            total += n * (b // m)
            b %= m
        while True:
            if a >= m:
                total += (n - 1) * n // 2 * (a // m)
                a %= m
            if b >= m:
                total += n * (b // m)
                b %= m
            top = a * n + b
            if top < m:
                return total
            n, b, m, a = top // m, top % m, a, m

    import math

    floors = floor_sum(n, c, a, b)
    negative = min(n, max(0, (-b - 1) // a + 1))      # i < negative: a*i + b < 0 (a > 0)
    g = math.gcd(a, c)                                # a*i + b = 0 (mod c) has solutions iff g | b,
    exact = 0                                         # one in every c/g consecutive i
    if b % g == 0 and negative > 0:
        period = c // g
        first = (-b // g) * pow(a // g, -1, period) % period
        exact = 0 if first >= negative else (negative - 1 - first) // period + 1
    return {"rows": [{"floor_sum": floors, "trunc_sum": floors + negative - exact}]}


def _floor_sum_inclusive(a: int, b: int, c: int, n: int) -> int:
    """sum over 0 <= i <= n of floor((a*i + b) / c) for a, b >= 0, c > 0, by the reciprocity
    recursion (the lattice points under the line counted from the other axis)."""
    if n < 0:
        return 0
    if a == 0:
        return (n + 1) * (b // c)
    if a >= c or b >= c:
        return (a // c) * n * (n + 1) // 2 + (b // c) * (n + 1) + _floor_sum_inclusive(a % c, b % c, c, n)
    top = (a * n + b) // c
    return n * top - _floor_sum_inclusive(c, c - b - 1, a, top - 1)


def _floor_total(a: int, b: int, c: int, count: int) -> int:
    """sum over i < count of floor((a*i + b) / c), a > 0, any b."""
    shift = -(b // c)                                 # b + shift*c lies in [0, c)
    return _floor_sum_inclusive(a, b + shift * c, c, count - 1) - shift * count


def _division_sums(a, b, c, n):
    floors = _floor_total(a, b, c, n)
    negative = next(k for k in ((-b + a - 1) // a, (-b + a - 1) // a + 1) if a * k + b >= 0)
    negative = min(n, negative)
    # the exact quotients among the negative terms: floor(v/c) - floor((v-1)/c) is 1 iff c divides v
    exact = _floor_total(a, b, c, negative) - _floor_total(a, b - 1, c, negative)
    return [{"floor_sum": floors, "trunc_sum": floors + negative - exact}]


def _sample_division_sums(draw: Draw, level: int) -> dict:
    n = draw.integer(10**11, 10**12)
    g = draw.choice((1, 2, 4, 6, 10, 12))
    c = g * draw.integer(200, 50_000)
    a = g * draw.integer(2_000, 1_000_000)
    b = -a * draw.integer(n // 4, 3 * n // 4) - draw.integer(0, a - 1)
    if draw.chance(2, 3):
        b -= b % g                                    # some negative terms divide exactly
    return {"a": a, "b": b, "c": c, "n": n}


LEVEL_5 = pytorch_level(
    "tensor_ops",
    division_sums,
    _division_sums,
    lambda i: f"""For i = 0, 1, ..., n-1 with n = {i["n"]} (far too many terms to list), let v_i = a*i + b
        with a = `a`, b = `b`, and divide v_i by c = `c` in two ways: the quotient rounded down (toward
        minus infinity) and the quotient rounded toward zero (its fractional part dropped). Give
        `floor_sum`, the sum over all i of the rounded-down quotients, and `trunc_sum`, the sum over all
        i of the quotients rounded toward zero (both exact Python ints).""",
    lambda i: ({"floor_sum": PY_INT, "trunc_sum": PY_INT},),
    _sample_division_sums,
)


def division_exact_negatives(task) -> bool:
    """Some negative term divides exactly: its truncated and floor quotients agree (the named
    mistake, trunc = floor + the number of negative terms, then fails)."""
    i = task.inputs
    return task.expected["rows"][0]["trunc_sum"] != _floor_total(i["a"], i["b"], i["c"], i["n"]) + min(
        i["n"], (-i["b"] - 1) // i["a"] + 1)


INTEGER_DIVISION = five_levels(
    "integer_division",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 the torch rounding modes named; L2 each quotient and remainder by its definition; L3 "
          "Euclidean division (a third convention, derived from the other two); L4 per row of four, the "
          "smallest divisor on which floor and truncation agree, or -1 (a fifth of the rows); L5 floor "
          "and truncating quotients of an arithmetic progression summed over 10^11..10^12 terms (a "
          "Euclid-like floor sum, then the negative terms that divide exactly: a linear congruence)",
    branches=(Branch("no divisor up to the limit for some row", some_sentinel("divisor"), Fraction(1, 4),
                     (4,)),
              Branch("some negative term divides exactly", division_exact_negatives, Fraction(1, 3), (5,))),
)
