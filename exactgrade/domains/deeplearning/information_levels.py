"""Levels 2-5 of the information families: questions that make the model derive, compose, search
and design instead of transcribing a stated formula.

Each level's reference is a self-contained program (it runs in the sandbox); each is checked in
checks.py by a second computation with exactgrade.rational (``meta["info_question"]``), done
another way (an entropy formula against a Huffman construction, a brute force over arrangements
against a sort, a flattened product against the chain rule). Prompts at these levels state the
conventions (units, logs, tie rules) but not the formula of the asked quantity.
"""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade.domains.deeplearning import information as _base
from exactgrade.domains.deeplearning._family import answer_field, dl_family, single_row
from exactgrade.domains.deeplearning.common import POLICY, api, prompt
from exactgrade.domains.deeplearning.information import (
    HALF_QUARTER_EIGHTHS,
    UNIFORM4,
    build_classification,
    build_divergence,
    build_entropy,
    build_joint,
    build_kl_asymmetry,
    classification_loss_rows,
    sample_joint,
)
from exactgrade.family import Branch, Draw, Reject
from exactgrade.task import TaskDef

BASICS = (
    "Information conventions. Bits use log base 2, nats the natural log. Terms with probability 0 contribute "
    "0 (0 * log 0 = 0). A distribution is a list of probabilities (fractions.Fraction) over outcomes "
    "0, 1, 2, ...; every probability that appears inside a log in these tasks is a power of two unless the "
    "question says otherwise. Give values in nats as exact sympy multiples of log(2) (e.g. "
    "7*sympy.log(2)/4), never math.log."
)
"""Level 2+ conventions: the notation, not the formulas of entropy, cross-entropy, KL or I."""

_API = api(BASICS)


