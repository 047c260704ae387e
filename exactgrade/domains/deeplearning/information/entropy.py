"""The entropy family of information: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction as F
from typing import Any

from exactgrade import rational
from exactgrade.domains.deeplearning._family import deeplearning_family, key_agrees
from exactgrade.domains.deeplearning.common import POLICY, prompt
from exactgrade.domains.deeplearning.information.shared import (
    API,
    MAX_OUTCOMES,
    _support,
    _unit,
    dyadic_distribution,
    entropy,
    log2,
    nats_tag,
    none_best,
    question_level,
)
from exactgrade.family import Branch, Degenerate, Draw, Level, Reject
from exactgrade.task import TaskDef, uses


@uses(log2)
def entropy_rows(distributions, unit):
    from fractions import Fraction

    import sympy

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


LEVEL_1 = Level(build_entropy, sample_entropy)


def _dyadic(draw: Draw, low: int, high: int) -> list[F]:
    return dyadic_distribution(draw, draw.integer(low, high))


# L2 (derive): the least expected length of a prefix code, for dyadic distributions its entropy
def least_code_length(distributions, question=None):
    from fractions import Fraction

    def huffman(p):
        """Minimum expected codeword length: merge the two least likely, cost = sum of merged masses."""
        weights = sorted(Fraction(x) for x in p if x != 0)
        cost = Fraction(0)
        while len(weights) > 1:
            a, b = weights.pop(0), weights.pop(0)
            cost += a + b
            weights.append(a + b)
            weights.sort()
        return cost

    return {"rows": [{"bits": huffman(p)} for p in distributions]}


def _check_least_code_length(task):
    return key_agrees(task, {"rows": [{"bits": rational.information.entropy_bits(p)}
                                      for p in task.inputs["distributions"]]})


def sample_code_length(draw: Draw, level: int) -> dict:
    return {"question": "code_length", "distributions": [_dyadic(draw, 3, 10) for _ in range(3)]}


LEVEL_2 = Level(question_level(
    "code_length", least_code_length, _check_least_code_length,
    "A source emits the outcomes of each distribution in `distributions` independently. For each, give "
    "the smallest expected number of bits per outcome that a binary prefix-free code (one codeword per "
    "outcome, no codeword a prefix of another) can achieve.",
    '{"rows": [{"bits": Fraction}, ...]}  (one row per distribution, in order)', "bits per outcome"),
    sample_code_length)


# L3 (compose): the entropy of a two-stage source
@uses(entropy)
def two_stage_entropy(sources, question=None):
    from fractions import Fraction

    rows = []
    for source in sources:
        stages = zip(source["groups"], source["within"], strict=True)
        flat = [Fraction(g) * Fraction(x) for g, within in stages
                for x in within]
        rows.append({"bits": entropy(flat)})
    return {"rows": rows}


def _check_two_stage_entropy(task):
    """The chain rule: H(group) plus the groups' entropies weighted by their probabilities."""
    bits = rational.information.entropy_bits
    return key_agrees(task, {"rows": [{"bits": bits(s["groups"]) + sum(
        (F(g) * bits(w) for g, w in zip(s["groups"], s["within"], strict=True)), F(0))}
        for s in task.inputs["sources"]]})


def sample_two_stage(draw: Draw, level: int) -> dict:
    sources = []
    for _ in range(2):
        groups = _dyadic(draw, 2, 4)
        sources.append({"groups": groups, "within": [_dyadic(draw, 1, 4) for _ in groups]})
    return {"question": "two_stage", "sources": sources}


LEVEL_3 = Level(question_level(
    "two_stage", two_stage_entropy, _check_two_stage_entropy,
    "Each source in `sources` draws an outcome in two stages: first a group g with probability "
    "groups[g], then a member m of that group with probability within[g][m]. The outcome is the pair "
    "(g, m). For each source give the Shannon entropy of the outcome in bits.",
    '{"rows": [{"bits": Fraction}, ...]}  (one row per source, in order)', "bits"), sample_two_stage)


# L4 (search): the largest-entropy candidate under a cap on its largest probability
@uses(entropy)
def best_capped_entropy(candidates, cap, question=None):
    from fractions import Fraction

    cap = Fraction(cap)
    fits = [(entropy(p), -i) for i, p in enumerate(candidates) if max(p) <= cap]
    if not fits:
        return {"rows": [{"best": None, "bits": None}]}
    h, i = max(fits)
    return {"rows": [{"best": 1 - i, "bits": h}]}


