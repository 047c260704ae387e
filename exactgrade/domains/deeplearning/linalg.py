"""Linear-algebra tasks (dl-024..dl-029): exact rational matrices, least squares, rank,
projections, and eigenvalues of small symmetric matrices (exact, possibly irrational).

References use sympy.Matrix over the rationals (the sandbox has sympy); rational results are
returned as Fractions, irrational eigenvalues as exact sympy expressions. verify recomputes the
rational results independently with exactgrade.rational.matrix.
"""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade.domains.deeplearning.common import POLICY, api, prompt
from exactgrade.task import TaskDef

CONVENTIONS = (
    "Linear-algebra conventions. A matrix is a list of rows (lists of fractions.Fraction or int); a vector "
    "is a list. All arithmetic is exact over the rationals (sympy.Matrix with sympy.Rational entries, or "
    "fractions.Fraction by hand); rational results are given as Fraction (or int), irrational ones as "
    "exact sympy expressions (e.g. 3/2 - sqrt(5)/2). Least squares minimises ||X w - y||**2 (the normal "
    "equations X^T X w = X^T y); rss is the residual sum of squares ||y - X w||**2. The orthogonal "
    "projection onto the column space of A is P = A (A^T A)^-1 A^T. Eigenvalues are listed in ascending "
    "order, each repeated as often as its algebraic multiplicity. A sample covariance here is the "
    "population covariance (1/n) * sum_k (p_k - mean)(p_k - mean)^T over the n points."
)


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
        a = sympy.Matrix([[exact(x) for x in row] for row in rows_of_a])
        inverse = a.inv()
        rows.append({"det": fraction(a.det()),
                     "inverse": [[fraction(x) for x in inverse.row(i)] for i in range(inverse.rows)]})
    return {"rows": rows}


def least_squares_rows(X, y):
    from fractions import Fraction

    import sympy

    def exact(q):
        q = Fraction(q)
        return sympy.Rational(q.numerator, q.denominator)

    def fraction(x):
        return Fraction(int(x.p), int(x.q))

    x = sympy.Matrix([[exact(v) for v in row] for row in X])
    target = sympy.Matrix([exact(v) for v in y])
    w = (x.T * x).solve(x.T * target)
    residual = target - x * w
    return {"rows": [{"w": [fraction(v) for v in w], "rss": fraction((residual.T * residual)[0, 0])}]}


def rank_rows(matrices):
    from fractions import Fraction

    import sympy

    def exact(q):
        q = Fraction(q)
        return sympy.Rational(q.numerator, q.denominator)

    return {"rows": [{"rank": int(sympy.Matrix([[exact(x) for x in row] for row in m]).rank())}
                     for m in matrices]}


def projection_rows(A, vectors):
    from fractions import Fraction

    import sympy

    def exact(q):
        q = Fraction(q)
        return sympy.Rational(q.numerator, q.denominator)

    def fraction(x):
        return Fraction(int(x.p), int(x.q))

    a = sympy.Matrix([[exact(x) for x in row] for row in A])
    p = a * (a.T * a).inv() * a.T
    rows = []
    for v in vectors:
        vector = sympy.Matrix([exact(x) for x in v])
        projected = p * vector
        rows.append({"projection": [fraction(x) for x in projected],
                     "residual": [fraction(x) for x in vector - projected]})
    return {"rows": rows}


def eigenvalue_rows(matrices):
    from fractions import Fraction

    import sympy

    def exact(q):
        q = Fraction(q)
        return sympy.Rational(q.numerator, q.denominator)

    rows = []
    for m in matrices:
        values = sympy.Matrix([[exact(x) for x in row] for row in m]).eigenvals()
        listed = [sympy.radsimp(value) for value, count in values.items() for _ in range(count)]
        rows.append({"eigenvalues": sorted(listed, key=lambda value: sympy.N(value, 50))})
    return {"rows": rows}


def pca_rows(points):
    from fractions import Fraction

    import sympy

    def exact(q):
        q = Fraction(q)
        return sympy.Rational(q.numerator, q.denominator)

    def fraction(x):
        return Fraction(int(x.p), int(x.q))

    data = sympy.Matrix([[exact(x) for x in p] for p in points])
    n = data.rows
    mean = sympy.Matrix([[sum(data.col(j)) / n for j in range(data.cols)]])
    centred = data - sympy.ones(n, 1) * mean
    covariance = centred.T * centred / n
    values = covariance.eigenvals()
    eigenvalues = sorted((sympy.radsimp(v) for v, count in values.items() for _ in range(count)),
                         key=lambda value: sympy.N(value, 50))
    ratio = sympy.radsimp(eigenvalues[-1] / covariance.trace())
    return {"rows": [{
        "covariance": [[fraction(x) for x in covariance.row(i)] for i in range(covariance.rows)],
        "eigenvalues": eigenvalues,
        "explained_variance_ratio": ratio,
    }]}


def _inverse_prompt(inputs):
    return prompt("For each square matrix in `matrices`, compute its determinant and its inverse, exactly.",
                  {"matrices": ("list of square matrices (lists of rows of Fraction)", inputs["matrices"])},
                  '{"rows": [{"det": Fraction, "inverse": [[Fraction, ...], ...]}, ...]}  '
                  "(one row per matrix, in order)",
                  "dimensionless (pure numbers)")