def info_question_rows(question, **given):
    def answer(question, **given):
        from fractions import Fraction
        from itertools import permutations

        def log2(p):
            p = Fraction(p)
            n, d = p.numerator, p.denominator
            if n == 1 and d & (d - 1) == 0:
                return -(d.bit_length() - 1)
            if d == 1 and n & (n - 1) == 0:
                return n.bit_length() - 1
            raise ValueError(f"{p} is not a power of two")

        def entropy(p):
            return sum((-Fraction(x) * log2(x) for x in p if x != 0), Fraction(0))

        def cross(p, q):
            return sum((-Fraction(x) * log2(y) for x, y in zip(p, q, strict=True) if x != 0), Fraction(0))

        def kl(p, q):
            return cross(p, q) - entropy(p)

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

        def mutual(joint):
            table = [[Fraction(x) for x in row] for row in joint]
            pa = [sum(row) for row in table]
            pb = [sum(col) for col in zip(*table, strict=True)]
            return entropy(pa) + entropy(pb) - entropy([x for row in table for x in row])

        def merged(joint, groups):
            return [[sum((Fraction(row[b]) for b in group), Fraction(0)) for group in groups]
                    for row in joint]

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

        if question == "kinks":
            p0, p1 = [Fraction(x) for x in given["p0"]], [Fraction(x) for x in given["p1"]]

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
            return {"kinks": [[t, v] for t, v in points[1:-1]],
                    "max_t": min(t for t, v in points if v == top), "max_bits": top}
        if question == "monotone":
            import sympy

            data = [Fraction(x) for x in given["data"]]

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
            return {"q_forward": q_forward, "q_reverse": q_reverse, "forward_bits": bits / sympy.log(2),
                    "reverse_bits": sympy.log(exact(1 / z)) / sympy.log(2)}
        if question == "code_length":
            return {"rows": [{"bits": huffman(p)} for p in given["distributions"]]}
        if question == "two_stage":
            rows = []
            for source in given["sources"]:
                stages = zip(source["groups"], source["within"], strict=True)
                flat = [Fraction(g) * Fraction(x) for g, within in stages
                        for x in within]
                rows.append({"bits": entropy(flat)})
            return {"rows": rows}
        if question == "best_capped":
            cap = Fraction(given["cap"])
            fits = [(entropy(p), -i) for i, p in enumerate(given["candidates"]) if max(p) <= cap]
            if not fits:
                return {"best": None, "bits": None}
            h, i = max(fits)
            return {"best": 1 - i, "bits": h}
        if question == "coding_cost":
            return {"rows": [{"expected_length": cross(pair["p"], pair["q"]),
                              "extra_bits": kl(pair["p"], pair["q"])}
                             for pair in given["pairs"]]}
        if question == "product_kl":
            rows = []
            for pairs in given["products"]:
                rows.append({"bits": sum((kl(pair["p"], pair["q"]) for pair in pairs), Fraction(0))})
            return {"rows": rows}
        if question == "closest":
            p = given["p"]
            budget = Fraction(given["budget"])
            fits = [(kl(p, q), i) for i, q in enumerate(given["candidates"]) if kl(p, q) <= budget]
            if not fits:
                return {"best": None, "bits": None}
            d, i = min(fits)
            return {"best": i + 1, "bits": d}
        if question == "asymmetry":
            rows = []
            for pair in given["pairs"]:
                forward, backward = kl(pair["p"], pair["q"]), kl(pair["q"], pair["p"])
                rows.append({"difference_bits": forward - backward,
                             "larger": "p||q" if forward > backward else "q||p"})
            return {"rows": rows}
        if question == "both_directions":
            rows = []
            for pair in given["pairs"]:
                forward, backward = kl(pair["p"], pair["q"]), kl(pair["q"], pair["p"])
                rows.append({"symmetric_bits": forward + backward, "entropy_gap_bits": entropy(pair["p"]) -
                             entropy(pair["q"]), "larger": "p||q" if forward > backward else "q||p"})
            return {"rows": rows}
        if question == "most_asymmetric":
            p = given["p"]
            gaps = [(abs(kl(p, q) - kl(q, p)), -i) for i, q in enumerate(given["candidates"])]
            gap, i = max(gaps)
            return {"best": 1 - i, "gap_bits": gap}
        if question == "arrange_asymmetry":
            p, q = given["p"], given["q"]
            best = max((kl(list(perm), p) - kl(p, list(perm)), [Fraction(x) for x in perm])
                       for perm in set(permutations(q)))  # on a tie, the lexicographically largest
            return {"q": best[1], "gap_bits": best[0]}
        if question == "information_words":
            joint = given["joint"]
            table = [[Fraction(x) for x in row] for row in joint]
            h_ab = entropy([x for row in table for x in row])
            h_b = entropy([sum(col) for col in zip(*table, strict=True)])
            return {"saved_bits": mutual(joint), "remaining_bits": h_ab - h_b}
        if question == "merge_columns":
            return {"bits": mutual(merged(given["joint"], given["groups"]))}
        if question == "best_merge":
            joint = given["joint"]
            n = len(joint[0])
            scored = []
            for a in range(n):
                for b in range(a + 1, n):
                    mass_a = sum((Fraction(row[a]) for row in joint), Fraction(0))
                    mass_b = sum((Fraction(row[b]) for row in joint), Fraction(0))
                    if mass_a != mass_b:
                        continue
                    groups = [[a, b]] + [[c] for c in range(n) if c not in (a, b)]
                    scored.append((-mutual(merged(joint, groups)), a, b))
            value, a, b = min(scored)
            return {"merge": [a + 1, b + 1], "bits": -value}
        if question == "two_merges":
            joint = given["joint"]
            n = len(joint[0])
            masses = [sum((Fraction(row[b]) for row in joint), Fraction(0)) for b in range(n)]
            pairs = [(a, b) for a in range(n) for b in range(a + 1, n) if masses[a] == masses[b]]
            best, count = None, 0
            for x in range(len(pairs)):
                for y in range(x + 1, len(pairs)):
                    (a, b), (c, d) = pairs[x], pairs[y]
                    if len({a, b, c, d}) < 4:
                        continue
                    groups = [[a, b], [c, d]] + [[e] for e in range(n) if e not in (a, b, c, d)]
                    value = mutual(merged(joint, groups))
                    if best is None or value > best:
                        best, count = value, 1
                    elif value == best:
                        count += 1
            return {"bits": best, "choices": count}
        if question in ("accuracy_loss", "drop_hardest", "top_k"):
            predictions, labels = given["predictions"], given["labels"]
            losses = [-log2(q[y]) for q, y in zip(predictions, labels, strict=True)]
            ranks = [1 + sum(1 for x in q if Fraction(x) > Fraction(q[y]))
                     for q, y in zip(predictions, labels,
                                                                                           strict=True)]
            if question == "accuracy_loss":
                top = [max(range(len(q)), key=lambda c: (Fraction(q[c]), -c)) for q in predictions]
                right = [loss for loss, t, y in zip(losses, top, labels, strict=True) if t == y]
                return {"accuracy": Fraction(len(right), len(labels)),
                        "loss_correct_bits": Fraction(sum(right), len(right)) if right else None}
            if question == "drop_hardest":
                ordered = sorted(losses, reverse=True)
                rows = []
                for bound in given["bounds"]:
                    fits = [k for k in range(len(ordered))
                            if Fraction(sum(ordered[k:]), len(ordered) - k) <= Fraction(bound)]
                    rows.append({"k": fits[0] if fits else None})
                return {"rows": rows}
            for k in range(1, max(len(q) for q in predictions) + 1):
                hit = [loss for loss, r in zip(losses, ranks, strict=True) if r <= k]
                if Fraction(len(hit), len(labels)) >= Fraction(given["target"]):
                    return {"k": k, "loss_bits": Fraction(sum(hit), len(hit))}
            return {"k": None, "loss_bits": None}
        raise ValueError(f"unknown question {question!r}")

    out = answer(question, **given)
    return out if list(out) == ["rows"] else {"rows": [out]}


# ---------------------------------------------------------------------------- prompts

