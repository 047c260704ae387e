"""The rank family of linalg: everything it needs, its five levels in level order."""

from __future__ import annotations

from exactgrade import rational
from exactgrade.domains.deeplearning.common import prompt
from exactgrade.domains.deeplearning.linalg.shared import (
    _builder,
    _matmul,
    _plain,
    full_column_rank,
    linalg_family,
)
from exactgrade.family import Draw, Reject


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


def sample_rank_upper(draw: Draw, level: int) -> dict:
    from exactgrade import rational
    def some(count, size):
        out = []
        for _ in range(count):
            m, n = draw.integer(2, size), draw.integer(2, size)
            out.append(rank_matrix(draw, m, n, draw.integer(1, min(m, n))))
        return out

    if level == 2:
        return {"question": "nullity", "matrices": some(4, 5)}
    if level == 3:
        pairs = []
        for _ in range(4):
            m, k, n = draw.integer(2, 4), draw.integer(2, 4), draw.integer(2, 4)
            pairs.append({"A": rank_matrix(draw, m, k, draw.integer(1, min(m, k))),
                          "B": rank_matrix(draw, k, n, draw.integer(1, min(k, n)))})
        return {"question": "product_rank", "products": pairs}
    if level == 4:
        return {"question": "spanning_prefix", "matrices": some(4, 5)}
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


RANK = linalg_family(
    "rank", _builder(rank_rows, _rank_prompt, "rank", ("rank", "low-rank")), sample_rank,
    "L1: ranks of B @ A matrices of drawn rank. L2 (derive): the dimensions of the null space and the left "
    "null space. L3 (compose): the rank of a product of two low-rank matrices. L4 (search): the shortest "
    "prefix of columns spanning the column space. L5 (design): how many columns of each matrix are essential "
    "(deleting one lowers the rank), the matrices built with a drawn number (0-3) of essential columns "
    "among 2-4 dependent ones, so the count is neither the rank nor the nullity and differs between the "
    "matrices of an instance. The counts of L2-L5 vary within an instance.", sample_rank_upper,
    varying_at={2: ("rows[].nullity", "rows[].left_nullity"), 3: ("rows[].rank",), 4: ("rows[].k",),
                5: ("rows[].essential",)})