def _check_best_capped_entropy(task):
    entropy_bits, inputs = rational.information.entropy_bits, task.inputs
    cap = F(inputs["cap"])
    fits = [i for i, p in enumerate(inputs["candidates"]) if max(map(F, p)) <= cap]
    top = max((entropy_bits(inputs["candidates"][i]) for i in fits), default=None)
    first = next((i for i in fits if entropy_bits(inputs["candidates"][i]) == top), None)
    return key_agrees(task, {"best": None if first is None else first + 1, "bits": top})


def sample_best_capped(draw: Draw, level: int) -> dict:
    candidates = [_dyadic(draw, 3, 8) for _ in range(draw.integer(4, 6))]
    peaks = sorted({max(p) for p in candidates})  # a cap at one candidate's peak: some qualify
    cap = draw.choice(peaks) if draw.chance(5, 6) else peaks[0] / 2
    return {"question": "best_capped", "candidates": candidates, "cap": cap}


LEVEL_4 = Level(question_level(
    "best_capped", best_capped_entropy, _check_best_capped_entropy,
    "Of the distributions in `candidates`, consider those whose largest probability is at most `cap`. "
    "Which of them has the largest Shannon entropy? On a tie, the earliest in the list. Give its "
    "position in the list, counted from 1, and its entropy in bits, or None for both if no candidate "
    "qualifies.",
    '{"best": int or None, "bits": Fraction or None}', "bits; best is a position counted from 1"),
    sample_best_capped)


# L5 (regimes): where the least expected code length of a mixed source changes slope
def code_length_kinks(p0, p1, question=None):
    from fractions import Fraction

    def huffman_lengths(p):
        """Codeword lengths of a Huffman code for p (merging the two least likely, ties by order)."""
        nodes = sorted((Fraction(x), i, (i,)) for i, x in enumerate(p))
        lengths = [0] * len(p)
        count = len(p)
        while len(nodes) > 1:
            (wa, _, a), (wb, _, b) = nodes[0], nodes[1]
            for leaf in a + b:
                lengths[leaf] += 1
            nodes = sorted([*nodes[2:], (wa + wb, count, a + b)])
            count += 1
        return lengths

    p0, p1 = [Fraction(x) for x in p0], [Fraction(x) for x in p1]

    def at(t):
        return [(1 - t) * a + t * b for a, b in zip(p0, p1, strict=True)]

    def line(lengths):  # expected length of a fixed code as (intercept, slope) in t
        return (sum((k * a for k, a in zip(lengths, p0, strict=True)), Fraction(0)),
                sum((k * (b - a) for k, a, b in zip(lengths, p0, p1, strict=True)), Fraction(0)))

    def best(t):
        return sum((k * x for k, x in zip(huffman_lengths(at(t)), at(t), strict=True)), Fraction(0))

    def kinks(a, b, left, right):
        """Kinks of the least expected length strictly between a and b, given optimal codes'
        lines at a and b (the least length is the minimum of the lines of all codes)."""
        if left == right:
            return []
        t = (right[0] - left[0]) / (left[1] - right[1])
        value = best(t)
        if value == left[0] + left[1] * t:
            return [t]
        middle = line(huffman_lengths(at(t)))
        return kinks(a, t, left, middle) + kinks(t, b, middle, right)

    found = kinks(Fraction(0), Fraction(1), line(huffman_lengths(p0)), line(huffman_lengths(p1)))
    found = [t for t in found if 0 < t < 1]  # the codes at 0 and 1 may meet there: no kink inside
    points = [(t, best(t)) for t in [Fraction(0), *found, Fraction(1)]]
    top = max(v for _, v in points)
    return {"rows": [{"kinks": [[t, v] for t, v in points[1:-1]],
                      "max_t": min(t for t, v in points if v == top), "max_bits": top}]}