_QUESTIONS = {
    "code_length": (
        "A source emits the outcomes of each distribution in `distributions` independently. For each, give "
        "the smallest expected number of bits per outcome that a binary prefix-free code (one codeword per "
        "outcome, no codeword a prefix of another) can achieve.",
        '{"rows": [{"bits": Fraction}, ...]}  (one row per distribution, in order)', "bits per outcome"),
    "kinks": (
        "A source emits one of the outcomes 0, 1, ..., n - 1; for a parameter t with 0 <= t <= 1, outcome i "
        "has probability (1 - t) * p0[i] + t * p1[i]. For each t, let L(t) be the smallest expected codeword "
        "length, in bits per outcome, over all binary prefix-free codes for the source at that t (one "
        "codeword per outcome, no codeword a prefix of another, lengths whole numbers of bits; the code may "
        "be chosen afresh for each t). Give every t with 0 < t < 1 at which the slope of L changes (L is "
        "not differentiable there), in increasing order, each with L(t); and the smallest t in [0, 1] at "
        "which L(t) is largest, with that largest value.",
        '{"kinks": [[t, L(t)], ...], "max_t": Fraction, "max_bits": Fraction}',
        "t is a plain number; L in bits per outcome"),
    "monotone": (
        "A model q of the data distribution `data` (over the outcomes 0, 1, ..., n - 1, in that order) must "
        "be non-increasing: q is any distribution with q_0 >= q_1 >= ... >= q_(n-1) (equal neighbours "
        "allowed). Give the q that minimises the KL divergence D(data || q) (weighted by the data) and the "
        "q that minimises D(q || data) (weighted by the model), both under that constraint, and the two "
        "minima in bits: D(data || q) at the first q and D(q || data) at the second. These probabilities "
        "are not powers of two: give each divergence as an exact sympy expression (built with sympy.log "
        "and sympy.Rational; any exact form of the number passes).",
        '{"q_forward": [Fraction, ...], "q_reverse": [Fraction, ...], "forward_bits": exact sympy value, '
        '"reverse_bits": exact sympy value}',
        "probabilities; the divergences in bits"),
    "two_stage": (
        "Each source in `sources` draws an outcome in two stages: first a group g with probability "
        "groups[g], then a member m of that group with probability within[g][m]. The outcome is the pair "
        "(g, m). For each source give the Shannon entropy of the outcome in bits.",
        '{"rows": [{"bits": Fraction}, ...]}  (one row per source, in order)', "bits"),
    "best_capped": (
        "Of the distributions in `candidates`, consider those whose largest probability is at most `cap`. "
        "Which of them has the largest Shannon entropy? On a tie, the earliest in the list. Give its "
        "position in the list, counted from 1, and its entropy in bits, or None for both if no candidate "
        "qualifies.",
        '{"best": int or None, "bits": Fraction or None}', "bits; best is a position counted from 1"),
    "coding_cost": (
        "For each pair (p, q) in `pairs`, outcomes are drawn from p but encoded with a binary prefix-free "
        "code whose codeword for outcome i is -log2 q_i bits long (the code that is optimal for q). Give the "
        "expected codeword length per outcome, and how many bits per outcome that is, on average, beyond "
        "the best code for p itself.",
        '{"rows": [{"expected_length": Fraction, "extra_bits": Fraction}, ...]}  (one row per pair)',
        "bits per outcome"),
    "product_kl": (
        "Each entry of `products` lists independent coordinates: for coordinate k the true distribution is "
        "entry[k]['p'] and the model's is entry[k]['q'], and both joint distributions are the products of "
        "their coordinates. For each entry give the KL divergence D(p_joint || q_joint) of the joint "
        "distributions in bits.",
        '{"rows": [{"bits": Fraction}, ...]}  (one row per entry of `products`)', "bits"),
    "closest": (
        "Of the model distributions q in `candidates`, which is closest to the true distribution `p` in KL "
        "divergence D(p || q) (the divergence of the true distribution from the model), among those with "
        "D(p || q) <= `budget` bits? On a tie, the earliest in the list. Give its position in the list, "
        "counted from 1, and D(p || q) in bits, or None for both if no candidate qualifies.",
        '{"best": int or None, "bits": Fraction or None}', "bits; best is a position counted from 1"),
    "asymmetry": (
        "For each pair (p, q) in `pairs`, compare the KL divergence D(p || q) (weighted by p) with the KL "
        "divergence D(q || p) (weighted by q). Give D(p || q) - D(q || p) in bits, and which is larger: "
        "'p||q' if D(p || q) > D(q || p), else 'q||p'.",
        '{"rows": [{"difference_bits": Fraction, "larger": "p||q" or "q||p"}, ...]}  (one row per pair)',
        "bits"),
    "both_directions": (
        "For each pair (p, q) in `pairs`, give the sum of the two KL divergences D(p || q) + D(q || p), the "
        "difference of the entropies H(p) - H(q), and which KL divergence is larger: 'p||q' if "
        "D(p || q) > D(q || p), else 'q||p'. All in bits.",
        '{"rows": [{"symmetric_bits": Fraction, "entropy_gap_bits": Fraction, "larger": "p||q" or "q||p"}, '
        "...]}  (one row per pair)", "bits"),
    "most_asymmetric": (
        "For which distribution q in `candidates` is the KL divergence furthest from symmetric, that is "
        "|D(p || q) - D(q || p)| largest, with `p` the given distribution? On a tie, the earliest in the "
        "list. Give its position in the list, counted from 1, and that absolute difference in bits.",
        '{"best": int, "gap_bits": Fraction}', "bits; best is a position counted from 1"),
    "arrange_asymmetry": (
        "The probabilities in `q` may be assigned to the outcomes in any order (any permutation of the list "
        "q). Which arrangement q' makes D(q' || p) - D(p || q') largest, with `p` the given distribution? If "
        "several give the maximum, the largest of them comparing position 0 first, then position 1, and so "
        "on. Give it and the maximum in bits.",
        '{"q": [Fraction, ...], "gap_bits": Fraction}', "bits"),
    "information_words": (
        "Random variables A and B have the joint distribution `joint` (joint[a][b] = P(A = a, B = b)). On "
        "average, how many bits does an observer who already knows B still need to describe A (the entropy "
        "of A that is left once B is known), and how many bits fewer is that than the entropy of A for an "
        "observer who does not know B?",
        '{"remaining_bits": Fraction, "saved_bits": Fraction}', "bits"),
    "merge_columns": (
        "Random variables A and B have the joint distribution `joint` (joint[a][b] = P(A = a, B = b)). An "
        "observer sees only C, the group of B's value in `groups` (C = g when B is one of the values in "
        "groups[g]). Give the mutual information between A and C in bits.",
        '{"bits": Fraction}', "bits"),
    "best_merge": (
        "Random variables A and B have the joint distribution `joint` (joint[a][b] = P(A = a, B = b)). Two "
        "values of B with equal probability are to be reported as one value (every other value of B is "
        "reported as itself). Which two keep the most mutual information between A and the reported value? "
        "Number B's values from 1 (value number k is column joint[.][k - 1]); on a tie, the pair with the "
        "smallest first number, then the smallest second number. Give [first, second] (first < second) and "
        "that mutual information in bits.",
        '{"merge": [int, int], "bits": Fraction}', "bits; merge holds B's values numbered from 1"),
    "two_merges": (
        "Random variables A and B have the joint distribution `joint` (joint[a][b] = P(A = a, B = b)). Two "
        "disjoint pairs of values of B are to be chosen, the two values of each pair having equal "
        "probability; each pair is then reported as one value (so four values of B become two, and every "
        "other value is reported as itself). What is the largest mutual information between A and the "
        "reported value, in bits, and how many choices of the two pairs reach it (the order of the two "
        "pairs does not matter)?",
        '{"bits": Fraction, "choices": int}', "bits; choices is a count"),
    "accuracy_loss": (
        "A classifier outputs the distribution predictions[i] over classes for example i, whose true class "
        "is labels[i]. It predicts the class of highest probability (on a tie, the smallest class index). "
        "Give its accuracy (the fraction of examples predicted right) and the mean log loss in bits (-log2 "
        "of the probability given to the true class) over the correctly predicted examples only (None if "
        "there are none).",
        '{"accuracy": Fraction, "loss_correct_bits": Fraction or None}',
        "accuracy is a fraction of examples; the loss is in bits per example"),
    "drop_hardest": (
        "A classifier outputs the distribution predictions[i] over classes for example i, whose true class "
        "is labels[i]; an example's loss is -log2 of the probability given to its true class. For each "
        "bound in `bounds`, what is the smallest number k (0 <= k <= N - 1, for N examples) of examples to "
        "remove, always removing the k of largest loss, so that the mean loss of the remaining examples is "
        "at most that bound, in bits? None for a bound that no such k reaches.",
        '{"rows": [{"k": int or None}, ...]}  (one row per bound, in the order of `bounds`)',
        "k counts examples"),
    "top_k": (
        "A classifier outputs the distribution predictions[i] over classes for example i, whose true class "
        "is labels[i]. Example i is top-k correct when fewer than k classes have a probability strictly "
        "greater than that of its true class; its loss is -log2 of the probability of its true class. Give "
        "the smallest k for which at least the fraction `target` of the examples are top-k correct, and the "
        "mean loss in bits over the examples that are top-k correct at that k.",
        '{"k": int, "loss_bits": Fraction}', "k counts classes; the loss is in bits per example"),
}
_GIVEN = {"distributions": "list of distributions (lists of Fraction)",
          "sources": "list of dicts "
          "{'groups': distribution over groups, 'within': one distribution per group}",
          "candidates": "list of distributions", "cap": "the largest probability allowed",
          "pairs": "list of dicts {'p': distribution, 'q': distribution}", "products": "list of lists of "
          "{'p', 'q'} pairs, one per coordinate", "p": "the true distribution", "q": "the model's "
                                                                                     "probabilities",
          "budget": "the largest divergence allowed, in bits", "joint": "rows indexed by a, columns by b",
          "groups": "list of lists of B's values (a partition of 0..len(joint[0]) - 1)",
          "data": "the data distribution (list of Fraction, not powers of two)",
          "p0": "the distribution at t = 0 (list of Fraction)",
          "p1": "the distribution at t = 1 (list of Fraction)",
          "predictions": "list of distributions over classes", "labels": "list of int class indices",
          "bounds": "list of the largest mean losses allowed, in bits, each asked on its own",
          "target": "the fraction of examples to reach"}


