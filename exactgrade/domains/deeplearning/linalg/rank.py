"""The rank family of linalg: everything it needs, its five levels in level order."""

from __future__ import annotations

from exactgrade import rational
from exactgrade.domains.deeplearning._family import deeplearning_family, key_agrees, varying_fields
from exactgrade.domains.deeplearning.common import prompt
from exactgrade.domains.deeplearning.linalg.shared import (
    ZERO_COUNT,
    _matmul,
    _plain,
    first_level,
    full_column_rank,
    question_level,
    rational_matrix,
    rows_agree,
    zero_count,
)
from exactgrade.family import Draw, Level, Reject
from exactgrade.task import uses


def rank_rows(matrices):
    from fractions import Fraction

    import sympy

    def exact(q):
        q = Fraction(q)
        return sympy.Rational(q.numerator, q.denominator)

    return {"rows": [{"rank": int(sympy.Matrix([[exact(x) for x in row] for row in m]).to_DM().rank())}
                     for m in matrices]}


def _rank_prompt(inputs):
    return prompt("Give the exact rank of each matrix in `matrices` (computed over the rationals, no "
                  "tolerance).",
                  {"matrices": ("list of matrices (lists of rows of Fraction)", inputs["matrices"])},
                  '{"rows": [{"rank": int}, ...]}  (one row per matrix, in order)',
                  "dimensionless (an integer count)")


def rank_matrix(draw: Draw, m: int, n: int, r: int) -> list[list]:
    """B @ A with B (m x r) of full column rank and A (r x n) of full row rank: rank exactly r."""
    left = full_column_rank(draw, m, r)
    right = rational.transpose(full_column_rank(draw, n, r))
    return _plain(_matmul(left, right))


_RANK_COUNT = {1: 3, 2: 8, 3: 9, 4: 10, 5: 12}
"""8+ from level 2: a list of small ranks needs that many entries for the keys to vary"""


def sample_rank(draw: Draw, level: int) -> dict:
    """_RANK_COUNT[level] matrices up to (3 + level) x (3 + level), each of a drawn rank r
    (1 .. min(m, n)) by construction."""
    matrices = []
    for _ in range(_RANK_COUNT[level]):
        m, n = draw.integer(2, 3 + level), draw.integer(2, 3 + level)
        matrices.append(rank_matrix(draw, m, n, draw.integer(1, min(m, n))))
    return {"matrices": matrices}


def _check_ranks(task):
    return rows_agree(task, [{"rank": rational.rank(m)} for m in task.inputs["matrices"]])


LEVEL_1 = Level(first_level(rank_rows, _rank_prompt, ("rank", "low-rank"), _check_ranks), sample_rank)


def matrices_of_drawn_rank(draw: Draw, count: int, size: int) -> list[list[list]]:
    """``count`` matrices of 2..size rows and columns, each of a drawn rank."""
    out = []
    for _ in range(count):
        m, n = draw.integer(2, size), draw.integer(2, size)
        out.append(rank_matrix(draw, m, n, draw.integer(1, min(m, n))))
    return out


# L2 (derive): the dimensions of the null space and the left null space
@uses(rational_matrix)
def nullities(matrices, question=None):
    rows = []
    for a in matrices:
        r = rational_matrix(a).rank()
        rows.append({"nullity": len(a[0]) - r, "left_nullity": len(a) - r})
    return {"rows": rows}


def _check_nullities(task):
    return key_agrees(task, {"rows": [{"nullity": len(a[0]) - rational.rank(a),
                                       "left_nullity": len(a) - rational.rank(a)}
                                      for a in task.inputs["matrices"]]})


def sample_nullities(draw: Draw, level: int) -> dict:
    return {"question": "nullity", "matrices": matrices_of_drawn_rank(draw, 4, 5)}


LEVEL_2 = Level(question_level(
    "nullity", nullities, _check_nullities,
    "For each matrix A (m rows, n columns) in `matrices`, give the dimension of the set of vectors x with "
    "A x = 0, and the dimension of the set of vectors y with y^T A = 0.",
    '{"rows": [{"nullity": int, "left_nullity": int}, ...]}  (one row per matrix)', "dimensions",
    zero_reason=zero_count(ZERO_COUNT)), sample_nullities,
    varying_fields("rows[].nullity", "rows[].left_nullity"))


# L3 (compose): the rank of a product of two low-rank matrices
@uses(rational_matrix)
def product_ranks(products, question=None):
    return {"rows": [{"rank": (rational_matrix(pair["A"]) * rational_matrix(pair["B"])).rank()}
                     for pair in products]}


def _check_product_ranks(task):
    return key_agrees(task, {"rows": [{"rank": rational.rank(rational.matmul(p["A"], p["B"]))}
                                      for p in task.inputs["products"]]})


def sample_low_rank_products(draw: Draw, level: int) -> dict:
    """Four pairs A (m x k), B (k x n), each factor of a drawn rank."""
    pairs = []
    for _ in range(4):
        m, k, n = draw.integer(2, 4), draw.integer(2, 4), draw.integer(2, 4)
        pairs.append({"A": rank_matrix(draw, m, k, draw.integer(1, min(m, k))),
                      "B": rank_matrix(draw, k, n, draw.integer(1, min(k, n)))})
    return {"question": "product_rank", "products": pairs}


