"""The entropy family of information: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade.domains.deeplearning.common import POLICY, prompt
from exactgrade.domains.deeplearning.information.shared import (
    API,
    MAX_OUTCOMES,
    _support,
    _unit,
    dyadic_distribution,
    info_family,
    info_question_rows,
    nats_tag,
    none_best,
)
from exactgrade.family import Branch, Draw, Reject
from exactgrade.task import TaskDef


def entropy_rows(distributions, unit):
    from fractions import Fraction

    import sympy

    def log2(p):
        n, d = p.numerator, p.denominator
        if n == 1 and d & (d - 1) == 0:
            return -(d.bit_length() - 1)
        if d == 1 and n & (n - 1) == 0:
            return n.bit_length() - 1
        raise ValueError(f"{p} is not a power of two")

    def in_unit(bits):
        if unit == "bits":
            return bits
        return sympy.Rational(bits.numerator, bits.denominator) * sympy.log(2)

    rows = []
    for p in distributions:
        h = sum((-Fraction(x) * log2(Fraction(x)) for x in p if x != 0), Fraction(0))
        rows.append({f"H_{unit}": in_unit(h)})
    return {"rows": rows}


def _entropy_prompt(inputs):
    unit = inputs["unit"]
    return prompt(
        f"For each probability distribution in `distributions`, compute its Shannon entropy in {unit}.",
        {"distributions": ("list of distributions, each a list of fractions.Fraction probabilities",
                           inputs["distributions"]),
         "unit": ("the unit to answer in", unit)},
        f'{{"rows": [{{"H_{unit}": value}}, ...]}}  (one row per distribution, in the given order)',
        unit + (" (exact sympy multiples of log(2))" if unit == "nats" else " (exact Fractions)"),
    )


def _widest_last(draw: Draw, level: int, distributions: list[list[F]]) -> list[list[F]]:
    """At level 5 one distribution has the full 16 outcomes."""
    if level == 5:
        distributions[draw.below(len(distributions))] = dyadic_distribution(draw, MAX_OUTCOMES[5])
    return distributions


def sample_entropy(draw: Draw, level: int) -> dict:
    distributions = [dyadic_distribution(draw, _support(draw, level)) for _ in range(2 + level)]
    return {"distributions": _widest_last(draw, level, distributions), "unit": _unit(draw)}


def build_entropy(task_id, inputs):
    return TaskDef(task_id, "information", inputs, entropy_rows, _entropy_prompt, API, POLICY,
                   tags=("entropy", *nats_tag(inputs)), meta={"distributions": inputs["distributions"]})


def _dyadic(draw: Draw, low: int, high: int) -> list[F]:
    return dyadic_distribution(draw, draw.integer(low, high))


def _rational(draw: Draw, n: int) -> list[F]:
    """n positive probabilities, multiples of 1/d for a d in 12..40, summing to 1."""
    for _ in range(32):
        d = draw.integer(max(12, 2 * n), 40)
        cuts = sorted(draw.sample(range(1, d), n - 1))
        p = [F(b - a, d) for a, b in zip([0, *cuts], [*cuts, d], strict=True)]
        if not all(x.denominator & (x.denominator - 1) == 0 and x.numerator == 1 for x in p):
            return p
    raise Reject("drew only dyadic distributions")


def sample_entropy_upper(draw: Draw, level: int) -> dict:
    if level == 2:
        return {"question": "code_length", "distributions": [_dyadic(draw, 3, 10) for _ in range(3)]}
    if level == 3:
        sources = []
        for _ in range(2):
            groups = _dyadic(draw, 2, 4)
            sources.append({"groups": groups, "within": [_dyadic(draw, 1, 4) for _ in groups]})
        return {"question": "two_stage", "sources": sources}
    if level == 4:
        candidates = [_dyadic(draw, 3, 8) for _ in range(draw.integer(4, 6))]
        peaks = sorted({max(p) for p in candidates})  # a cap at one candidate's peak: some qualify
        cap = draw.choice(peaks) if draw.chance(5, 6) else peaks[0] / 2
        return {"question": "best_capped", "candidates": candidates, "cap": cap}
    n = draw.integer(4, 6)
    p0, p1 = _rational(draw, n), _rational(draw, n)
    key = info_question_rows("kinks", p0=p0, p1=p1)["rows"][0]
    if not 1 <= len(key["kinks"]) <= 4:
        raise Reject("no kink (or more than four) in the least expected length")
    if sorted(t for t, _ in key["kinks"]) == order_changes(p0, p1):
        raise Reject("the named mistake (kinks where the order of the probabilities changes) gives the key")
    return {"question": "kinks", "p0": p0, "p1": p1}


def order_changes(p0, p1) -> list[F]:
    """The named mistake of entropy L5: the t in (0, 1) where two probabilities cross (where the
    order of the probabilities, not the optimal code, changes)."""
    found = set()
    for i in range(len(p0)):
        for j in range(i + 1, len(p0)):
            gap0, gap1 = F(p0[i]) - F(p0[j]), F(p1[i]) - F(p1[j])
            if gap0 != gap1 and 0 < gap0 / (gap0 - gap1) < 1:
                found.add(gap0 / (gap0 - gap1))
    return sorted(found)


ENTROPY = info_family(
    "entropy", build_entropy, sample_entropy,
    "L1: Shannon entropy with its formula stated, 2+level distributions. L2 (derive): the least expected "
    "length of a prefix code for dyadic distributions (entropy, not named). L3 (compose): the entropy of a "
    "two-stage source (group, then member). L4 (search): the largest-entropy candidate whose largest "
    "probability is at most a cap, ties to the smallest index, None in about a sixth. L5 (regimes): for "
    "a source mixing two non-dyadic distributions by a parameter t, every t where the slope of the least "
    "expected prefix-code length changes (the minimum over all codes of lines in t, so concave and piecewise "
    "linear: exact rationals at regime boundaries, no grid finds them) and where it peaks; the named "
    "mistake (kinks where the order of the probabilities changes) never gives the key.",
    sample_entropy_upper, branches=(Branch("no candidate under the cap", none_best, F(1, 20), (4,)),))