def _prompt(inputs):
    question, shape, units = _QUESTIONS[inputs["question"]]
    variables = {k: (d, inputs[k]) for k, d in _GIVEN.items() if k in inputs}
    return prompt(question, {**variables, "question": ("the question asked, as a word", inputs["question"])},
                  single_row(shape), units)


def build(task_id, inputs):
    meta: dict = {"info_question": inputs["question"]}
    listed = [*inputs.get("distributions", []), *inputs.get("candidates", []),
              *(d for pair in inputs.get("pairs", []) for d in (pair["p"], pair["q"])),
              *(d for pairs in inputs.get("products", []) for pair in pairs for d in (pair["p"], pair["q"])),
              *(d for source in inputs.get("sources", []) for d in (source["groups"], *source["within"])),
              *([inputs["p"]] if "p" in inputs else []), *([inputs["q"]] if "q" in inputs else [])]
    if listed:
        meta["distributions"] = listed
    if "joint" in inputs:
        meta["joint"] = inputs["joint"]
    if "labels" in inputs:
        meta.update(predictions=inputs["predictions"], labels=inputs["labels"])
    return TaskDef(task_id, "information", inputs, info_question_rows, _prompt, _API, POLICY,
                   tags=("information", inputs["question"]), meta=meta)


# ---------------------------------------------------------------------------- samplers


