"""The eigenvalues family of linalg: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction as F

import sympy

from exactgrade import rational
from exactgrade.domains.deeplearning._family import deeplearning_family, key_agrees
from exactgrade.domains.deeplearning.common import prompt
from exactgrade.domains.deeplearning.linalg.shared import (
    SQUARE,
    ZERO_COUNT,
    _matmul,
    _plain,
    ascending_eigenvalues,
    eigenvalue_identities,
    first_level,
    fractions_of,
    irrational_eigenvalues,
    is_rational_square,
    near_numpy,
    numpy_eigenvalues,
    question_level,
    rational_matrix,
    to_fraction,
    zero_count,
)
from exactgrade.family import Degenerate, Draw, Level, Reject
from exactgrade.task import uses


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


def _check_eigenvalues(task):
    return eigenvalue_identities(task, task.inputs["matrices"])


LEVEL_1 = Level(first_level(eigenvalue_rows, _eigenvalue_prompt, ("eigenvalues", "irrational"),
                            _check_eigenvalues), sample_eigenvalues, irrational_eigenvalues)


def three_symmetric(draw: Draw) -> list[list[list]]:
    """Three symmetric 2x2..4x4 matrices with radical eigenvalues (levels 2-5)."""
    return [symmetric_with_radical_eigenvalues(draw, draw.integer(2, 4)) for _ in range(3)]


# L2 (derive): the maximum of x^T M x on the unit sphere (the largest eigenvalue, not named)
@uses(rational_matrix, ascending_eigenvalues)
def unit_maxima(matrices, question=None):
    return {"rows": [{"max": ascending_eigenvalues(rational_matrix(m))[-1]} for m in matrices]}


def _check_unit_maxima(task):
    values = numpy_eigenvalues([fractions_of(m) for m in task.inputs["matrices"]])
    return near_numpy([float(sympy.N(row["max"], 30)) for row in task.expected["rows"]],
                      [v[-1] for v in values])


def sample_unit_maxima(draw: Draw, level: int) -> dict:
    return {"question": "unit_maximum", "matrices": three_symmetric(draw)}


LEVEL_2 = Level(question_level(
    "unit_maximum", unit_maxima, _check_unit_maxima,
    "For each symmetric matrix M in `matrices`, give the largest value of x^T M x over the vectors x with "
    "x^T x = 1, exactly (it may be irrational).",
    '{"rows": [{"max": exact value}, ...]}  (one row per matrix)', "dimensionless"), sample_unit_maxima)


# L3 (compose): the spectral radius and the sum of squared eigenvalues
@uses(rational_matrix, ascending_eigenvalues, to_fraction)
def radii_and_squares(matrices, question=None):
    import sympy

    rows = []
    for m in matrices:
        values = ascending_eigenvalues(rational_matrix(m))
        radius = max(values, key=lambda v: sympy.N(abs(v), 50))
        rows.append({"spectral_radius": sympy.Abs(radius) if sympy.N(radius, 50) < 0 else radius,
                     "sum_squares": to_fraction(sympy.expand(sum(v**2 for v in values)))})
    return {"rows": rows}


def _check_radii(task):
    """numpy's spectral radius, and the sum of squares as trace(M M) in Fractions."""
    matrices = [fractions_of(m) for m in task.inputs["matrices"]]
    squares = [sum((x * y for r, c in zip(m, rational.transpose(m), strict=True)
                    for x, y in zip(r, c, strict=True)), F(0)) for m in matrices]
    if [row["sum_squares"] for row in task.expected["rows"]] != squares:
        return ["the sums of squared eigenvalues differ from trace(M M)"]
    return near_numpy([float(sympy.N(row["spectral_radius"], 30)) for row in task.expected["rows"]],
                      [max(abs(v)) for v in numpy_eigenvalues(matrices)])


def sample_radii(draw: Draw, level: int) -> dict:
    return {"question": "radius", "matrices": three_symmetric(draw)}


LEVEL_3 = Level(question_level(
    "radius", radii_and_squares, _check_radii,
    "For each symmetric matrix M in `matrices`, give the largest |lambda| over the eigenvalues lambda of M "
    "(exact, possibly irrational), and the sum of the squares of its eigenvalues (with multiplicity).",
    '{"rows": [{"spectral_radius": exact value, "sum_squares": Fraction}, ...]}', "dimensionless"),
    sample_radii)


