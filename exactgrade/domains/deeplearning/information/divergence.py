"""The divergence family of information: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade.domains.deeplearning.common import POLICY, prompt
from exactgrade.domains.deeplearning.information.shared import (
    API,
    MAX_OUTCOMES,
    _support,
    _unit,
    divergence_rows,
    dyadic_distribution,
    info_family,
    info_question_rows,
    none_best,
)
from exactgrade.family import Branch, Draw, Reject
from exactgrade.task import TaskDef


def _divergence_prompt(inputs):
    unit = inputs["unit"]
    return prompt(
        f"For each pair (p, q) in `pairs`, compute the entropy H(p), the cross-entropy H(p, q) and the "
        f"KL divergence D(p || q), all in {unit}. Note the order: D(p || q) weighs by p.",
        {"pairs": ("list of dicts {'p': distribution, 'q': distribution} over the same outcomes",
                   inputs["pairs"]),
         "unit": ("the unit to answer in", unit)},
        f'{{"rows": [{{"H_p_{unit}": value, "H_pq_{unit}": value, "KL_{unit}": value}}, ...]}}  '
        "(one row per pair, in the given order)",
        unit + (" (exact sympy multiples of log(2))" if unit == "nats" else " (exact Fractions)"),
    )


def _pair(draw: Draw, outcomes: int) -> dict:
    """p and q != p (q = p makes D(p || q) an undeclared zero in the key: q is drawn again)."""
    p = dyadic_distribution(draw, outcomes)
    for _ in range(16):
        q = dyadic_distribution(draw, outcomes)
        if q != p:
            return {"p": p, "q": q}
    raise Reject("drew only q = p")


def sample_divergence(draw: Draw, level: int) -> dict:
    """At least 3 outcomes: over 2 the only dyadic distribution is (1/2, 1/2), so q = p."""
    pairs = [_pair(draw, _support(draw, level, low=3)) for _ in range(1 + level)]
    if level == 5:
        pairs[0] = _pair(draw, MAX_OUTCOMES[5])
    return {"pairs": pairs, "unit": _unit(draw)}


def _pair_distributions(inputs):
    return [d for pair in inputs["pairs"] for d in (pair["p"], pair["q"])]


def build_divergence(task_id, inputs):
    tags = ("kl", "nats") if inputs["unit"] == "nats" else ("cross-entropy", "kl")
    return TaskDef(task_id, "information", inputs, divergence_rows, _divergence_prompt, API, POLICY,
                   tags=tags, meta={"distributions": _pair_distributions(inputs)})


def _pair_upper(draw: Draw, low: int, high: int) -> dict:
    n = draw.integer(low, high)
    p = dyadic_distribution(draw, n)
    for _ in range(16):
        q = dyadic_distribution(draw, n)
        if q != p:
            return {"p": p, "q": q}
    raise Reject("drew only q = p")


def sample_divergence_upper(draw: Draw, level: int) -> dict:
    if level == 2:
        return {"question": "coding_cost", "pairs": [_pair_upper(draw, 3, 8) for _ in range(3)]}
    if level == 3:
        products = [[_pair_upper(draw, 3, 5) for _ in range(draw.integer(2, 3))] for _ in range(2)]
        return {"question": "product_kl", "products": products}
    if level == 4:
        n = draw.integer(4, 7)
        p = dyadic_distribution(draw, n)
        candidates = [dyadic_distribution(draw, n) for _ in range(draw.integer(4, 6))]
        if p in candidates:
            raise Reject("a candidate equals p")
        from exactgrade.rational import kl_bits

        values = sorted(kl_bits(p, q) for q in candidates)
        budget = values[0] / 2 if draw.chance(1, 6) else values[draw.below(len(values))]
        return {"question": "closest", "p": p, "candidates": candidates, "budget": budget}
    return sample_monotone(draw)


MONOTONE_RATIOS = (F(6, 5), F(5, 4), F(4, 3), F(3, 2), F(5, 3), F(2), F(5, 2), F(3))
"""How far apart the values of a pooled block of divergence L5 are drawn (around its geometric mean)."""


def monotone_blocks(data) -> tuple[list[int], list[int]]:
    """The sizes of the pooled blocks of divergence L5's two optimal models (forward, reverse)."""
    row = info_question_rows("monotone", data=data)["rows"][0]

    def sizes(q):
        out = [1]
        for a, b in zip(q, q[1:], strict=False):
            out[-1:] = [out[-1] + 1] if a == b else [out[-1], 1]
        return out

    return sizes(row["q_forward"]), sizes(row["q_reverse"])