def _dyadic(draw: Draw, low: int, high: int) -> list[F]:
    from exactgrade.domains.deeplearning.information import dyadic_distribution

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


def sample_entropy(draw: Draw, level: int) -> dict:
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


def _pair(draw: Draw, low: int, high: int) -> dict:
    from exactgrade.domains.deeplearning.information import dyadic_distribution

    n = draw.integer(low, high)
    p = dyadic_distribution(draw, n)
    for _ in range(16):
        q = dyadic_distribution(draw, n)
        if q != p:
            return {"p": p, "q": q}
    raise Reject("drew only q = p")


def sample_divergence(draw: Draw, level: int) -> dict:
    from exactgrade.domains.deeplearning.information import dyadic_distribution

    if level == 2:
        return {"question": "coding_cost", "pairs": [_pair(draw, 3, 8) for _ in range(3)]}
    if level == 3:
        return {"question": "product_kl", "products": [[_pair(draw, 3, 5) for _ in range(draw.integer(2, 3))]
                                                       for _ in range(2)]}
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


def sample_kl_asymmetry(draw: Draw, level: int) -> dict:
    from exactgrade.domains.deeplearning.information import _asymmetric, dyadic_distribution

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


def sample_mutual_information(draw: Draw, level: int) -> dict:
    from exactgrade.domains.deeplearning.information import sample_joint

    joint = sample_joint(draw, 2)["joint"]
    n = len(joint[0])
    if level == 2:
        return {"question": "information_words", "joint": joint}
    masses = [sum((F(row[b]) for row in joint), F(0)) for b in range(n)]
    pairs = [(a, b) for a in range(n) for b in range(a + 1, n) if masses[a] == masses[b]]
    if level == 3:
        if not pairs:
            raise Reject("no two values of B with equal probability")
        a, b = draw.choice(pairs)
        groups = [[a, b]] + [[c] for c in range(n) if c not in (a, b)]
        if not _powers_of_two(merged_table(joint, groups)):
            raise Reject("a merged cell is not a power of two")
        return {"question": "merge_columns", "joint": joint, "groups": groups}
    if level == 4:
        if len(pairs) < 2 or not _merges_stay_dyadic(joint, "best_merge"):
            raise Reject("fewer than two mergeable pairs, or a merged cell not a power of two")
        return {"question": "best_merge", "joint": joint}
    disjoint = [(p, q) for i, p in enumerate(pairs) for q in pairs[i + 1:] if len({*p, *q}) == 4]
    if not 2 <= len(disjoint) <= 10:
        raise Reject("fewer than two (or more than ten) choices of two disjoint equal-probability pairs")
    for p, q in disjoint:
        groups = [list(p), list(q)] + [[c] for c in range(n) if c not in (*p, *q)]
        if not _powers_of_two(merged_table(joint, groups)):
            raise Reject("a merged cell is not a power of two")
    return {"question": "two_merges", "joint": joint}


def merged_table(joint, groups) -> list[list[F]]:
    return [[sum((F(row[b]) for b in group), F(0)) for group in groups] for row in joint]


def _powers_of_two(table) -> bool:
    return all(x == 0 or (x.numerator == 1 and x.denominator & (x.denominator - 1) == 0)
               for row in table for x in row)


def _merges_stay_dyadic(joint, question) -> bool:
    """Every merge of two equally likely values of B keeps each merged cell a power of two."""
    n = len(joint[0])
    masses = [sum((F(row[b]) for row in joint), F(0)) for b in range(n)]
    for a in range(n):
        for b in range(a + 1, n):
            groups = [[a, b]] + [[c] for c in range(n) if c not in (a, b)]
            if masses[a] == masses[b] and not _powers_of_two(merged_table(joint, groups)):
                return False
    return True


def sample_classification(draw: Draw, level: int) -> dict:
    from exactgrade.domains.deeplearning.information import sample_classification as level_one

    if level == 5:
        base = sample_ranked(draw)
        return {"question": "top_k", **base, "target": top_k_target(draw, base)}
    if level == 3:
        return {"question": "accuracy_loss", **sample_argmax(draw)}
    base = level_one(draw, 1)
    if level == 2:
        return base
    examples = zip(base["predictions"], base["labels"], strict=True)
    losses = sorted((-_log2(q[y]) for q, y in examples), reverse=True)
    if len(losses) < 5:  # three bounds from four or more drop counts (not every count of the N - 1)
        raise Reject("fewer than five examples")
    return {"question": "drop_hardest", **base, "bounds": drop_bounds(draw, losses)}


def drop_bounds(draw: Draw, losses: list[int]) -> list[F]:
    """Level 4's bounds, one question each (so the key is a tuple of answers, not one of a handful
    of counts): three of them, each the mean loss left after dropping a distinct drawn
    number of the hardest examples (that number, or fewer where losses tie, is the answer), in
    random order; in a sixth of the instances (decided first, never redrawn) one of them is below
    every loss, so that row is None."""
    n = len(losses)  # sorted, largest first
    unreachable = draw.chance(1, 6)
    drops = draw.sample(range(1, n), 3)
    bounds = [F(sum(losses[k:]), n - k) for k in drops]
    if unreachable:
        bounds[draw.below(len(bounds))] = F(min(losses), 2)
    return bounds


