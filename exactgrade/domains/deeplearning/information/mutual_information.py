"""The mutual_information family of information: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade.domains.deeplearning.common import POLICY, prompt
from exactgrade.domains.deeplearning.information.shared import (
    API,
    _unit,
    dyadic_distribution,
    info_family,
    nats_tag,
)
from exactgrade.family import Draw, Reject
from exactgrade.task import TaskDef


def joint_information_rows(joint, unit):
    from fractions import Fraction

    import sympy

    def log2(p):
        n, d = p.numerator, p.denominator
        if n == 1 and d & (d - 1) == 0:
            return -(d.bit_length() - 1)
        if d == 1 and n & (n - 1) == 0:
            return n.bit_length() - 1
        raise ValueError(f"{p} is not a power of two")

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


def sample_mutual_information(draw: Draw, level: int) -> dict:
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


MUTUAL_INFORMATION = info_family(
    "mutual_information", build_joint, sample_joint,
    "L1: H(A), H(B), H(A, B), H(A | B), I(A; B) with formulas stated; B = f(A), some joints through noisy "
    "mixing moves. L2 (derive): the bits still needed for A once B is known, and the bits saved (H(A | B) "
    "and I, not named). L3 (compose): I(A; C) for C a stated merge of two equally likely values of B. L4 "
    "(search): the merge of two equally likely values of B that keeps the most information, ties to the "
    "smallest pair. L5 (design): the best choice of two disjoint equally likely pairs of B's values to "
    "merge, "
    "and how many choices reach it.",
    sample_mutual_information)
