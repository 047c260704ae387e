"""The mutual_information family of information: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade import rational
from exactgrade.domains.deeplearning._family import deeplearning_family, key_agrees
from exactgrade.domains.deeplearning.common import POLICY, prompt
from exactgrade.domains.deeplearning.information.shared import (
    API,
    _unit,
    dyadic_distribution,
    entropy,
    log2,
    merged,
    mutual,
    nats_tag,
    question_level,
)
from exactgrade.family import Draw, Level, Reject
from exactgrade.rational.information import joint_table
from exactgrade.task import TaskDef, uses


@uses(log2)
def joint_information_rows(joint, unit):
    from fractions import Fraction

    import sympy

    def entropy(p):
        return sum((-x * log2(x) for x in p if x != 0), Fraction(0))

    def in_unit(bits):
        if unit == "bits":
            return bits
        return sympy.Rational(bits.numerator, bits.denominator) * sympy.log(2)

    table = [[Fraction(x) for x in row] for row in joint]
    h_a = entropy([sum(row) for row in table])
    h_b = entropy([sum(column) for column in zip(*table, strict=True)])
    h_ab = entropy([x for row in table for x in row])
    return {"rows": [{
        f"H_A_{unit}": in_unit(h_a),
        f"H_B_{unit}": in_unit(h_b),
        f"H_AB_{unit}": in_unit(h_ab),
        f"H_A_given_B_{unit}": in_unit(h_ab - h_b),
        f"I_{unit}": in_unit(h_a + h_b - h_ab),
    }]}


def _joint_prompt(inputs):
    unit = inputs["unit"]
    return prompt(
        "Random variables A and B have the joint distribution `joint` (joint[a][b] = P(A = a, B = b)). "
        f"Compute H(A), H(B), H(A, B), H(A | B) and the mutual information I(A; B), all in {unit}.",
        {"joint": ("list of rows of fractions.Fraction, rows indexed by a, columns by b", inputs["joint"]),
         "unit": ("the unit to answer in", unit)},
        f'{{"rows": [{{"H_A_{unit}": value, "H_B_{unit}": value, "H_AB_{unit}": value, '
        f'"H_A_given_B_{unit}": value, "I_{unit}": value}}]}}  (a single row)',
        unit + (" (exact sympy multiples of log(2))" if unit == "nats" else " (exact Fractions)"),
    )


JOINT_OUTCOMES = {1: 6, 2: 14, 3: 16, 4: 18, 5: 20}
"""|A| per level: wider than MAX_OUTCOMES from level 2, since the key (H(A), H(B), H(A, B)) of a
narrow joint takes too few values to vary."""


def sample_joint(draw: Draw, level: int) -> dict:
    """B = f(A): P(B) first, then each P(B = b) split over the a with f(a) = b (one a each when f is
    invertible, an eighth of the joints, all of the widest support). Seven eighths of the
    others then pass through a noisy channel: a mixing move takes two equal cells (a1, b1), (a2,
    b2) whose crossed cells are empty and moves half of each to (a1, b2) and (a2, b1), which
    keeps every cell and both marginals dyadic while lowering I(A; B) (a joint that reaches I =
    0 is refused by the check)."""
    total = JOINT_OUTCOMES[level]
    invertible = draw.chance(1, 8)
    few = 2 if level == 1 else 3
    n_b = draw.integer(total - 2, total) if invertible else draw.integer(few, max(few, total // 2))
    p_b = dyadic_distribution(draw, n_b)
    preimages = [1] * n_b
    if not invertible:
        for _ in range(draw.integer(min(2, total - n_b), total - n_b)):
            preimages[draw.below(n_b)] += 1
    rows = []
    for b, (mass, count) in enumerate(zip(p_b, preimages, strict=True)):
        for part in dyadic_distribution(draw, count):
            rows.append([mass * part if column == b else 0 for column in range(n_b)])
    if not invertible and draw.chance(7, 8):
        for _ in range(draw.integer(1, level + 1)):
            _mix(draw, rows)
    return {"joint": draw.shuffled(rows), "unit": _unit(draw)}


def _mix(draw: Draw, rows: list[list]) -> None:
    cells = [(a, b) for a, row in enumerate(rows) for b, x in enumerate(row) if x != 0]
    moves = [(c, d) for c in cells for d in cells
             if c < d and c[0] != d[0] and c[1] != d[1] and rows[c[0]][c[1]] == rows[d[0]][d[1]]
             and rows[c[0]][d[1]] == 0 and rows[d[0]][c[1]] == 0]
    if moves:
        (a1, b1), (a2, b2) = draw.choice(moves)
        half = rows[a1][b1] / 2
        rows[a1][b1] = rows[a1][b2] = rows[a2][b2] = rows[a2][b1] = half


INVERTIBLE_REASON = ("B is an invertible function of A, so A is determined by B and H(A | B) = 0 exactly: "
                     "that is the point of the task (I(A; B) = H(A)).")


def build_joint(task_id, inputs):
    """Invertible when every row and every column has one non-zero cell; H(A | B) = 0 exactly
    when every column has one (A is then a function of B)."""
    joint = inputs["joint"]
    columns_single = all(sum(1 for row in joint if row[b] != 0) == 1 for b in range(len(joint[0])))
    rows_single = all(sum(1 for x in row if x != 0) == 1 for row in joint)
    invertible = columns_single and rows_single
    zero_reason = (INVERTIBLE_REASON if invertible else
                   "every column has one non-zero cell, so A is a function of B and H(A | B) = 0 exactly"
                   if columns_single else None)
    kind = "invertible" if invertible else "non-invertible"
    return TaskDef(task_id, "information", inputs, joint_information_rows, _joint_prompt, API, POLICY,
                   tags=("mutual-information", *nats_tag(inputs), kind),
                   zero_reason=zero_reason, meta={"joint": joint, "mutual_information": True})


LEVEL_1 = Level(build_joint, sample_joint)


def _equal_mass_pairs(joint) -> list[tuple[int, int]]:
    """The pairs of B's values with equal probability."""
    n = len(joint[0])
    masses = [sum((F(row[b]) for row in joint), F(0)) for b in range(n)]
    return [(a, b) for a in range(n) for b in range(a + 1, n) if masses[a] == masses[b]]


