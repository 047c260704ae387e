"""What two or more information families use (written once)."""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade.domains.deeplearning._family import answer_field, dl_family, single_row
from exactgrade.domains.deeplearning.common import POLICY, api, prompt
from exactgrade.family import Draw
from exactgrade.task import TaskDef

CONVENTIONS = (
    "Information theory conventions. Bits use log base 2; nats use the natural log, so a value in nats "
    "is the value in bits times log(2): give nats as exact sympy values (e.g. 7*sympy.log(2)/4), never "
    "math.log. Terms with probability 0 contribute 0 (0 * log 0 = 0). Every probability that appears "
    "inside a log in these tasks is an integer power of two, so values in bits are exact rationals. "
    "Entropy H(p) = -sum_i p_i log p_i; cross-entropy H(p, q) = -sum_i p_i log q_i; "
    "KL divergence D(p || q) = sum_i p_i log(p_i / q_i) = H(p, q) - H(p). A joint table joint[a][b] is "
    "P(A = a, B = b) (rows indexed by a, columns by b); H(A, B) is the entropy of all cells; "
    "H(A | B) = H(A, B) - H(B); I(A; B) = H(A) + H(B) - H(A, B)."
)


def divergence_rows(pairs, unit):
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
    for pair in pairs:
        p = [Fraction(x) for x in pair["p"]]
        q = [Fraction(x) for x in pair["q"]]
        h_p = sum((-pi * log2(pi) for pi in p if pi != 0), Fraction(0))
        h_pq = sum((-pi * log2(qi) for pi, qi in zip(p, q, strict=True) if pi != 0), Fraction(0))
        rows.append({f"H_p_{unit}": in_unit(h_p), f"H_pq_{unit}": in_unit(h_pq),
                     f"KL_{unit}": in_unit(h_pq - h_p)})
    return {"rows": rows}

API = api(CONVENTIONS)


MAX_OUTCOMES = {1: 6, 2: 8, 3: 10, 4: 12, 5: 16}
"""The largest support a level draws (level 5 always includes a 16-outcome distribution)."""


def dyadic_distribution(draw: Draw, outcomes: int, finest: int = 8) -> list[F]:
    """A distribution over ``outcomes`` outcomes whose probabilities are powers of two: start
    from [1] and halve a random outcome (never below 2**-finest) until there are enough."""
    p = [F(1)]
    while len(p) < outcomes:
        i = draw.choice([i for i, x in enumerate(p) if x.denominator < 2**finest])
        p[i:i + 1] = [p[i] / 2, p[i] / 2]
    return draw.shuffled(p)


def _support(draw: Draw, level: int, low: int = 2) -> int:
    return draw.integer(low, MAX_OUTCOMES[level])


def _unit(draw: Draw) -> str:
    return draw.choice(("bits", "nats"))


def nats_tag(inputs):
    return ("nats",) if inputs["unit"] == "nats" else ()

BASICS = (
    "Information conventions. Bits use log base 2, nats the natural log. Terms with probability 0 contribute "
    "0 (0 * log 0 = 0). A distribution is a list of probabilities (fractions.Fraction) over outcomes "
    "0, 1, 2, ...; every probability that appears inside a log in these tasks is a power of two unless the "
    "question says otherwise. Give values in nats as exact sympy multiples of log(2) (e.g. "
    "7*sympy.log(2)/4), never math.log."
)
"""Level 2+ conventions: the notation, not the formulas of entropy, cross-entropy, KL or I."""

UPPER_API = api(BASICS)


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


QUESTIONS = {
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


GIVEN = {"distributions": "list of distributions (lists of Fraction)",
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
    question, shape, units = QUESTIONS[inputs["question"]]
    variables = {k: (d, inputs[k]) for k, d in GIVEN.items() if k in inputs}
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
    return TaskDef(task_id, "information", inputs, info_question_rows, _prompt, UPPER_API, POLICY,
                   tags=("information", inputs["question"]), meta=meta)


def info_family(name, build_first, first, levels, upper_sample, level_two=None, **rules):
    def sample(draw: Draw, level: int) -> dict:
        return first(draw, level) if level == 1 else upper_sample(draw, level)

    upper = {level: build for level in (2, 3, 4, 5)}  # this module's builder of levels 2-5
    if level_two is not None:
        upper[2] = level_two
    return dl_family(name, build_first, sample, levels, upper=upper, **rules)


def none_best(task):
    return task.level == 4 and answer_field(task, "best") is None