# L4 (inverse): the smallest integer shift making M + s I positive definite
@uses(rational_matrix, ascending_eigenvalues)
def definite_shifts(matrices, question=None):
    import sympy

    return {"rows": [{"shift": int(sympy.floor(-ascending_eigenvalues(rational_matrix(m))[0])) + 1}
                     for m in matrices]}


def _positive_definite(m: list[list[F]]) -> bool:
    """Every pivot of Gaussian elimination without row exchanges is positive (Sylvester's criterion)."""
    a = [list(row) for row in m]
    for k in range(len(a)):
        if a[k][k] <= 0:
            return False
        for i in range(k + 1, len(a)):
            factor = a[i][k] / a[k][k]
            a[i] = [x - factor * y for x, y in zip(a[i], a[k], strict=True)]
    return True


def _check_shifts(task):
    """The shift found by exact pivots: M + s I positive definite, M + (s - 1) I not."""

    def shifted(m, s):
        return [[x + (s if r == c else 0) for c, x in enumerate(row)]
                for r, row in enumerate(fractions_of(m))]

    rows = []
    for m in task.inputs["matrices"]:
        s = 0
        while not _positive_definite(shifted(m, s)):
            s += 1
        while _positive_definite(shifted(m, s - 1)):
            s -= 1
        rows.append({"shift": s})
    return key_agrees(task, {"rows": rows})


def sample_shifts(draw: Draw, level: int) -> dict:
    return {"question": "shift", "matrices": three_symmetric(draw)}


LEVEL_4 = Level(question_level(
    "shift", definite_shifts, _check_shifts,
    "For each symmetric matrix M in `matrices`, give the smallest integer s such that M + s I is positive "
    "definite (x^T (M + s I) x > 0 for every non-zero x).",
    '{"rows": [{"shift": int}, ...]}  (one row per matrix)', "dimensionless"), sample_shifts)


# L5 (design): how many eigenvalues lie below a threshold
@uses(rational_matrix, ascending_eigenvalues)
def counts_below(matrices, thresholds, question=None):
    from fractions import Fraction

    import sympy

    rows = []
    for m, c in zip(matrices, thresholds, strict=True):
        c = sympy.Rational(Fraction(c).numerator, Fraction(c).denominator)
        values = ascending_eigenvalues(rational_matrix(m))
        rows.append({"below": sum(1 for v in values if sympy.N(v - c, 50) < 0)})
    return {"rows": rows}


def _check_counts_below(task):
    """numpy's eigenvalues counted below each threshold, none of them within 1e-6 of it."""
    values = numpy_eigenvalues([fractions_of(m) for m in task.inputs["matrices"]])
    problems = []
    rows = zip(values, task.inputs["thresholds"], task.expected["rows"], strict=True)
    for i, (v, c, row) in enumerate(rows):
        if min(abs(v - float(c))) < 1e-6:
            problems.append(Degenerate(f"rows[{i}]: an eigenvalue is within 1e-6 of the threshold"))
        elif int(sum(v < float(c))) != row["below"]:
            problems.append(f"rows[{i}]: numpy counts {int(sum(v < float(c)))} eigenvalues below {c}")
    return problems


def sample_counts_below(draw: Draw, level: int) -> dict:
    matrices = three_symmetric(draw)
    return {"question": "count_below", "matrices": matrices,
            "thresholds": [draw.integer(-3, 4) + F(1, 2) for _ in matrices]}


LEVEL_5 = Level(question_level(
    "count_below", counts_below, _check_counts_below,
    "For each symmetric matrix M in `matrices` and the number c at the same position in `thresholds`, give "
    "how many eigenvalues of M (counted with multiplicity) are strictly less than c.",
    '{"rows": [{"below": int}, ...]}  (one row per matrix)', "a count", zero_reason=zero_count(ZERO_COUNT)),
    sample_counts_below)


EIGENVALUES = deeplearning_family(
    "eigenvalues", (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5), about=
    "L1: all eigenvalues of symmetric H D H^T matrices (radicals). L2 (derive): the maximum of x^T M x on "
    "the unit sphere (the largest eigenvalue, not named). L3 (compose): the spectral radius and the sum of "
    "squared eigenvalues. L4 (inverse): the smallest integer shift making M + s I positive definite. L5 "
    "(design): how many eigenvalues lie below a threshold.")