def monotone_mistakes(data) -> dict[str, tuple[tuple[str, ...], list]]:
    """divergence L5's named mistakes, each (the fields it would answer, its model, in sympy): means
    in both directions (the forward model as the reverse one); the renormalised geometric means of
    the forward's blocks; the reverse's geometric means not renormalised; the data sorted (where
    the two directions pool the same outcomes, the geometric means of the forward's blocks are the
    reverse model: no mistake there)."""
    import sympy

    row = info_question_rows("monotone", data=data)["rows"][0]
    forward, reverse = monotone_blocks(data)
    data = [sympy.Rational(F(x).numerator, F(x).denominator) for x in data]

    def geometric(sizes):  # each outcome's block geometric mean (irrational where it has no exact root)
        out, start = [], 0
        for m in sizes:
            out += [sympy.prod(data[start:start + m]) ** sympy.Rational(1, m)] * m
            start += m
        return out

    on_forward = geometric(forward)
    found = {"means in both directions": (("q_reverse",), [sympy.Rational(x) for x in row["q_forward"]]),
             "geometric means not renormalised": (("q_reverse",), geometric(reverse)),
             "the data sorted": (("q_forward", "q_reverse"), sorted(data, reverse=True))}
    if forward != reverse:  # else it is the right method, the pooling being the same
        found["geometric means over the forward's blocks"] = (("q_reverse",),
                                                             [g / sum(on_forward) for g in on_forward])
    return found


def sample_monotone(draw: Draw) -> dict:
    """Data built from the reverse model's pooled blocks: a block of m outcomes around a geometric
    mean g (values g / r, g * r or g / r, g / s, g * r * s, whose prefixes lie below g), the g
    strictly decreasing, so the reverse model is rational and pools exactly those blocks; the
    forward model pools by means (at least the geometric ones), in half the instances other
    outcomes than the reverse in about three quarters of the instances (a block's mean rises past its
    left neighbour's, so the forward pools more: about a quarter of the draws, kept nine times as
    often as the others)."""
    n = draw.integer(5, 7)
    sizes: list[int] = []
    while sum(sizes) < n:
        sizes.append(draw.choice((1, 2, 2, 3)))
    if sum(sizes) != n or len(sizes) < 2 or max(sizes) < 2:
        raise Reject("no block structure of the wanted kind")
    values: list[F] = []
    for g, m in zip(sorted(draw.sample(range(6, 61), len(sizes)), reverse=True), sizes, strict=True):
        r = draw.choice(MONOTONE_RATIOS)
        if m == 1:
            values.append(F(g))
        elif m == 2:
            values += [g / r, g * r]
        else:
            s = draw.choice((*MONOTONE_RATIOS, *(1 / x for x in MONOTONE_RATIOS)))
            if r * s <= 1:
                raise Reject("the middle value rises above the block's geometric mean")
            values += [g / r, g / s, g * r * s]
    data = [v / sum(values) for v in values]
    forward, reverse = monotone_blocks(data)
    if reverse != sizes:
        raise ValueError(f"divergence L5 sampler: built blocks {sizes}, the reference pools {reverse}")
    if len(forward) == 1:
        raise Reject("the forward model is uniform")
    if (forward != reverse) is not draw.chance(9, 10):
        raise Reject("the forward model pools the wrong kind of blocks (same or other than the reverse)")
    return {"question": "monotone", "data": data}


def _pooled_apart(task):
    """divergence L5: the two directions' optimal models pool different outcomes."""
    if task.level != 5:
        return False
    forward, reverse = monotone_blocks(task.inputs["data"])
    return forward != reverse


DIVERGENCE = info_family(
    "divergence", build_divergence, sample_divergence,
    "L1: H(p), H(p, q), D(p || q) with formulas stated. L2 (derive): the expected length of q's optimal code "
    "under p and its excess over p's own (cross-entropy and KL, not named). L3 (compose): KL of products of "
    "independent coordinates. L4 (search): the model closest to p under a KL budget, ties to the smallest "
    "index, None in about a sixth. L5 (design under a constraint, each direction its own derivation): the "
    "non-increasing model closest to a non-dyadic data distribution in D(data || q) and in D(q || data), "
    "and both minima as exact log expressions (the conditions of optimality pool adjacent violators, at "
    "their mean forward and at their renormalised geometric mean in reverse, where the minimum is "
    "-log2 of the normaliser; in about three quarters of the instances the two directions pool "
    "different outcomes); means "
    "in both directions, the geometric means of the forward's blocks, unnormalised geometric means and "
    "the sorted data never give the key.",
    sample_divergence_upper, branches=(Branch("no candidate within the budget", none_best, F(1, 20), (4,)),
                                 Branch("the directions pool different outcomes", _pooled_apart, F(1, 2),
                                        (5,)),
                                 Branch("the directions pool the same outcomes",
                                        lambda t: t.level == 5 and not _pooled_apart(t), F(1, 10), (5,))))
