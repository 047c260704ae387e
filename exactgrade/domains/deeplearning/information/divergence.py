"""The divergence family of information: everything it needs, its five levels in level order."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction as F
from typing import Any

import sympy

from exactgrade import rational
from exactgrade.domains.deeplearning._family import deeplearning_family, key_agrees
from exactgrade.domains.deeplearning.checks import as_sympy
from exactgrade.domains.deeplearning.common import POLICY, prompt
from exactgrade.domains.deeplearning.information.shared import (
    API,
    MAX_OUTCOMES,
    _support,
    _unit,
    cross,
    divergence_rows,
    dyadic_distribution,
    kl,
    none_best,
    question_level,
)
from exactgrade.family import Branch, Degenerate, Draw, Level, Reject
from exactgrade.task import TaskDef, uses


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


LEVEL_1 = Level(build_divergence, sample_divergence)


def distinct_dyadic_pair(draw: Draw, low: int, high: int) -> dict:
    """Two different dyadic distributions p and q over one support of low..high outcomes."""
    n = draw.integer(low, high)
    p = dyadic_distribution(draw, n)
    for _ in range(16):
        q = dyadic_distribution(draw, n)
        if q != p:
            return {"p": p, "q": q}
    raise Reject("drew only q = p")


# L2 (derive): the cost of coding p with q's optimal code (cross-entropy and KL, not named)
@uses(cross, kl)
def coding_cost(pairs, question=None):
    return {"rows": [{"expected_length": cross(pair["p"], pair["q"]), "extra_bits": kl(pair["p"], pair["q"])}
                     for pair in pairs]}


def _check_coding_cost(task):
    return key_agrees(task, {"rows": [{"expected_length": rational.cross_entropy_bits(pq["p"], pq["q"]),
                                       "extra_bits": rational.kl_bits(pq["p"], pq["q"])}
                                      for pq in task.inputs["pairs"]]})


def sample_coding_cost(draw: Draw, level: int) -> dict:
    return {"question": "coding_cost", "pairs": [distinct_dyadic_pair(draw, 3, 8) for _ in range(3)]}


LEVEL_2 = Level(question_level(
    "coding_cost", coding_cost, _check_coding_cost,
    "For each pair (p, q) in `pairs`, outcomes are drawn from p but encoded with a binary prefix-free "
    "code whose codeword for outcome i is -log2 q_i bits long (the code that is optimal for q). Give the "
    "expected codeword length per outcome, and how many bits per outcome that is, on average, beyond "
    "the best code for p itself.",
    '{"rows": [{"expected_length": Fraction, "extra_bits": Fraction}, ...]}  (one row per pair)',
    "bits per outcome"), sample_coding_cost)


# L3 (compose): the KL divergence of products of independent coordinates
@uses(kl)
def product_kl(products, question=None):
    from fractions import Fraction

    rows = []
    for pairs in products:
        rows.append({"bits": sum((kl(pair["p"], pair["q"]) for pair in pairs), Fraction(0))})
    return {"rows": rows}


def _check_product_kl(task):
    """The product distributions built outcome by outcome, then one KL divergence."""
    rows = []
    for pairs in task.inputs["products"]:
        joint_p, joint_q = [F(1)], [F(1)]
        for pair in pairs:
            joint_p = [a * F(b) for a in joint_p for b in pair["p"]]
            joint_q = [a * F(b) for a in joint_q for b in pair["q"]]
        rows.append({"bits": rational.kl_bits(joint_p, joint_q)})
    return key_agrees(task, {"rows": rows})


def sample_product_kl(draw: Draw, level: int) -> dict:
    products = [[distinct_dyadic_pair(draw, 3, 5) for _ in range(draw.integer(2, 3))] for _ in range(2)]
    return {"question": "product_kl", "products": products}


LEVEL_3 = Level(question_level(
    "product_kl", product_kl, _check_product_kl,
    "Each entry of `products` lists independent coordinates: for coordinate k the true distribution is "
    "entry[k]['p'] and the model's is entry[k]['q'], and both joint distributions are the products of "
    "their coordinates. For each entry give the KL divergence D(p_joint || q_joint) of the joint "
    "distributions in bits.",
    '{"rows": [{"bits": Fraction}, ...]}  (one row per entry of `products`)', "bits"), sample_product_kl)


# L4 (search): the model closest to p within a KL budget
@uses(kl)
def closest_model(p, candidates, budget, question=None):
    from fractions import Fraction

    budget = Fraction(budget)
    fits = [(kl(p, q), i) for i, q in enumerate(candidates) if kl(p, q) <= budget]
    if not fits:
        return {"rows": [{"best": None, "bits": None}]}
    d, i = min(fits)
    return {"rows": [{"best": i + 1, "bits": d}]}


def _check_closest_model(task):
    inputs, kl_bits = task.inputs, rational.kl_bits
    budget = F(inputs["budget"])
    fits = [i for i, q in enumerate(inputs["candidates"]) if kl_bits(inputs["p"], q) <= budget]
    low = min((kl_bits(inputs["p"], inputs["candidates"][i]) for i in fits), default=None)
    best = next((i for i in fits if kl_bits(inputs["p"], inputs["candidates"][i]) == low), None)
    return key_agrees(task, {"best": None if best is None else best + 1, "bits": low})


def sample_closest(draw: Draw, level: int) -> dict:
    n = draw.integer(4, 7)
    p = dyadic_distribution(draw, n)
    candidates = [dyadic_distribution(draw, n) for _ in range(draw.integer(4, 6))]
    if p in candidates:
        raise Reject("a candidate equals p")
    values = sorted(rational.kl_bits(p, q) for q in candidates)
    budget = values[0] / 2 if draw.chance(1, 6) else values[draw.below(len(values))]
    return {"question": "closest", "p": p, "candidates": candidates, "budget": budget}


LEVEL_4 = Level(question_level(
    "closest", closest_model, _check_closest_model,
    "Of the model distributions q in `candidates`, which is closest to the true distribution `p` in KL "
    "divergence D(p || q) (the divergence of the true distribution from the model), among those with "
    "D(p || q) <= `budget` bits? On a tie, the earliest in the list. Give its position in the list, "
    "counted from 1, and D(p || q) in bits, or None for both if no candidate qualifies.",
    '{"best": int or None, "bits": Fraction or None}', "bits; best is a position counted from 1"),
    sample_closest)


# L5 (design under a constraint): the non-increasing model closest to the data, in each direction
def monotone_models(data, question=None):
    from fractions import Fraction

    import sympy

    data = [Fraction(x) for x in data]

    def pooled(less, merge):
        """Pool adjacent violators: blocks (statistic, count), merged while a block's value is
        below the next one's (the model must not increase)."""
        blocks = []
        for x in data:
            blocks.append((x, 1))
            while len(blocks) > 1 and less(blocks[-2], blocks[-1]):
                (b, k), (a, m) = blocks.pop(), blocks[-1]
                blocks[-1] = (merge(a, b), m + k)
        return blocks

    def root(x, m):
        top, exact_top = sympy.integer_nthroot(x.numerator, m)
        bottom, exact_bottom = sympy.integer_nthroot(x.denominator, m)
        if not (exact_top and exact_bottom):
            raise ValueError(f"{x} has no rational {m}-th root")
        return Fraction(int(top), int(bottom))

    def exact(x):
        return sympy.Rational(x.numerator, x.denominator)

    # D(data || q) = const - sum data_i log q_i: a pooled block's best constant is its mean;
    # D(q || data) = sum q_i log(q_i / data_i): it is proportional to the block's geometric mean
    forward = pooled(lambda x, y: x[0] * y[1] < y[0] * x[1], lambda a, b: a + b)
    reverse = pooled(lambda x, y: x[0] ** y[1] < y[0] ** x[1], lambda a, b: a * b)
    q_forward = [total / m for total, m in forward for _ in range(m)]
    means = [(root(product, m), m) for product, m in reverse]
    z = sum((g * m for g, m in means), Fraction(0))
    q_reverse = [g / z for g, m in means for _ in range(m)]
    terms = zip(data, q_forward, strict=True)
    bits = sympy.Add(*[exact(x) * sympy.log(exact(x / y)) for x, y in terms])
    return {"rows": [{"q_forward": q_forward, "q_reverse": q_reverse, "forward_bits": bits / sympy.log(2),
                      "reverse_bits": sympy.log(exact(1 / z)) / sympy.log(2)}]}