def _least_squares_prompt(inputs):
    return prompt("Fit the linear model y ~ X w by ordinary least squares (X already contains a column of "
                  "ones for the intercept). Give the exact minimiser w and the residual sum of squares.",
                  {"X": ("design matrix, one row per observation", inputs["X"]),
                   "y": ("observed targets", inputs["y"])},
                  '{"rows": [{"w": [Fraction, ...], "rss": Fraction}]}  (a single row)',
                  "w in units of y per unit of each column of X; rss in squared units of y")


def _rank_prompt(inputs):
    return prompt("Give the exact rank of each matrix in `matrices` (computed over the rationals, no "
                  "tolerance).",
                  {"matrices": ("list of matrices (lists of rows of Fraction)", inputs["matrices"])},
                  '{"rows": [{"rank": int}, ...]}  (one row per matrix, in order)',
                  "dimensionless (an integer count)")


def _projection_prompt(inputs):
    return prompt("Project each vector in `vectors` orthogonally onto the column space of A. Give the "
                  "projection and the residual (vector minus projection), exactly.",
                  {"A": ("matrix with linearly independent columns", inputs["A"]),
                   "vectors": ("list of vectors to project", inputs["vectors"])},
                  '{"rows": [{"projection": [Fraction, ...], "residual": [Fraction, ...]}, ...]}  '
                  "(one row per vector, in order)",
                  "the units of the vectors")


def _eigenvalue_prompt(inputs):
    return prompt("Give all eigenvalues of each symmetric matrix in `matrices`, exactly (they may be "
                  "irrational: give exact sympy values such as 3/2 - sqrt(5)/2), in ascending order.",
                  {"matrices": ("list of symmetric matrices (lists of rows of Fraction)",
                                inputs["matrices"])},
                  '{"rows": [{"eigenvalues": [exact value, ...]}, ...]}  '
                  "(one row per matrix, values ascending)",
                  "dimensionless (pure numbers)")


def _pca_prompt(inputs):
    return prompt("Principal component analysis of the 2-D points in `points`: compute the population "
                  "covariance matrix (1/n normalisation), its eigenvalues in ascending order, and the "
                  "fraction of the total variance explained by the first principal component (largest "
                  "eigenvalue / trace), all exactly.",
                  {"points": ("list of points [x, y] with Fraction coordinates", inputs["points"])},
                  '{"rows": [{"covariance": [[Fraction, Fraction], [Fraction, Fraction]], '
                  '"eigenvalues": [exact value, exact value], "explained_variance_ratio": exact value}]}',
                  "covariance and eigenvalues in squared point units; the ratio is dimensionless")


_API = api(CONVENTIONS)

_INVERTIBLE = [[[2, 1, 0], [1, 3, 1], [0, 1, 4]], [[1, F(1, 2)], [F(1, 3), F(1, 4)]]]
_X = [[1, 0], [1, 1], [1, 2], [1, 4]]
_Y = [1, 2, 2, 5]
# A 3x3 whose third row is the sum of the first two (rank 2, like a LoRA product B @ A with
# 3x2 and 2x3 factors), a 4x4 of rank 2 that looks generic, and a full-rank 3x4.
_RANK = [[[1, 2, 0], [2, 3, 1], [3, 5, 1]],
         [[1, 2, 3, 4], [2, 1, 0, -1], [3, 3, 3, 3], [-1, 1, 3, 5]],
         [[1, 0, 2, 1], [0, 1, 1, 2], [1, 1, 0, 1]]]
_A = [[1, 0], [1, 1], [1, 2]]
_VECTORS = [[1, 3, 2], [2, -1, F(1, 2)]]
_SYMMETRIC = [[[2, 1], [1, 1]], [[2, -1, 0], [-1, 2, -1], [0, -1, 2]], [[3, 1, 1], [1, 3, 1], [1, 1, 3]]]
_POINTS = [[0, 0], [2, 1], [1, 3], [3, 4]]

TASKS = (
    TaskDef("dl-024", "linalg", {"matrices": _INVERTIBLE}, inverse_rows, _inverse_prompt, _API, POLICY,
            tags=("inverse", "determinant"), meta={"linalg": "inverse"}),
    TaskDef("dl-025", "linalg", {"X": _X, "y": _Y}, least_squares_rows, _least_squares_prompt, _API, POLICY,
            tags=("least-squares",), meta={"linalg": "least_squares"}),
    TaskDef("dl-026", "linalg", {"matrices": _RANK}, rank_rows, _rank_prompt, _API, POLICY,
            tags=("rank", "low-rank"), meta={"linalg": "rank"}),
    TaskDef("dl-027", "linalg", {"A": _A, "vectors": _VECTORS}, projection_rows, _projection_prompt, _API,
            POLICY, tags=("projection",), meta={"linalg": "projection"}),
    TaskDef("dl-028", "linalg", {"matrices": _SYMMETRIC}, eigenvalue_rows, _eigenvalue_prompt, _API, POLICY,
            tags=("eigenvalues", "irrational"), meta={"linalg": "eigenvalues"}),
    TaskDef("dl-029", "linalg", {"points": _POINTS}, pca_rows, _pca_prompt, _API, POLICY,
            tags=("pca", "eigenvalues", "irrational"), meta={"linalg": "pca"}),
)