def sample_argmax(draw: Draw) -> dict:
    """Level 3: sample_ranked over 4-16 classes with the true class ranked first in about half the
    examples (so a correct example's loss is 1, 2 or 3 bits: more classes allow a less confident
    winner), and in about a third of those another class tied with it at the top: moved from two
    parts a + b (33..63 units) to 32 and a + b - 32, so the sum stays 1 and the stated tie rule
    (the smallest class index) decides whether the example is predicted right."""
    base = sample_ranked(draw, classes_range=(4, 16), first_share=(1, 2))
    predictions = []
    for q, y in zip(base["predictions"], base["labels"], strict=True):
        q = list(q)
        others = [c for c in range(len(q)) if c != y]
        top = F(q[y])
        if all(F(q[c]) < top for c in others) and draw.chance(1, 3):
            unit = top / 32
            pairs = [(a, b) for a in others for b in others if a < b and 33 <= (q[a] + q[b]) / unit <= 63]
            if pairs:
                a, b = draw.choice(pairs)
                tied, rest = (a, b) if draw.chance(1, 2) else (b, a)
                q[rest], q[tied] = q[a] + q[b] - top, top
        predictions.append(q)
    return {"predictions": predictions, "labels": base["labels"]}


def sample_ranked(draw: Draw, classes_range: tuple[int, int] = (4, 8),
                  first_share: tuple[int, int] | None = None) -> dict:
    """6-12 examples over 4-8 classes (``classes_range``), each true class at a drawn rank r (1 +
    the classes more probable than it; uniform, or 1 with the chance ``first_share`` and else
    uniform over the others): its probability p = 2**-e (e from 1..10, as far as the rank allows)
    with r - 1 classes above p and the rest below, in units of 2**-(e + 5) (p is 32 units, the
    others at most 31 or at least 33: no ties). Level 1's sampler puts nearly every true class
    last, so only confident examples (loss 1 or 2 bits) rank higher and a top-k answer comes free."""
    classes = draw.integer(*classes_range)
    predictions, labels = [], []
    for _ in range(draw.integer(6, 12)):
        if first_share is None:
            rank = draw.integer(1, classes)
        else:
            rank = 1 if draw.chance(*first_share) else draw.integer(2, classes)
        below = classes - rank
        e = draw.choice([e for e in range(1, 11) if _rank_fits(e, rank, classes)])
        rest = 2 ** (e + 5) - 32  # 1 - p in units
        if rank == 1:  # every other class below p, filling the rest exactly
            parts, excess = [31] * (classes - 1), 31 * (classes - 1) - rest
            while excess:
                i = draw.choice([i for i, x in enumerate(parts) if x > 1])
                cut = draw.integer(1, min(excess, parts[i] - 1))
                parts[i], excess = parts[i] - cut, excess - cut
        else:
            parts = [draw.integer(1, 31) for _ in range(below)]
            spare = rest - sum(parts) - 33 * (rank - 1)
            cuts = sorted(draw.integer(0, spare) for _ in range(rank - 2))
            parts += [33 + b - a for a, b in zip([0, *cuts], [*cuts, spare], strict=True)]
        parts = [F(x, 2 ** (e + 5)) for x in draw.shuffled(parts)]
        label = draw.below(classes)
        predictions.append([*parts[:label], F(1, 2**e), *parts[label:]])
        labels.append(label)
    return {"predictions": predictions, "labels": labels}


def _rank_fits(e: int, rank: int, classes: int) -> bool:
    """Whether a true class of probability 2**-e can have this rank with no ties: the other classes
    (1 - p in units of 2**-(e + 5)) all below p at rank 1, else rank - 1 above and the rest below."""
    rest = 2 ** (e + 5) - 32
    return rest <= 31 * (classes - 1) if rank == 1 else rest >= 31 * (classes - rank) + 33 * (rank - 1)


def top_k_target(draw: Draw, base) -> F:
    """A target met below the largest rank of a true class (so the smallest k is not the number
    of classes and the loss is not over every example), except in one instance in twenty, where it
    is only met there; the rank of example i is 1 + the number of classes more probable than its
    true class."""
    ranks = [1 + sum(1 for x in q if F(x) > F(q[y])) for q, y in zip(base["predictions"], base["labels"],
                                                                      strict=True)]
    n, below = len(ranks), sum(1 for r in ranks if r < max(ranks))
    if below == 0:
        raise Reject("every true class has the same rank")
    if draw.chance(1, 20):
        return F(draw.integer(below + 1, n), n)
    return F(draw.integer(1, below), n)


def _log2(p) -> int:
    p = F(p)
    return p.numerator.bit_length() - p.denominator.bit_length()


# ---------------------------------------------------------------------------- families
# (here, not in information.py: this module sits above the level-1 module, never the other way round)


def _geometric_prompt(inputs):
    return prompt(
        "A classifier outputs the predicted distribution predictions[i] over classes for example i, whose "
        "true "
        "class is labels[i]. Let g be the geometric mean, over the examples, of the probability the "
        "classifier "
        "gives the true class. Give log2(1/g) (bits per example) and 1/g (the classifier is as uncertain as "
        "a "
        "uniform choice among 1/g classes), both exact.",
        {"predictions": ("list of distributions, each a list of fractions.Fraction", inputs["predictions"]),
         "labels": ("list of int class indices", inputs["labels"])},
        '{"rows": [{"loss_bits": Fraction, "perplexity": exact sympy value}]}  (a single row; loss_bits is '
        "log2(1/g), perplexity is 1/g)",
        "loss in bits per example; perplexity is dimensionless",
    )