MONOTONE_RATIOS = (F(6, 5), F(5, 4), F(4, 3), F(3, 2), F(5, 3), F(2), F(5, 2), F(3))
"""How far apart the values of a pooled block of divergence L5 are drawn (around its geometric mean)."""


def monotone_blocks(data) -> tuple[list[int], list[int]]:
    """The sizes of the pooled blocks of divergence L5's two optimal models (forward, reverse)."""
    row = monotone_models(data)["rows"][0]

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

    row = monotone_models(data)["rows"][0]
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


def _check_monotone_models(task):
    """Another way: each outcome's value by the min-max formula of isotonic
    regression (q_i = max over t >= i of min over s <= i of the block statistic of s..t), with
    means forward and geometric means in reverse (compared exactly as P1**m2 against P2**m1,
    then rooted and renormalised), instead of pooling violators; the model must be a
    non-increasing distribution, both divergences agree with 50-digit mpmath (the reverse one
    summed term by term, not from the normaliser), and the named mistakes give other models."""
    import math
    from functools import cmp_to_key

    import mpmath

    data = [F(x) for x in task.inputs["data"]]
    n, row = len(data), task.expected["rows"][0]

    Block = tuple[F, int]

    def minmax(statistic: Callable[[list[F]], Block],
               compare: Callable[[Block, Block], int]) -> list[Block]:
        order = cmp_to_key(compare)
        return [max((min((statistic(data[s:t + 1]) for s in range(i + 1)), key=order) for t in range(i, n)),
                    key=order) for i in range(n)]

    def sign(x: F) -> int:
        return (x > 0) - (x < 0)

    means = minmax(lambda xs: (sum(xs, F(0)), len(xs)), lambda a, b: sign(a[0] * b[1] - b[0] * a[1]))
    forward = [total / m for total, m in means]
    products = minmax(lambda xs: (math.prod(xs, start=F(1)), len(xs)),
                      lambda a, b: sign(a[0] ** b[1] - b[0] ** a[1]))
    roots = []
    for product, m in products:
        top, bottom = (sympy.integer_nthroot(x, m) for x in (product.numerator, product.denominator))
        if not (top[1] and bottom[1]):
            return [f"the reverse model's block product {product} has no rational {m}-th root"]
        roots.append(F(int(top[0]), int(bottom[0])))
    reverse = [g / sum(roots, F(0)) for g in roots]
    problems = [f"{name} is {row[name]} but the min-max formula gives {want}"
                for name, want in (("q_forward", forward), ("q_reverse", reverse)) if row[name] != want]
    problems += [f"{name} is not a non-increasing distribution" for name in ("q_forward", "q_reverse")
                 if sum(row[name], F(0)) != 1 or row[name] != sorted(row[name], reverse=True)]
    with mpmath.workdps(50):
        def mp(x: F) -> Any:
            return mpmath.mpf(x.numerator) / x.denominator

        for name, weights, other in (("forward_bits", data, forward), ("reverse_bits", reverse, data)):
            want = sum(mp(x) * mpmath.log(mp(x / y), 2) for x, y in zip(weights, other, strict=True))
            got = mpmath.mpf(sympy.N(as_sympy(row[name]), 50))
            if abs(got - want) > mpmath.mpf(10) ** -40:
                problems.append(f"{name} is {mpmath.nstr(got, 20)} but 50-digit mpmath gives "
                                f"{mpmath.nstr(want, 20)}")
    for name, (fields, wrong) in monotone_mistakes(data).items():
        problems += [Degenerate(f"the named mistake ({name}) gives {field}") for field in fields
                     if [rational.to_sympy(x) for x in row[field]] == wrong]
    return problems


