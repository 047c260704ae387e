"""Linear-algebra tasks (dl-024..dl-029): exact rational matrices, least squares, rank,
projections, and eigenvalues of small symmetric matrices (exact, possibly irrational).

References use sympy.Matrix over the rationals (the sandbox has sympy); rational results are
returned as Fractions, irrational eigenvalues as exact sympy expressions. verify recomputes the
rational results independently with exactgrade.rational.matrix.

Families, one per reference: inverse, least_squares, rank, projection, eigenvalues, pca.
Matrices are built with the property the task needs instead of being drawn and tested:
invertible ones as P L U (unit lower L, upper U with a non-zero diagonal), rank-r ones as
B @ A with B = rows of [I_r; R] in random order and A = columns of [I_r, R'] in random order
(full column and row rank, so the product has rank exactly r), full-column-rank designs as
[I; R] @ G with G invertible. Symmetric matrices with exact, irrational but square-root
eigenvalues are H D H^T with D block-diagonal (2x2 symmetric blocks and 1x1 entries) and H a
rational Householder reflection I - 2 v v^T / (v^T v): the characteristic polynomial factors
into quadratics over Q, so sympy gives radicals, never the casus irreducibilis of a generic
cubic.
"""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade import rational
from exactgrade.domains.deeplearning._family import as_int, dl_family, nonzero_dyadic
from exactgrade.domains.deeplearning.common import POLICY, api, prompt
from exactgrade.family import Draw, Reject
from exactgrade.task import Task, TaskDef

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

# ---------------------------------------------------------------------------- constructions


def _small(draw: Draw, nonzero: bool = False) -> F:
    """An entry: a multiple of 1/2 in [-2, 2]."""
    return nonzero_dyadic(draw, -2, 2, 1) if nonzero else draw.dyadic(-2, 2, 1)


def _plain(matrix):
    return [[as_int(F(x)) for x in row] for row in matrix]


def invertible_matrix(draw: Draw, n: int) -> list[list]:
    """P L U: unit lower-triangular L, upper-triangular U with a non-zero diagonal, rows permuted."""
    lower = [[F(int(i == j)) if j >= i else _small(draw, nonzero=True) for j in range(n)] for i in range(n)]
    upper = [[_small(draw, nonzero=True) if j >= i else F(0) for j in range(n)] for i in range(n)]
    product = rational.matmul(lower, upper)
    return _plain([product[i] for i in draw.shuffled(range(n))])


def full_column_rank(draw: Draw, m: int, k: int) -> list[list]:
    """[I_k; R] with its rows shuffled, times an invertible k x k: rank k by construction."""
    stacked = [[F(int(i == j)) for j in range(k)] for i in range(k)]
    stacked += [[_small(draw) for _ in range(k)] for _ in range(m - k)]
    stacked = [stacked[i] for i in draw.shuffled(range(m))]
    return _plain(rational.matmul(stacked, invertible_matrix(draw, k)))


def rank_matrix(draw: Draw, m: int, n: int, r: int) -> list[list]:
    """B @ A with B (m x r) of full column rank and A (r x n) of full row rank: rank exactly r."""
    left = full_column_rank(draw, m, r)
    right = rational.transpose(full_column_rank(draw, n, r))
    return _plain(rational.matmul(left, right))


def householder(draw: Draw, n: int) -> list[list[F]]:
    v = [draw.integer(-2, 2) for _ in range(n)]
    norm = sum(x * x for x in v)
    if norm == 0:
        raise Reject("a zero Householder vector")
    return [[F(int(i == j)) - F(2 * v[i] * v[j], norm) for j in range(n)] for i in range(n)]


def symmetric_with_radical_eigenvalues(draw: Draw, n: int) -> list[list]:
    """H D H^T, D = blocks [[a, b], [b, d]] (b != 0) and 1x1 entries, H a Householder reflection."""
    d = [[F(0)] * n for _ in range(n)]
    i = 0
    while i < n:
        if i + 1 < n and (i == 0 or draw.chance(2, 3)):
            a, c, b = draw.integer(-3, 4), draw.integer(-3, 4), draw.choice((-2, -1, 1, 2, F(1, 2)))
            d[i][i], d[i + 1][i + 1], d[i][i + 1], d[i + 1][i] = F(a), F(c), F(b), F(b)
            i += 2
        else:
            d[i][i] = F(draw.choice((-3, -2, -1, 1, 2, 3, 4)))
            i += 1
    h = householder(draw, n)
    return _plain(rational.matmul(rational.matmul(h, d), h))


# ---------------------------------------------------------------------------- samplers

_SQUARE = {1: (2, 3), 2: (3, 3), 3: (3, 4), 4: (4, 4), 5: (4, 5)}
"""matrix sizes per level"""


def sample_inverse(draw: Draw, level: int) -> dict:
    return {"matrices": [invertible_matrix(draw, draw.integer(*_SQUARE[level])) for _ in range(2)]}