def build_geometric(task_id, inputs):
    basics = _API

    return TaskDef(task_id, "information", inputs, classification_loss_rows, _geometric_prompt, basics,
                   POLICY, tags=("cross-entropy", "perplexity"),
                   meta={"predictions": inputs["predictions"], "labels": inputs["labels"]})


def _info_family(name, build_first, first, levels, upper_sample, level_two=None, **rules):
    def sample(draw: Draw, level: int) -> dict:
        return first(draw, level) if level == 1 else upper_sample(draw, level)

    upper = {level: build for level in (2, 3, 4, 5)}  # this module's builder of levels 2-5
    if level_two is not None:
        upper[2] = level_two
    return dl_family(name, build_first, sample, levels, upper=upper, **rules)


def _arrangement_tied(task):
    """Several arrangements of q reach the optimum (the stated tie rule decides the answer)."""
    from itertools import permutations

    from exactgrade.rational import kl_bits

    if task.level != 5 or "q" not in task.inputs:
        return False
    p, q = task.inputs["p"], task.inputs["q"]
    scores = [kl_bits(list(perm), p) - kl_bits(p, list(perm)) for perm in set(permutations(q))]
    return scores.count(max(scores)) > 1


def _pooled_apart(task):
    """divergence L5: the two directions' optimal models pool different outcomes."""
    if task.level != 5:
        return False
    forward, reverse = monotone_blocks(task.inputs["data"])
    return forward != reverse


def _none_best(task):
    return task.level == 4 and answer_field(task, "best") is None


def _none_k(task):
    """A row of the key whose k is None (drop_hardest: a bound no number of drops reaches)."""
    return any(row.get("k", 0) is None for row in task.expected["rows"])


def _top_tie(task):
    """accuracy_loss: an example whose true class ties another for the largest probability (the
    stated tie rule, not the probabilities, decides whether it is predicted right)."""
    if task.inputs.get("question") != "accuracy_loss":
        return False
    return any(sum(1 for x in q if F(x) == max(map(F, q))) > 1 and F(q[y]) == max(map(F, q))
               for q, y in zip(task.inputs["predictions"], task.inputs["labels"], strict=True))


def _every_example_counts(task):
    """top_k's smallest k is the largest rank of a true class: the loss is over every example."""
    if task.inputs.get("question") != "top_k":
        return False
    predictions, labels = task.inputs["predictions"], task.inputs["labels"]
    return answer_field(task, "k") == max(1 + sum(1 for x in q if F(x) > F(q[y]))
                                          for q, y in zip(predictions, labels, strict=True))


ENTROPY = _info_family(
    "entropy", build_entropy, _base.sample_entropy,
    "L1: Shannon entropy with its formula stated, 2+level distributions. L2 (derive): the least expected "
    "length of a prefix code for dyadic distributions (entropy, not named). L3 (compose): the entropy of a "
    "two-stage source (group, then member). L4 (search): the largest-entropy candidate whose largest "
    "probability is at most a cap, ties to the smallest index, None in about a sixth. L5 (regimes): for "
    "a source mixing two non-dyadic distributions by a parameter t, every t where the slope of the least "
    "expected prefix-code length changes (the minimum over all codes of lines in t, so concave and piecewise "
    "linear: exact rationals at regime boundaries, no grid finds them) and where it peaks; the named "
    "mistake (kinks where the order of the probabilities changes) never gives the key.",
    sample_entropy, branches=(Branch("no candidate under the cap", _none_best, F(1, 20), (4,)),))
DIVERGENCE = _info_family(
    "divergence", build_divergence, _base.sample_divergence,
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
    sample_divergence, branches=(Branch("no candidate within the budget", _none_best, F(1, 20), (4,)),
                                 Branch("the directions pool different outcomes", _pooled_apart, F(1, 2),
                                        (5,)),
                                 Branch("the directions pool the same outcomes",
                                        lambda t: t.level == 5 and not _pooled_apart(t), F(1, 10), (5,))))
KL_ASYMMETRY = _info_family(
    "kl_asymmetry", build_kl_asymmetry, _base.sample_kl_asymmetry,
    "L1: an asymmetric pair and its reverse, H, cross-entropy and KL of each. L2: D(p || q) - D(q || p) and "
    "the larger direction of two pairs. L3 (compose): the symmetrised sum, the entropy gap and the larger "
    "direction of four pairs (the direction varies). L4 (search): the candidate q furthest from symmetric, "
    "ties to the earliest. L5 (design): the arrangement of q "
    "that maximises D(q || p) - D(p || q), ties to the lexicographically largest.",
    sample_kl_asymmetry, varying_at={3: ("rows[].larger",)},
    branches=(Branch("a tie between arrangements", _arrangement_tied, F(1, 5), (5,)),))
