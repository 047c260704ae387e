"""The eigenvalues family of linalg: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade.domains.deeplearning.common import prompt
from exactgrade.domains.deeplearning.linalg.shared import (
    SQUARE,
    _builder,
    _matmul,
    _plain,
    irrational_eigenvalues,
    is_rational_square,
    linalg_family,
)
from exactgrade.family import Draw, Reject


def eigenvalue_rows(matrices):
    from fractions import Fraction

    import sympy

    def exact(q):
        q = Fraction(q)
        return sympy.Rational(q.numerator, q.denominator)

    def eigenvalues(matrix):
        """Roots of the characteristic polynomial's factors over Q, each as often as its
        multiplicity: linear and quadratic factors by formula, any other by sympy.roots."""
        over_q = matrix.to_DM().to_field()
        coefficients = [over_q.domain.to_sympy(c) for c in over_q.charpoly()]  # leading first
        values = []
        for factor, count in sympy.Poly(coefficients, sympy.Symbol("x"), domain=sympy.QQ).factor_list()[1]:
            coefficients = factor.all_coeffs()
            if len(coefficients) == 2:
                roots = [-coefficients[1] / coefficients[0]]
            elif len(coefficients) == 3:
                a, b, c = coefficients
                root = sympy.sqrt(b * b - 4 * a * c)
                roots = [(-b - root) / (2 * a), (-b + root) / (2 * a)]
            else:
                roots = [sympy.radsimp(r) for r, k in sympy.roots(factor).items() for _ in range(k)]
            values += roots * count
        return sorted(values, key=lambda value: sympy.N(value, 50))

    rows = []
    for m in matrices:
        rows.append({"eigenvalues": eigenvalues(sympy.Matrix([[exact(x) for x in row] for row in m]))})
    return {"rows": rows}


def _eigenvalue_prompt(inputs):
    return prompt("Give all eigenvalues of each symmetric matrix in `matrices`, exactly (they may be "
                  "irrational: give exact sympy values such as 3/2 - sqrt(5)/2), in ascending order.",
                  {"matrices": ("list of symmetric matrices (lists of rows of Fraction)",
                                inputs["matrices"])},
                  '{"rows": [{"eigenvalues": [exact value, ...]}, ...]}  '
                  "(one row per matrix, values ascending)",
                  "dimensionless (pure numbers)")


def householder(draw: Draw, n: int) -> list[list[F]]:
    """I - 2 v v^T / (v^T v) for a non-zero integer v (a zero v is drawn again)."""
    for _ in range(64):
        v = [draw.integer(-2, 2) for _ in range(n)]
        norm = sum(x * x for x in v)
        if norm != 0:
            return [[F(int(i == j)) - F(2 * v[i] * v[j], norm) for j in range(n)] for i in range(n)]
    raise Reject("drew only zero Householder vectors")


def _block(draw: Draw) -> tuple[F, F, F]:
    """(a, c, b) of a block [[a, b], [b, c]] with b != 0 and no zero eigenvalue (a c != b**2: a
    zero eigenvalue would be an undeclared zero in the key; such blocks are drawn again)."""
    for _ in range(64):
        a, c, b = F(draw.integer(-3, 4)), F(draw.integer(-3, 4)), F(draw.choice((-2, -1, 1, 2, F(1, 2))))
        if a * c != b * b:
            return a, c, b
    raise Reject("drew only singular blocks")


def symmetric_with_radical_eigenvalues(draw: Draw, n: int) -> list[list]:
    """H D H^T, D = blocks [[a, b], [b, d]] (b != 0) and 1x1 entries, H a Householder reflection.
    D is non-singular by construction and at least one block has irrational eigenvalues (its
    discriminant (a - c)**2 + 4 b**2 is not a rational square), else the draw is refused here,
    before the reference runs: the eigenvalues of H D H^T are those of D."""
    d = [[F(0)] * n for _ in range(n)]
    i, irrational = 0, False
    while i < n:
        if i + 1 < n and (i == 0 or draw.chance(2, 3)):
            a, c, b = _block(draw)
            d[i][i], d[i + 1][i + 1], d[i][i + 1], d[i + 1][i] = a, c, b, b
            irrational = irrational or not is_rational_square((a - c) ** 2 + 4 * b * b)
            i += 2
        else:
            d[i][i] = F(draw.choice((-3, -2, -1, 1, 2, 3, 4)))
            i += 1
    if not irrational:
        raise Reject("every eigenvalue of a matrix is rational")
    h = householder(draw, n)
    return _plain(_matmul(_matmul(h, d), h))


def sample_eigenvalues(draw: Draw, level: int) -> dict:
    count = 2 if level <= 2 else 3
    return {"matrices": [symmetric_with_radical_eigenvalues(draw, draw.integer(*SQUARE[level]))
                         for _ in range(count)]}


def sample_eigenvalues_upper(draw: Draw, level: int) -> dict:
    matrices = [symmetric_with_radical_eigenvalues(draw, draw.integer(2, 4)) for _ in range(3)]
    name = {2: "unit_maximum", 3: "radius", 4: "shift", 5: "count_below"}[level]
    extra = {"thresholds": [draw.integer(-3, 4) + F(1, 2) for _ in matrices]} if level == 5 else {}
    return {"question": name, "matrices": matrices, **extra}


EIGENVALUES = linalg_family(
    "eigenvalues",
    _builder(eigenvalue_rows, _eigenvalue_prompt, "eigenvalues", ("eigenvalues", "irrational")),
    sample_eigenvalues,
    "L1: all eigenvalues of symmetric H D H^T matrices (radicals). L2 (derive): the maximum of x^T M x on "
    "the unit sphere (the largest eigenvalue, not named). L3 (compose): the spectral radius and the sum of "
    "squared eigenvalues. L4 (inverse): the smallest integer shift making M + s I positive definite. L5 "
    "(design): how many eigenvalues lie below a threshold.", sample_eigenvalues_upper,
    reject=irrational_eigenvalues)
