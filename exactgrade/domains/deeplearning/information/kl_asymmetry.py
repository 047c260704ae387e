"""The kl_asymmetry family of information: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade.domains.deeplearning._family import deeplearning_family, key_agrees, varying_fields
from exactgrade.domains.deeplearning.common import POLICY, prompt
from exactgrade.domains.deeplearning.information.shared import (
    API,
    MAX_OUTCOMES,
    _unit,
    divergence_rows,
    dyadic_distribution,
    entropy,
    kl,
    nats_tag,
    question_level,
)
from exactgrade.family import Branch, Draw, Level, Reject
from exactgrade.rational import information, kl_bits
from exactgrade.task import TaskDef, uses


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


LEVEL_1 = Level(build_kl_asymmetry, sample_kl_asymmetry)


def _asymmetric_pair(draw: Draw, n: int) -> dict:
    for _ in range(16):
        p, q = dyadic_distribution(draw, n), dyadic_distribution(draw, n)
        if _asymmetric(p, q):
            return {"p": p, "q": q}
    raise Reject("drew only symmetric pairs")


def _larger(forward, backward) -> str:
    return "p||q" if forward > backward else "q||p"


# L2: the difference of the two directions and the larger one
@uses(kl)
def kl_difference(pairs, question=None):
    rows = []
    for pair in pairs:
        forward, backward = kl(pair["p"], pair["q"]), kl(pair["q"], pair["p"])
        rows.append({"difference_bits": forward - backward,
                     "larger": "p||q" if forward > backward else "q||p"})
    return {"rows": rows}


def _check_kl_difference(task):
    both = [(kl_bits(pq["p"], pq["q"]), kl_bits(pq["q"], pq["p"])) for pq in task.inputs["pairs"]]
    return key_agrees(task, {"rows": [{"difference_bits": forward - backward,
                                       "larger": _larger(forward, backward)} for forward, backward in both]})


def sample_kl_difference(draw: Draw, level: int) -> dict:
    return {"question": "asymmetry", "pairs": [_asymmetric_pair(draw, draw.integer(4, 8)) for _ in range(2)]}


LEVEL_2 = Level(question_level(
    "asymmetry", kl_difference, _check_kl_difference,
    "For each pair (p, q) in `pairs`, compare the KL divergence D(p || q) (weighted by p) with the KL "
    "divergence D(q || p) (weighted by q). Give D(p || q) - D(q || p) in bits, and which is larger: "
    "'p||q' if D(p || q) > D(q || p), else 'q||p'.",
    '{"rows": [{"difference_bits": Fraction, "larger": "p||q" or "q||p"}, ...]}  (one row per pair)',
    "bits"), sample_kl_difference)


# L3 (compose): the symmetrised sum, the entropy gap and the larger direction
@uses(entropy, kl)
def kl_both_directions(pairs, question=None):
    rows = []
    for pair in pairs:
        forward, backward = kl(pair["p"], pair["q"]), kl(pair["q"], pair["p"])
        rows.append({"symmetric_bits": forward + backward, "entropy_gap_bits": entropy(pair["p"]) -
                     entropy(pair["q"]), "larger": "p||q" if forward > backward else "q||p"})
    return {"rows": rows}


def _check_kl_both_directions(task):
    bits, pairs = information.entropy_bits, task.inputs["pairs"]
    both = [(kl_bits(pq["p"], pq["q"]), kl_bits(pq["q"], pq["p"])) for pq in pairs]
    return key_agrees(task, {"rows": [{"symmetric_bits": forward + backward,
                                       "entropy_gap_bits": bits(pq["p"]) - bits(pq["q"]),
                                       "larger": _larger(forward, backward)}
                                      for pq, (forward, backward) in zip(pairs, both, strict=True)]})


def sample_kl_both_directions(draw: Draw, level: int) -> dict:
    return {"question": "both_directions",
            "pairs": [_asymmetric_pair(draw, draw.integer(4, 8)) for _ in range(4)]}


LEVEL_3 = Level(question_level(
    "both_directions", kl_both_directions, _check_kl_both_directions,
    "For each pair (p, q) in `pairs`, give the sum of the two KL divergences D(p || q) + D(q || p), the "
    "difference of the entropies H(p) - H(q), and which KL divergence is larger: 'p||q' if "
    "D(p || q) > D(q || p), else 'q||p'. All in bits.",
    '{"rows": [{"symmetric_bits": Fraction, "entropy_gap_bits": Fraction, "larger": "p||q" or "q||p"}, '
    "...]}  (one row per pair)", "bits"), sample_kl_both_directions, varying_fields("rows[].larger"))


# L4 (search): the candidate furthest from symmetric
@uses(kl)
def most_asymmetric(p, candidates, question=None):
    gaps = [(abs(kl(p, q) - kl(q, p)), -i) for i, q in enumerate(candidates)]
    gap, i = max(gaps)
    return {"rows": [{"best": 1 - i, "gap_bits": gap}]}


def _check_most_asymmetric(task):
    p = task.inputs["p"]
    gaps = [abs(kl_bits(p, q) - kl_bits(q, p)) for q in task.inputs["candidates"]]
    return key_agrees(task, {"best": gaps.index(max(gaps)) + 1, "gap_bits": max(gaps)})


def sample_most_asymmetric(draw: Draw, level: int) -> dict:
    n = draw.integer(4, 6)
    return {"question": "most_asymmetric", "p": dyadic_distribution(draw, n),
            "candidates": [dyadic_distribution(draw, n) for _ in range(draw.integer(4, 6))]}


LEVEL_4 = Level(question_level(
    "most_asymmetric", most_asymmetric, _check_most_asymmetric,
    "For which distribution q in `candidates` is the KL divergence furthest from symmetric, that is "
    "|D(p || q) - D(q || p)| largest, with `p` the given distribution? On a tie, the earliest in the "
    "list. Give its position in the list, counted from 1, and that absolute difference in bits.",
    '{"best": int, "gap_bits": Fraction}', "bits; best is a position counted from 1"), sample_most_asymmetric)


# L5 (design): the arrangement of q that maximises D(q' || p) - D(p || q')
@uses(kl)
def most_asymmetric_arrangement(p, q, question=None):
    from fractions import Fraction
    from itertools import permutations

    best = max((kl(list(perm), p) - kl(p, list(perm)), [Fraction(x) for x in perm])
               for perm in set(permutations(q)))  # on a tie, the lexicographically largest
    return {"rows": [{"q": best[1], "gap_bits": best[0]}]}


def _check_most_asymmetric_arrangement(task):
    from itertools import permutations

    p, q = [F(x) for x in task.inputs["p"]], [F(x) for x in task.inputs["q"]]
    scored = {perm: kl_bits(list(perm), p) - kl_bits(p, list(perm)) for perm in set(permutations(q))}
    top = max(scored.values())
    return key_agrees(task, {"q": list(max(perm for perm, v in scored.items() if v == top)), "gap_bits": top})


def sample_arrangement(draw: Draw, level: int) -> dict:
    n = draw.integer(4, 5)
    return {"question": "arrange_asymmetry", "p": dyadic_distribution(draw, n),
            "q": dyadic_distribution(draw, n)}


LEVEL_5 = Level(question_level(
    "arrange_asymmetry", most_asymmetric_arrangement, _check_most_asymmetric_arrangement,
    "The probabilities in `q` may be assigned to the outcomes in any order (any permutation of the list "
    "q). Which arrangement q' makes D(q' || p) - D(p || q') largest, with `p` the given distribution? If "
    "several give the maximum, the largest of them comparing position 0 first, then position 1, and so "
    "on. Give it and the maximum in bits.",
    '{"q": [Fraction, ...], "gap_bits": Fraction}', "bits"), sample_arrangement)


def _arrangement_tied(task):
    """Several arrangements of q reach the optimum (the stated tie rule decides the answer)."""
    from itertools import permutations

    from exactgrade.rational import kl_bits

    if task.level != 5 or "q" not in task.inputs:
        return False
    p, q = task.inputs["p"], task.inputs["q"]
    scores = [kl_bits(list(perm), p) - kl_bits(p, list(perm)) for perm in set(permutations(q))]
    return scores.count(max(scores)) > 1


KL_ASYMMETRY = deeplearning_family(
    "kl_asymmetry", (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about=(
        "L1: an asymmetric pair and its reverse, H, cross-entropy and KL of each. L2: D(p || q) - D(q || "
        "p) and the larger direction of two pairs. L3 (compose): the symmetrised sum, the entropy gap and"
        " the larger direction of four pairs (the direction varies). L4 (search): the candidate q "
        "furthest from symmetric, ties to the earliest. L5 (design): the arrangement of q that maximises "
        "D(q || p) - D(p || q), ties to the lexicographically largest."),
    branches=(Branch("a tie between arrangements", _arrangement_tied, F(1, 5), (5,)),))