LEVEL_5 = Level(question_level(
    "monotone", monotone_models, _check_monotone_models,
    "A model q of the data distribution `data` (over the outcomes 0, 1, ..., n - 1, in that order) must "
    "be non-increasing: q is any distribution with q_0 >= q_1 >= ... >= q_(n-1) (equal neighbours "
    "allowed). Give the q that minimises the KL divergence D(data || q) (weighted by the data) and the "
    "q that minimises D(q || data) (weighted by the model), both under that constraint, and the two "
    "minima in bits: D(data || q) at the first q and D(q || data) at the second. These probabilities "
    "are not powers of two: give each divergence as an exact sympy expression (built with sympy.log "
    "and sympy.Rational; any exact form of the number passes).",
    '{"q_forward": [Fraction, ...], "q_reverse": [Fraction, ...], "forward_bits": exact sympy value, '
    '"reverse_bits": exact sympy value}',
    "probabilities; the divergences in bits"), lambda draw, level: sample_monotone(draw))


def _pooled_apart(task):
    """divergence L5: the two directions' optimal models pool different outcomes."""
    if task.level != 5:
        return False
    forward, reverse = monotone_blocks(task.inputs["data"])
    return forward != reverse


DIVERGENCE = deeplearning_family(
    "divergence", (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about=(
        "L1: H(p), H(p, q), D(p || q) with formulas stated. L2 (derive): the expected length of q's "
        "optimal code under p and its excess over p's own (cross-entropy and KL, not named). L3 "
        "(compose): KL of products of independent coordinates. L4 (search): the model closest to p under "
        "a KL budget, ties to the smallest index, None in about a sixth. L5 (design under a constraint, "
        "each direction its own derivation): the non-increasing model closest to a non-dyadic data "
        "distribution in D(data || q) and in D(q || data), and both minima as exact log expressions (the "
        "conditions of optimality pool adjacent violators, at their mean forward and at their "
        "renormalised geometric mean in reverse, where the minimum is -log2 of the normaliser; in about "
        "three quarters of the instances the two directions pool different outcomes); means in both "
        "directions, the geometric means of the forward's blocks, unnormalised geometric means and the "
        "sorted data never give the key."),
    branches=(Branch("no candidate within the budget", none_best, F(1, 20), (4,)),
                                 Branch("the directions pool different outcomes", _pooled_apart, F(1, 2),
                                        (5,)),
                                 Branch("the directions pool the same outcomes",
                                        lambda t: t.level == 5 and not _pooled_apart(t), F(1, 10), (5,))))
