"""The inverse family of linalg: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade import rational
from exactgrade.domains.deeplearning._family import answer_field
from exactgrade.domains.deeplearning.common import prompt
from exactgrade.domains.deeplearning.linalg.shared import (
    SQUARE,
    _builder,
    _plain,
    invertible_matrix,
    linalg_family,
    linalg_question_rows,
)
from exactgrade.family import Branch, Draw, Reject


def inverse_rows(matrices):
    from fractions import Fraction

    import sympy

    def exact(q):
        q = Fraction(q)
        return sympy.Rational(q.numerator, q.denominator)

    def fraction(x):
        return Fraction(int(x.p), int(x.q))

    rows = []
    for rows_of_a in matrices:
        a = sympy.Matrix([[exact(x) for x in row] for row in rows_of_a]).to_DM().to_field()  # over Q
        inverse = a.inv().to_Matrix()
        rows.append({"det": fraction(a.domain.to_sympy(a.det())),
                     "inverse": [[fraction(x) for x in inverse.row(i)] for i in range(inverse.rows)]})
    return {"rows": rows}


def _inverse_prompt(inputs):
    return prompt("For each square matrix in `matrices`, compute its determinant and its inverse, exactly.",
                  {"matrices": ("list of square matrices (lists of rows of Fraction)", inputs["matrices"])},
                  '{"rows": [{"det": Fraction, "inverse": [[Fraction, ...], ...]}, ...]}  '
                  "(one row per matrix, in order)",
                  "dimensionless (pure numbers)")


def _inverse_without_zeros(draw: Draw, n: int) -> list[list]:
    """An invertible matrix whose inverse has no zero entry (a zero would be an undeclared zero
    in the key): such a matrix is drawn again here, before the reference runs."""
    for _ in range(16):
        matrix = invertible_matrix(draw, n)
        if all(x != 0 for row in rational.inverse(matrix) for x in row):
            return matrix
    raise Reject("every drawn matrix has a zero in its inverse")


def sample_inverse(draw: Draw, level: int) -> dict:
    return {"matrices": [_inverse_without_zeros(draw, draw.integer(*SQUARE[level])) for _ in range(2)]}


def sample_inverse_upper(draw: Draw, level: int) -> dict:
    n = draw.integer(2, 3) if level in (2, 3) else 3
    if level == 2:
        matrices = [invertible_matrix(draw, draw.integer(2, 4)) for _ in range(2)]
        return {"question": "solve", "matrices": matrices,
                "vectors": [[draw.integer(-3, 3) for _ in m] for m in matrices]}
    if level == 3:
        return {"question": "product", "A": invertible_matrix(draw, n), "B": invertible_matrix(draw, n)}
    a = invertible_matrix(draw, n)
    entry = [draw.integer(1, n), draw.integer(1, n)]
    if level == 4 and draw.chance(1, 3):  # an entry whose cofactor is 0, when there is one: the None case
        from exactgrade.rational import determinant

        flat = [[i, j] for i in range(1, n + 1) for j in range(1, n + 1)
                if determinant([[x for c, x in enumerate(row) if c != j - 1]
                                for r, row in enumerate(a) if r != i - 1]) == 0]
        entry = draw.choice(flat) if flat else entry
    if level == 4:
        return {"question": "singular_entry", "A": a, "entry": entry}
    inputs = {"question": "minimax_entry", "A": _plain(a), "entry": entry}
    key = linalg_question_rows(**inputs)["rows"][0]
    limit = minimax_limit(inputs)
    if limit is not None and key["max_entry"] >= limit:
        raise Reject("the infimum is approached as t grows without bound (not attained)")
    if key["t"].denominator == 1:
        raise Reject("the optimal t is an integer (the named mistake, a search over integers, would find it)")
    return inputs


def minimax_limit(inputs) -> F | None:
    """The largest absolute inverse entry of inverse L5's A(t) as t -> +-infinity (None when it grows
    without bound): entry k is (a_k + b_k t) / (c + d t), its limit b_k / d."""
    from exactgrade.rational import determinant, inverse

    i, j = inputs["entry"][0] - 1, inputs["entry"][1] - 1

    def at(t):
        m = [[F(x) for x in row] for row in inputs["A"]]
        m[i][j] = F(t)
        return m

    ts = [t for t in range(6) if determinant(at(t)) != 0][:2]
    tops = [[[x * determinant(at(t)) for x in row] for row in inverse(at(t))] for t in ts]
    slope_det = (determinant(at(ts[1])) - determinant(at(ts[0]))) / (ts[1] - ts[0])
    slopes = [(b - a) / (ts[1] - ts[0])
              for ra, rb in zip(*tops, strict=True) for a, b in zip(ra, rb, strict=True)]
    if slope_det == 0:
        return None if any(slopes) else F(0)
    return max(abs(b / slope_det) for b in slopes)


def _none(key, levels):
    return lambda task: task.level in levels and answer_field(task, key) is None


INVERSE = linalg_family(
    "inverse", _builder(inverse_rows, _inverse_prompt, "inverse", ("inverse", "determinant")),
    sample_inverse,
    "L1: determinant and inverse of two P L U matrices. L2 (derive): the solution of A x = b (no inverse "
    "asked). L3 (compose): det(A B) and the trace of (A B)^-1. L4 (inverse): the value of one entry that "
    "makes A singular (None when the determinant does not depend on it). L5 (regimes): the real value of one "
    "entry that makes the largest absolute entry of the inverse smallest (each inverse entry is a ratio of "
    "affine functions of it with one denominator, so the optimum is an exact rational where two entries "
    "cross or one vanishes; no grid finds it), that value and the entries that bind.",
    sample_inverse_upper, branches=(Branch("the determinant does not depend on the entry", _none("t", (4,)),
                                       F(1, 30), (4,)),))