def _kinks_by_hull(p0: Any, p1: Any) -> dict[str, Any]:
    """The least expected length over t another way: the lower envelope of the lines of every
    length vector that satisfies Kraft's inequality (lengths 1..n-1: an optimal code never needs
    more), built by the convex-hull sweep over slopes, not by Huffman at chosen t."""
    from math import lcm

    p0, p1 = [F(x) for x in p0], [F(x) for x in p1]
    n = len(p0)
    scale = lcm(*(x.denominator for x in (*p0, *p1)))
    a0 = [int(x * scale) for x in p0]
    da = [int((y - x) * scale) for x, y in zip(p0, p1, strict=True)]
    found: dict[int, int] = {}  # slope -> least intercept (both times scale)
    full = 2 ** (n - 1)

    def extend(i: int, kraft: int, c: int, m: int) -> None:
        """Lengths of outcomes i.. with Kraft sum (times 2**(n-1)) reaching exactly 1: only complete
        codes (an incomplete one is beaten everywhere by shortening a codeword)."""
        if i == n:
            if kraft == full and (m not in found or c < found[m]):
                found[m] = c
            return
        for k in range(1, n):
            share = 2 ** (n - 1 - k)
            if kraft + share <= full and kraft + share + (n - 1 - i) * 1 <= full:
                extend(i + 1, kraft + share, c + k * a0[i], m + k * da[i])

    extend(0, 0, 0, 0)
    lines = {F(m, scale): F(c, scale) for m, c in found.items()}
    hull: list[tuple[F, F]] = []  # decreasing slopes: the minimum, left to right
    for m in sorted(lines, reverse=True):
        c = lines[m]
        while len(hull) >= 2:
            (m1, c1), (m2, c2) = hull[-2], hull[-1]
            if (c - c1) * (m1 - m2) <= (c2 - c1) * (m1 - m):  # the middle line is never the minimum
                hull.pop()
            else:
                break
        hull.append((m, c))
    cuts = [(c2 - c1) / (m1 - m2) for (m1, c1), (m2, c2) in zip(hull, hull[1:], strict=False)]

    def least(t: F) -> F:
        return min(c + m * t for m, c in hull)

    inside = [t for t in cuts if 0 < t < 1]
    points = [(t, least(t)) for t in [F(0), *inside, F(1)]]
    top = max(v for _, v in points)
    return {"kinks": [[t, v] for t, v in points[1:-1]], "max_t": min(t for t, v in points if v == top),
            "max_bits": top}


def _check_code_length_kinks(task):
    want = _kinks_by_hull(task.inputs["p0"], task.inputs["p1"])
    if sorted(t for t, _ in want["kinks"]) == order_changes(task.inputs["p0"], task.inputs["p1"]):
        return [Degenerate("the named mistake (kinks where the probabilities change order) gives the key")]
    return key_agrees(task, want)


def _rational(draw: Draw, n: int) -> list[F]:
    """n positive probabilities, multiples of 1/d for a d in 12..40, summing to 1."""
    for _ in range(32):
        d = draw.integer(max(12, 2 * n), 40)
        cuts = sorted(draw.sample(range(1, d), n - 1))
        p = [F(b - a, d) for a, b in zip([0, *cuts], [*cuts, d], strict=True)]
        if not all(x.denominator & (x.denominator - 1) == 0 and x.numerator == 1 for x in p):
            return p
    raise Reject("drew only dyadic distributions")


def sample_kinks(draw: Draw, level: int) -> dict:
    n = draw.integer(4, 6)
    p0, p1 = _rational(draw, n), _rational(draw, n)
    key = code_length_kinks(p0=p0, p1=p1)["rows"][0]
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


LEVEL_5 = Level(question_level(
    "kinks", code_length_kinks, _check_code_length_kinks,
    "A source emits one of the outcomes 0, 1, ..., n - 1; for a parameter t with 0 <= t <= 1, outcome i "
    "has probability (1 - t) * p0[i] + t * p1[i]. For each t, let L(t) be the smallest expected codeword "
    "length, in bits per outcome, over all binary prefix-free codes for the source at that t (one "
    "codeword per outcome, no codeword a prefix of another, lengths whole numbers of bits; the code may "
    "be chosen afresh for each t). Give every t with 0 < t < 1 at which the slope of L changes (L is "
    "not differentiable there), in increasing order, each with L(t); and the smallest t in [0, 1] at "
    "which L(t) is largest, with that largest value.",
    '{"kinks": [[t, L(t)], ...], "max_t": Fraction, "max_bits": Fraction}',
    "t is a plain number; L in bits per outcome"), sample_kinks)


ENTROPY = deeplearning_family(
    "entropy", (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about=(
        "L1: Shannon entropy with its formula stated, 2+level distributions. L2 (derive): the least "
        "expected length of a prefix code for dyadic distributions (entropy, not named). L3 (compose): "
        "the entropy of a two-stage source (group, then member). L4 (search): the largest-entropy "
        "candidate whose largest probability is at most a cap, ties to the smallest index, None in about "
        "a sixth. L5 (regimes): for a source mixing two non-dyadic distributions by a parameter t, every "
        "t where the slope of the least expected prefix-code length changes (the minimum over all codes "
        "of lines in t, so concave and piecewise linear: exact rationals at regime boundaries, no grid "
        "finds them) and where it peaks; the named mistake (kinks where the order of the probabilities "
        "changes) never gives the key."),
    branches=(Branch("no candidate under the cap", none_best, F(1, 20), (4,)),))