LEVEL_3 = Level(question_level(
    "product_rank", product_ranks, _check_product_ranks,
    "For each pair in `products`, give the rank of the product A B, over the rationals.",
    '{"rows": [{"rank": int}, ...]}  (one row per pair)', "dimensionless"), sample_low_rank_products,
    varying_fields("rows[].rank"))


# L4 (search): the shortest prefix of columns spanning the column space
@uses(rational_matrix)
def spanning_prefixes(matrices, question=None):
    rows = []
    for a in matrices:
        m = rational_matrix(a)
        full = m.rank()
        rows.append({"k": next(k for k in range(1, m.cols + 1) if m[:, :k].rank() == full)})
    return {"rows": rows}


def _check_spanning_prefixes(task):
    rows = []
    for a in task.inputs["matrices"]:
        columns = rational.transpose(a)
        full = rational.rank(columns)
        rows.append({"k": next(k for k in range(1, len(columns) + 1) if rational.rank(columns[:k]) == full)})
    return key_agrees(task, {"rows": rows})


def sample_spanning_prefixes(draw: Draw, level: int) -> dict:
    return {"question": "spanning_prefix", "matrices": matrices_of_drawn_rank(draw, 4, 5)}


LEVEL_4 = Level(question_level(
    "spanning_prefix", spanning_prefixes, _check_spanning_prefixes,
    "For each matrix in `matrices`, give the smallest k such that its first k columns span the same space "
    "as all of its columns.",
    '{"rows": [{"k": int}, ...]}  (one row per matrix)', "a number of columns"), sample_spanning_prefixes,
    varying_fields("rows[].k"))


# L5 (design): how many columns of each matrix are essential
@uses(rational_matrix)
def essential_columns(matrices, question=None):
    rows = []
    for a in matrices:
        m = rational_matrix(a)
        full = m.rank()
        rows.append({"essential": sum(1 for c in range(m.cols)
                                      if m[:, [k for k in range(m.cols) if k != c]].rank() < full)})
    return {"rows": rows}


def _check_essential_columns(task):
    rows = []
    for a in task.inputs["matrices"]:
        columns = rational.transpose(a)
        full = rational.rank(columns)
        rows.append({"essential": sum(1 for c in range(len(columns))
                                      if rational.rank(columns[:c] + columns[c + 1:]) < full)})
    return key_agrees(task, {"rows": rows})


def sample_essential_columns(draw: Draw, level: int) -> dict:
    """Four matrices with drawn counts (0-3) of essential columns, not all one count, never the nullities."""
    counts = [draw.integer(0, 3) for _ in range(4)]
    if len(set(counts)) == 1:  # a constant answer must not pass: the last count differs
        counts[-1] = draw.choice([c for c in range(4) if c != counts[0]])
    matrices = [essential_matrix(draw, e) for e in counts]
    if counts == [len(a[0]) - rational.rank(a) for a in matrices]:
        raise Reject("the nullities are the counts")
    return {"question": "essential_columns", "matrices": matrices}


def essential_matrix(draw: Draw, essential: int) -> list[list]:
    """A matrix with exactly ``essential`` essential columns (deleting one lowers the rank) among
    2-4 that are not: G @ C, G (m x r) of full column rank, r = essential + s. Column j < essential
    of C is the unit vector e_j plus a mix of the last s coordinates (outside the span of every
    other column, yet not a plain basis vector); the other d >= s + 1 columns live in the last s
    coordinates, every one in the span of the rest (no coloop). Columns shuffled; the count is
    never the rank (r > essential) and often not the nullity (d - s)."""
    from exactgrade import rational
    s = draw.integer(1, 2) if essential else 2  # at least three columns
    d = s + draw.integer(1, min(2, 6 - essential - s))
    for _ in range(64):
        block = [[draw.integer(-2, 2) for _ in range(d)] for _ in range(s)]
        if rational.rank(block) == s and all(
                rational.rank([row[:c] + row[c + 1:] for row in block]) == s for c in range(d)):
            break
    else:
        raise Reject("no coefficient block without a coloop")
    columns = [[int(i == j) for i in range(essential)] + [draw.integer(-1, 1) for _ in range(s)]
               for j in range(essential)]
    columns += [[0] * essential + [row[c] for row in block] for c in range(d)]
    columns = draw.shuffled(columns)
    r = essential + s
    left = full_column_rank(draw, draw.integer(r, max(r, 5)), r)
    return _plain(_matmul(left, rational.transpose(columns)))


LEVEL_5 = Level(question_level(
    "essential_columns", essential_columns, _check_essential_columns,
    "For each matrix in `matrices`, give how many of its columns cannot be deleted (on its own, the other "
    "columns kept) without lowering the rank.",
    '{"rows": [{"essential": int}, ...]}  (one row per matrix)', "a number of columns",
    zero_reason=zero_count("a count in the answer is exactly 0 (a matrix whose every column lies in the span "
                           "of the others has no essential column): that count is the answer")),
    sample_essential_columns, varying_fields("rows[].essential"))


RANK = deeplearning_family(
    "rank", (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5), about=
    "L1: ranks of B @ A matrices of drawn rank. L2 (derive): the dimensions of the null space and the left "
    "null space. L3 (compose): the rank of a product of two low-rank matrices. L4 (search): the shortest "
    "prefix of columns spanning the column space. L5 (design): how many columns of each matrix are essential "
    "(deleting one lowers the rank), the matrices built with a drawn number (0-3) of essential columns "
    "among 2-4 dependent ones, so the count is neither the rank nor the nullity and differs between the "
    "matrices of an instance. The counts of L2-L5 vary within an instance.")