# L2 (derive): the bits still needed for A once B is known, and the bits saved
@uses(entropy, mutual)
def information_in_words(joint, question=None):
    from fractions import Fraction

    table = [[Fraction(x) for x in row] for row in joint]
    h_ab = entropy([x for row in table for x in row])
    h_b = entropy([sum(col) for col in zip(*table, strict=True)])
    return {"rows": [{"saved_bits": mutual(joint), "remaining_bits": h_ab - h_b}]}


def _check_information_in_words(task):
    table = joint_table(task.inputs["joint"])
    saved = rational.mutual_information_bits(table)
    return key_agrees(task, {"remaining_bits": rational.information.entropy_bits(rational.marginals(table)[0])
                             - saved, "saved_bits": saved})


def sample_information_words(draw: Draw, level: int) -> dict:
    return {"question": "information_words", "joint": sample_joint(draw, 2)["joint"]}


LEVEL_2 = Level(question_level(
    "information_words", information_in_words, _check_information_in_words,
    "Random variables A and B have the joint distribution `joint` (joint[a][b] = P(A = a, B = b)). On "
    "average, how many bits does an observer who already knows B still need to describe A (the entropy "
    "of A that is left once B is known), and how many bits fewer is that than the entropy of A for an "
    "observer who does not know B?",
    '{"remaining_bits": Fraction, "saved_bits": Fraction}', "bits"), sample_information_words)


# L3 (compose): the information left once two equally likely values of B are merged
@uses(mutual, merged)
def merged_information(joint, groups, question=None):
    return {"rows": [{"bits": mutual(merged(joint, groups))}]}


def _check_merged_information(task):
    return key_agrees(task, {"bits": rational.mutual_information_bits(merged(task.inputs["joint"],
                                                                             task.inputs["groups"]))})


def sample_merge_columns(draw: Draw, level: int) -> dict:
    joint = sample_joint(draw, 2)["joint"]
    n = len(joint[0])
    pairs = _equal_mass_pairs(joint)
    if not pairs:
        raise Reject("no two values of B with equal probability")
    a, b = draw.choice(pairs)
    groups = [[a, b]] + [[c] for c in range(n) if c not in (a, b)]
    if not _powers_of_two(merged(joint, groups)):
        raise Reject("a merged cell is not a power of two")
    return {"question": "merge_columns", "joint": joint, "groups": groups}


LEVEL_3 = Level(question_level(
    "merge_columns", merged_information, _check_merged_information,
    "Random variables A and B have the joint distribution `joint` (joint[a][b] = P(A = a, B = b)). An "
    "observer sees only C, the group of B's value in `groups` (C = g when B is one of the values in "
    "groups[g]). Give the mutual information between A and C in bits.",
    '{"bits": Fraction}', "bits"), sample_merge_columns)


# L4 (search): the merge of two equally likely values of B that keeps the most information
@uses(mutual, merged)
def best_merge(joint, question=None):
    from fractions import Fraction

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
    return {"rows": [{"merge": [a + 1, b + 1], "bits": -value}]}


def _check_best_merge(task):
    joint = task.inputs["joint"]
    masses = rational.marginals(joint_table(joint))[1]
    n = len(masses)
    scored = {(a, b): rational.mutual_information_bits(
        merged(joint, [[a, b]] + [[c] for c in range(n) if c not in (a, b)]))
        for a in range(n) for b in range(a + 1, n) if masses[a] == masses[b]}
    top = max(scored.values())
    return key_agrees(task, {"merge": [b + 1 for b in min(k for k, v in scored.items() if v == top)],
                             "bits": top})