MUTUAL_INFORMATION = _info_family(
    "mutual_information", build_joint, sample_joint,
    "L1: H(A), H(B), H(A, B), H(A | B), I(A; B) with formulas stated; B = f(A), some joints through noisy "
    "mixing moves. L2 (derive): the bits still needed for A once B is known, and the bits saved (H(A | B) "
    "and I, not named). L3 (compose): I(A; C) for C a stated merge of two equally likely values of B. L4 "
    "(search): the merge of two equally likely values of B that keeps the most information, ties to the "
    "smallest pair. L5 (design): the best choice of two disjoint equally likely pairs of B's values to "
    "merge, "
    "and how many choices reach it.",
    sample_mutual_information)
CLASSIFICATION_LOSS = _info_family(
    "classification_loss", build_classification, _base.sample_classification,
    "L1: mean log loss and perplexity with formulas stated. L2 (derive): the same two numbers described as "
    "the "
    "geometric mean of the true-class probabilities. L3 (compose): accuracy (argmax, ties to the smallest "
    "class) and the mean loss of the correct examples, over 4-16 classes with the true class on top in "
    "about half the examples (a correct loss of 1-3 bits) and tied there in a third of those. L4 "
    "(inverse): for each of three loss bounds, the fewest hardest examples to drop to reach it, "
    "a None row in about a sixth. L5 (search): the smallest k whose top-k accuracy reaches a "
    "target, and the loss of the top-k correct examples, over 4-8 classes with each true class at a drawn "
    "rank; the target is met below the largest rank of a true class in 19 instances in 20 (k is not the "
    "number of classes, the loss not over every example).",
    sample_classification, level_two=build_geometric,
    branches=(Branch("no number of drops reaches a bound", _none_k, F(1, 20), (4,)),
              Branch("a tie for the top probability", _top_tie, F(1, 2), (3,)),
              Branch("every example is top-k correct", _every_example_counts, F(1, 50), (5,))))

FAMILIES = (ENTROPY, DIVERGENCE, KL_ASYMMETRY, MUTUAL_INFORMATION, CLASSIFICATION_LOSS)

# ---------------------------------------------------------------------------- canonical tasks

_ENTROPY = [HALF_QUARTER_EIGHTHS, [F(1, 2)] + [F(1, 8)] * 4, UNIFORM4,
            [F(1, 2), F(1, 4), F(1, 8), F(1, 16), F(1, 32), F(1, 32)]]
_PAIRS = [{"p": HALF_QUARTER_EIGHTHS, "q": UNIFORM4},
          {"p": UNIFORM4, "q": HALF_QUARTER_EIGHTHS},
          {"p": [F(1, 2), F(1, 4), F(1, 4)], "q": [F(1, 4), F(1, 4), F(1, 2)]}]
# q is p rotated by one place (not reversed): D(p || q) = 1/2 bit but D(q || p) = 5/8 bit.
_ASYMMETRIC_P = HALF_QUARTER_EIGHTHS
_ASYMMETRIC_Q = [F(1, 4), F(1, 8), F(1, 8), F(1, 2)]
_NATS_PAIRS = [{"p": [F(1, 2), F(1, 8), F(1, 8), F(1, 8), F(1, 8)],
                "q": [F(1, 16), F(1, 2), F(1, 16), F(1, 8), F(1, 4)]}]

# B = (A + 1) mod 4: invertible, so I(A; B) = H(A) and H(A | B) = 0.
_JOINT_INVERTIBLE = [[0, F(1, 2), 0, 0], [0, 0, F(1, 4), 0], [0, 0, 0, F(1, 8)], [F(1, 8), 0, 0, 0]]
# B = f(A) with f = (0, 0, 1, 1, 2): not invertible, so I(A; B) = H(B) < H(A).
_JOINT_MERGING = [[F(1, 4), 0, 0], [F(1, 4), 0, 0], [0, F(1, 8), 0], [0, F(1, 8), 0], [0, 0, F(1, 4)]]
# B = f(A) with f = (0, 1, 1, 0, 2, 2) over P(A) = (1/4, 1/8, 1/8, 1/4, 1/8, 1/8).
_JOINT_SIX = [[F(1, 4), 0, 0], [0, F(1, 8), 0], [0, F(1, 8), 0], [F(1, 4), 0, 0], [0, 0, F(1, 8)],
              [0, 0, F(1, 8)]]

TASKS = (
    ENTROPY.task("dl-000", {"distributions": _ENTROPY, "unit": "bits"}),
    ENTROPY.task("dl-001", {"distributions": _ENTROPY[:3], "unit": "nats"}),
    DIVERGENCE.task("dl-002", {"pairs": _PAIRS, "unit": "bits"}),
    KL_ASYMMETRY.task("dl-003", {"pairs": [{"p": _ASYMMETRIC_P, "q": _ASYMMETRIC_Q},
                                           {"p": _ASYMMETRIC_Q, "q": _ASYMMETRIC_P}], "unit": "bits"}),
    DIVERGENCE.task("dl-004", {"pairs": _NATS_PAIRS, "unit": "nats"}),
    MUTUAL_INFORMATION.task("dl-005", {"joint": _JOINT_INVERTIBLE, "unit": "bits"}),
    MUTUAL_INFORMATION.task("dl-006", {"joint": _JOINT_MERGING, "unit": "bits"}),
    CLASSIFICATION_LOSS.task("dl-007", {
        "predictions": [HALF_QUARTER_EIGHTHS, UNIFORM4, [F(1, 8), F(1, 8), F(1, 4), F(1, 2)]],
        "labels": [1, 2, 0]}),
    MUTUAL_INFORMATION.task("dl-008", {"joint": _JOINT_SIX, "unit": "nats"}),
)