def sample_least_squares(draw: Draw, level: int) -> dict:
    """An intercept and x at level 1-2; x**2 from level 3; a random extra feature from level 4;
    4 + 2 * level observations at distinct x (full column rank)."""
    n = 4 + 2 * level
    xs = sorted(draw.sample(range(-6, 13), n)) if level > 1 else sorted(draw.sample(range(0, 7), n))
    rows = [[1, x, *([x * x] if level >= 3 else []), *([as_int(_small(draw))] if level >= 4 else [])]
            for x in xs]
    if rational.rank(rows) < len(rows[0]):
        raise Reject("the design is rank-deficient")
    return {"X": rows, "y": [as_int(draw.dyadic(-4, 8, 1 if level > 1 else 0)) for _ in xs]}


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


def sample_projection(draw: Draw, level: int) -> dict:
    m = draw.integer(3, 3 + level)
    k = draw.integer(1, min(m - 1, 1 + level))
    count = draw.integer(2, max(2, 1 + level))
    vectors = [[as_int(_small(draw)) for _ in range(m)] for _ in range(count)]
    return {"A": full_column_rank(draw, m, k), "vectors": vectors}


def sample_eigenvalues(draw: Draw, level: int) -> dict:
    count = 2 if level <= 2 else 3
    return {"matrices": [symmetric_with_radical_eigenvalues(draw, draw.integer(*_SQUARE[level]))
                         for _ in range(count)]}


def sample_pca(draw: Draw, level: int) -> dict:
    """4 + 2 * (level - 1) points with coordinates multiples of 1/2**(level // 2) in [-4, 4]."""
    bits = level // 2
    points = [[as_int(draw.dyadic(-4, 4, bits)) for _ in range(2)] for _ in range(4 + 2 * (level - 1))]
    return {"points": points}


def _irrational_eigenvalues(task: Task) -> str | None:
    """The eigen tasks are posed for their exact irrational answers."""
    import sympy

    for row in task.expected["rows"]:
        if all(isinstance(v, sympy.Rational) or type(v) in (int, F) for v in row["eigenvalues"]):
            return "every eigenvalue of a matrix is rational"
    return None


# ---------------------------------------------------------------------------- builders


def _builder(reference, render, kind, tags):
    def build(task_id, inputs):
        return TaskDef(task_id, "linalg", inputs, reference, render, _API, POLICY, tags=tags,
                       meta={"linalg": kind})

    return build


INVERSE = dl_family("inverse", _builder(inverse_rows, _inverse_prompt, "inverse", ("inverse", "determinant")),
                    sample_inverse, "two P L U matrices of size 2-3 / 3 / 3-4 / 4 / 4-5")
LEAST_SQUARES = dl_family(
    "least_squares", _builder(least_squares_rows, _least_squares_prompt, "least_squares", ("least-squares",)),
    sample_least_squares, "4+2*level observations; intercept and x, + x**2 from level 3, + a random feature "
    "from level 4")
RANK = dl_family("rank", _builder(rank_rows, _rank_prompt, "rank", ("rank", "low-rank")),
                 sample_rank, "3/8/9/10/12 matrices up to (3+level)^2, each B @ A of a drawn rank")
PROJECTION = dl_family("projection",
                       _builder(projection_rows, _projection_prompt, "projection", ("projection",)),
                       sample_projection,
                       "A of 3..3+level rows, 1..1+level independent columns; 2..1+level vectors")
EIGENVALUES = dl_family(
    "eigenvalues",
    _builder(eigenvalue_rows, _eigenvalue_prompt, "eigenvalues", ("eigenvalues", "irrational")),
    sample_eigenvalues, "2 (3 from level 3) symmetric H D H^T of size 2-3 / 3 / 3-4 / 4 / 4-5, "
    "eigenvalues with square roots", reject=_irrational_eigenvalues)
PCA = dl_family("pca", _builder(pca_rows, _pca_prompt, "pca", ("pca", "eigenvalues", "irrational")),
                sample_pca, "4+2*(level-1) points, coordinates on a grid of 1, 1, 1/2, 1/2, 1/4",
                reject=_irrational_eigenvalues)

FAMILIES = (INVERSE, LEAST_SQUARES, RANK, PROJECTION, EIGENVALUES, PCA)

# ---------------------------------------------------------------------------- canonical tasks

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
    INVERSE.task("dl-024", {"matrices": _INVERTIBLE}),
    LEAST_SQUARES.task("dl-025", {"X": _X, "y": _Y}),
    RANK.task("dl-026", {"matrices": _RANK}),
    PROJECTION.task("dl-027", {"A": _A, "vectors": _VECTORS}),
    EIGENVALUES.task("dl-028", {"matrices": _SYMMETRIC}),
    PCA.task("dl-029", {"points": _POINTS}),
)