def sample_best_merge(draw: Draw, level: int) -> dict:
    joint = sample_joint(draw, 2)["joint"]
    if len(_equal_mass_pairs(joint)) < 2 or not _merges_stay_dyadic(joint):
        raise Reject("fewer than two mergeable pairs, or a merged cell not a power of two")
    return {"question": "best_merge", "joint": joint}


LEVEL_4 = Level(question_level(
    "best_merge", best_merge, _check_best_merge,
    "Random variables A and B have the joint distribution `joint` (joint[a][b] = P(A = a, B = b)). Two "
    "values of B with equal probability are to be reported as one value (every other value of B is "
    "reported as itself). Which two keep the most mutual information between A and the reported value? "
    "Number B's values from 1 (value number k is column joint[.][k - 1]); on a tie, the pair with the "
    "smallest first number, then the smallest second number. Give [first, second] (first < second) and "
    "that mutual information in bits.",
    '{"merge": [int, int], "bits": Fraction}', "bits; merge holds B's values numbered from 1"),
    sample_best_merge)


# L5 (design): the best two disjoint merges, and how many choices reach it
@uses(mutual, merged)
def best_two_merges(joint, question=None):
    from fractions import Fraction

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
    return {"rows": [{"bits": best, "choices": count}]}


def _subsets_of_pairs(n: int) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Every unordered choice of two disjoint pairs of 0..n-1 (by the smallest element of the four
    going first: each choice once)."""
    from itertools import combinations

    found = []
    for four in combinations(range(n), 4):
        a, b, c, d = four
        found += [((a, b), (c, d)), ((a, c), (b, d)), ((a, d), (b, c))]
    return found


def _check_best_two_merges(task):
    """Every choice of two disjoint pairs enumerated by its four values, not pair by pair."""
    joint = task.inputs["joint"]
    masses = rational.marginals(joint_table(joint))[1]
    n = len(masses)
    values = []
    for first, second in _subsets_of_pairs(n):
        if masses[first[0]] == masses[first[1]] and masses[second[0]] == masses[second[1]]:
            groups = [list(first), list(second)] + [[c] for c in range(n) if c not in (*first, *second)]
            values.append(rational.mutual_information_bits(merged(joint, groups)))
    return key_agrees(task, {"bits": max(values), "choices": values.count(max(values))})


def sample_two_merges(draw: Draw, level: int) -> dict:
    joint = sample_joint(draw, 2)["joint"]
    n = len(joint[0])
    pairs = _equal_mass_pairs(joint)
    disjoint = [(p, q) for i, p in enumerate(pairs) for q in pairs[i + 1:] if len({*p, *q}) == 4]
    if not 2 <= len(disjoint) <= 10:
        raise Reject("fewer than two (or more than ten) choices of two disjoint equal-probability pairs")
    for p, q in disjoint:
        groups = [list(p), list(q)] + [[c] for c in range(n) if c not in (*p, *q)]
        if not _powers_of_two(merged(joint, groups)):
            raise Reject("a merged cell is not a power of two")
    return {"question": "two_merges", "joint": joint}


LEVEL_5 = Level(question_level(
    "two_merges", best_two_merges, _check_best_two_merges,
    "Random variables A and B have the joint distribution `joint` (joint[a][b] = P(A = a, B = b)). Two "
    "disjoint pairs of values of B are to be chosen, the two values of each pair having equal "
    "probability; each pair is then reported as one value (so four values of B become two, and every "
    "other value is reported as itself). What is the largest mutual information between A and the "
    "reported value, in bits, and how many choices of the two pairs reach it (the order of the two "
    "pairs does not matter)?",
    '{"bits": Fraction, "choices": int}', "bits; choices is a count"), sample_two_merges)


def _powers_of_two(table) -> bool:
    return all(x == 0 or (x.numerator == 1 and x.denominator & (x.denominator - 1) == 0)
               for row in table for x in row)


def _merges_stay_dyadic(joint) -> bool:
    """Every merge of two equally likely values of B keeps each merged cell a power of two."""
    n = len(joint[0])
    masses = [sum((F(row[b]) for row in joint), F(0)) for b in range(n)]
    for a in range(n):
        for b in range(a + 1, n):
            groups = [[a, b]] + [[c] for c in range(n) if c not in (a, b)]
            if masses[a] == masses[b] and not _powers_of_two(merged(joint, groups)):
                return False
    return True


MUTUAL_INFORMATION = deeplearning_family(
    "mutual_information", (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1: H(A), H(B), H(A, B), H(A | B), I(A; B) with formulas stated; B = f(A), some joints through "
    "noisy mixing moves. L2 (derive): the bits still needed for A once B is known, and the bits saved "
    "(H(A | B) and I, not named). L3 (compose): I(A; C) for C a stated merge of two equally likely values "
    "of B. L4 (search): the merge of two equally likely values of B that keeps the most information, ties "
    "to the smallest pair. L5 (design): the best choice of two disjoint equally likely pairs of B's values "
    "to merge, and how many choices reach it.")
