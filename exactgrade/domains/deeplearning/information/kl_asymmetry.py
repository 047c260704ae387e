"""The kl_asymmetry family of information: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade.domains.deeplearning.common import POLICY, prompt
from exactgrade.domains.deeplearning.information.shared import (
    API,
    MAX_OUTCOMES,
    _unit,
    divergence_rows,
    dyadic_distribution,
    info_family,
    nats_tag,
)
from exactgrade.family import Branch, Draw, Reject
from exactgrade.rational import kl_bits
from exactgrade.task import TaskDef


def _asymmetry_prompt(inputs):
    unit = inputs["unit"]
    return prompt(
        "`pairs` holds a pair of distributions (p, q) and then the same pair reversed, (q, p): the two rows "
        "compare the KL divergence in both directions, D(p || q) and D(q || p). For each listed pair (a, b) "
        f"give the entropy H(a), the cross-entropy H(a, b) and the KL divergence D(a || b), all in {unit}. "
        "D(a || b) weighs by a, the first distribution of the pair.",
        {"pairs": ("list of two dicts {'p': distribution, 'q': distribution}: (p, q), then (q, p)",
                   inputs["pairs"]),
         "unit": ("the unit to answer in", unit)},
        f'{{"rows": [{{"H_p_{unit}": value, "H_pq_{unit}": value, "KL_{unit}": value}}, ...]}}  '
        "(one row per listed pair, in the given order; H_p is H(a), H_pq is H(a, b))",
        unit + (" (exact sympy multiples of log(2))" if unit == "nats" else " (exact Fractions)"),
    )


def sample_kl_asymmetry(draw: Draw, level: int) -> dict:
    """q is either a reordering of p (same entropy: the asymmetry is all in the cross terms) or
    an independent distribution; a symmetric pair is redrawn. At least 4 outcomes: every pair of
    dyadic distributions over 3 outcomes (orderings of 1/2, 1/4, 1/4) is symmetric."""
    widest = MAX_OUTCOMES[level] + (2 if level >= 2 else 0)
    for _ in range(8):  # a symmetric pair is drawn again (all of it, as a fresh attempt would)
        outcomes = draw.integer(max(4, widest - 4), widest)
        p = dyadic_distribution(draw, outcomes)
        q = draw.shuffled(p) if draw.chance(1, 3) else dyadic_distribution(draw, outcomes)
        if _asymmetric(p, q):
            break
    else:
        raise Reject("D(p || q) = D(q || p): not an asymmetric pair")
    return {"pairs": [{"p": p, "q": q}, {"p": q, "q": p}], "unit": "bits" if level == 1 else _unit(draw)}


def _asymmetric(p: list[F], q: list[F]) -> bool:
    """D(p || q) != D(q || p) for dyadic p and q with no zero, in integers: the difference is
    sum_i (p_i + q_i) (log2 p_i - log2 q_i), and with p_i = 2**-a_i, q_i = 2**-b_i, scaled by
    2**k for a k above every exponent, it is sum_i (2**(k - a_i) + 2**(k - b_i)) (b_i - a_i).
    (A cheap pre-screen; the builder confirms with exactgrade.rational.kl_bits.)"""
    a = [x.denominator.bit_length() - 1 for x in p]
    b = [x.denominator.bit_length() - 1 for x in q]
    k = max(a + b)
    return sum(((1 << (k - ai)) + (1 << (k - bi))) * (bi - ai) for ai, bi in zip(a, b, strict=True)) != 0


def build_kl_asymmetry(task_id, inputs):
    """The pair (p, q) and its reverse; a symmetric pair is refused."""
    p, q = inputs["pairs"][0]["p"], inputs["pairs"][0]["q"]
    if inputs["pairs"][1] != {"p": q, "q": p}:
        raise ValueError("a KL-asymmetry task lists (p, q) and then (q, p)")
    if kl_bits(p, q) == kl_bits(q, p):
        raise ValueError("the KL-asymmetry pair must have D(p || q) != D(q || p)")
    return TaskDef(task_id, "information", inputs, divergence_rows, _asymmetry_prompt, API, POLICY,
                   tags=("kl", "kl-asymmetry", *nats_tag(inputs)),
                   meta={"distributions": [p, q], "kl_asymmetry": {"p": p, "q": q}})


def sample_kl_asymmetry_upper(draw: Draw, level: int) -> dict:
    def asymmetric_pair(n):
        for _ in range(16):
            p, q = dyadic_distribution(draw, n), dyadic_distribution(draw, n)
            if _asymmetric(p, q):
                return {"p": p, "q": q}
        raise Reject("drew only symmetric pairs")

    if level in (2, 3):
        return {"question": "asymmetry" if level == 2 else "both_directions",
                "pairs": [asymmetric_pair(draw.integer(4, 8)) for _ in range(2 if level == 2 else 4)]}
    n = draw.integer(4, 5 if level == 5 else 6)
    if level == 4:
        return {"question": "most_asymmetric", "p": dyadic_distribution(draw, n),
                "candidates": [dyadic_distribution(draw, n) for _ in range(draw.integer(4, 6))]}
    return {"question": "arrange_asymmetry", "p": dyadic_distribution(draw, n),
            "q": dyadic_distribution(draw, n)}


def _arrangement_tied(task):
    """Several arrangements of q reach the optimum (the stated tie rule decides the answer)."""
    from itertools import permutations

    from exactgrade.rational import kl_bits

    if task.level != 5 or "q" not in task.inputs:
        return False
    p, q = task.inputs["p"], task.inputs["q"]
    scores = [kl_bits(list(perm), p) - kl_bits(p, list(perm)) for perm in set(permutations(q))]
    return scores.count(max(scores)) > 1


KL_ASYMMETRY = info_family(
    "kl_asymmetry", build_kl_asymmetry, sample_kl_asymmetry,
    "L1: an asymmetric pair and its reverse, H, cross-entropy and KL of each. L2: D(p || q) - D(q || p) and "
    "the larger direction of two pairs. L3 (compose): the symmetrised sum, the entropy gap and the larger "
    "direction of four pairs (the direction varies). L4 (search): the candidate q furthest from symmetric, "
    "ties to the earliest. L5 (design): the arrangement of q "
    "that maximises D(q || p) - D(p || q), ties to the lexicographically largest.",
    sample_kl_asymmetry_upper, varying_at={3: ("rows[].larger",)},
    branches=(Branch("a tie between arrangements", _arrangement_tied, F(1, 5), (5,)),))
