"""Linear-algebra tasks (dl-024..dl-029): exact rational matrices, least squares, rank,
projections, and eigenvalues of small symmetric matrices (exact, possibly irrational).

References use sympy over the rationals (the sandbox has sympy): exact linear algebra with
sympy's DomainMatrix over QQ, eigenvalues as the roots of the factored characteristic
polynomial (the 2x2 PCA covariance by the closed form); rational results are returned as
Fractions, irrational eigenvalues as exact sympy expressions. verify recomputes the rational
results independently with exactgrade.rational.matrix (Fraction Gauss-Jordan), and checks the
eigenvalues against the trace and the determinant.

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
from math import isqrt, lcm

from exactgrade import rational
from exactgrade.domains.deeplearning._family import as_int, nonzero_dyadic
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
        a = sympy.Matrix([[exact(x) for x in row] for row in rows_of_a]).to_DM().to_field()  # over Q
        inverse = a.inv().to_Matrix()
        rows.append({"det": fraction(a.domain.to_sympy(a.det())),
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

    x = sympy.Matrix([[exact(v) for v in row] for row in X]).to_DM().to_field()  # over Q
    target = sympy.Matrix([exact(v) for v in y]).to_DM().to_field()
    xt = x.transpose()
    w = (xt * x).lu_solve(xt * target)
    residual = target - x * w
    rss = (residual.transpose() * residual).to_Matrix()[0, 0]
    return {"rows": [{"w": [fraction(v) for v in w.to_Matrix()], "rss": fraction(rss)}]}


def rank_rows(matrices):
    from fractions import Fraction

    import sympy

    def exact(q):
        q = Fraction(q)
        return sympy.Rational(q.numerator, q.denominator)

    return {"rows": [{"rank": int(sympy.Matrix([[exact(x) for x in row] for row in m]).to_DM().rank())}
                     for m in matrices]}


def projection_rows(A, vectors):
    from fractions import Fraction

    import sympy

    def exact(q):
        q = Fraction(q)
        return sympy.Rational(q.numerator, q.denominator)

    def fraction(x):
        return Fraction(int(x.p), int(x.q))

    a = sympy.Matrix([[exact(x) for x in row] for row in A]).to_DM().to_field()  # over Q
    at = a.transpose()
    p = (a * (at * a).inv() * at).to_Matrix()
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


def pca_rows(points):
    from fractions import Fraction

    import sympy

    def exact(q):
        q = Fraction(q)
        return sympy.Rational(q.numerator, q.denominator)

    def fraction(x):
        return Fraction(int(x.p), int(x.q))

    data = sympy.Matrix([[exact(x) for x in p] for p in points]).to_DM().to_field()  # over Q
    n = data.shape[0]
    ones = sympy.Matrix.ones(1, n).to_DM().to_field()
    mean = ones * data / n
    centred = data - ones.transpose() * mean
    covariance = (centred.transpose() * centred / n).to_Matrix()
    (sxx, sxy), (_, syy) = covariance.tolist()
    root = sympy.sqrt((sxx - syy) ** 2 + 4 * sxy**2)  # the 2x2 eigenvalues are (trace -+ root) / 2
    eigenvalues = [(sxx + syy - root) / 2, (sxx + syy + root) / 2]
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


def _matmul(a, b) -> list[list[F]]:
    """a @ b exactly, as exactgrade.rational.matmul, but in integers over one common denominator
    per factor (a sampler multiplies many small matrices; Fraction sums cost a gcd per term)."""
    (ia, da), (ib, db) = _scaled(a), _scaled(b)
    columns = list(zip(*ib, strict=True))
    return [[F(sum(x * y for x, y in zip(row, column, strict=True)), da * db) for column in columns]
            for row in ia]


def _scaled(matrix) -> tuple[list[list[int]], int]:
    """(integer matrix, d) with matrix = integer matrix / d."""
    entries = [[x if type(x) is F else F(x) for x in row] for row in matrix]
    d = lcm(*(x.denominator for row in entries for x in row))
    return [[x.numerator * (d // x.denominator) for x in row] for row in entries], d


def _plain(matrix):
    return [[as_int(F(x)) for x in row] for row in matrix]


def invertible_matrix(draw: Draw, n: int) -> list[list]:
    """P L U: unit lower-triangular L, upper-triangular U with a non-zero diagonal, rows permuted."""
    lower = [[F(int(i == j)) if j >= i else _small(draw, nonzero=True) for j in range(n)] for i in range(n)]
    upper = [[_small(draw, nonzero=True) if j >= i else F(0) for j in range(n)] for i in range(n)]
    product = _matmul(lower, upper)
    return _plain([product[i] for i in draw.shuffled(range(n))])


def full_column_rank(draw: Draw, m: int, k: int) -> list[list]:
    """[I_k; R] with its rows shuffled, times an invertible k x k: rank k by construction."""
    stacked = [[F(int(i == j)) for j in range(k)] for i in range(k)]
    stacked += [[_small(draw) for _ in range(k)] for _ in range(m - k)]
    stacked = [stacked[i] for i in draw.shuffled(range(m))]
    return _plain(_matmul(stacked, invertible_matrix(draw, k)))


def rank_matrix(draw: Draw, m: int, n: int, r: int) -> list[list]:
    """B @ A with B (m x r) of full column rank and A (r x n) of full row rank: rank exactly r."""
    left = full_column_rank(draw, m, r)
    right = rational.transpose(full_column_rank(draw, n, r))
    return _plain(_matmul(left, right))


def householder(draw: Draw, n: int) -> list[list[F]]:
    """I - 2 v v^T / (v^T v) for a non-zero integer v (a zero v is drawn again)."""
    for _ in range(64):
        v = [draw.integer(-2, 2) for _ in range(n)]
        norm = sum(x * x for x in v)
        if norm != 0:
            return [[F(int(i == j)) - F(2 * v[i] * v[j], norm) for j in range(n)] for i in range(n)]
    raise Reject("drew only zero Householder vectors")


def is_rational_square(q: F) -> bool:
    """q >= 0 is the square of a rational (numerator and denominator are perfect squares)."""
    return q >= 0 and isqrt(q.numerator) ** 2 == q.numerator and isqrt(q.denominator) ** 2 == q.denominator


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


# ---------------------------------------------------------------------------- samplers

_SQUARE = {1: (2, 3), 2: (3, 3), 3: (3, 4), 4: (4, 4), 5: (4, 5)}
"""matrix sizes per level"""


def _inverse_without_zeros(draw: Draw, n: int) -> list[list]:
    """An invertible matrix whose inverse has no zero entry (a zero would be an undeclared zero
    in the key): such a matrix is drawn again here, before the reference runs."""
    for _ in range(16):
        matrix = invertible_matrix(draw, n)
        if all(x != 0 for row in rational.inverse(matrix) for x in row):
            return matrix
    raise Reject("every drawn matrix has a zero in its inverse")


def sample_inverse(draw: Draw, level: int) -> dict:
    return {"matrices": [_inverse_without_zeros(draw, draw.integer(*_SQUARE[level])) for _ in range(2)]}


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
    """A zero coordinate in a projection or residual would be an undeclared zero in the key, so
    zeros are refused here, before the reference runs: A is drawn again while its projector P has
    a diagonal entry 0 or 1 (P_ii = sum_j P_ij**2, so row i of P is then 0 or e_i, and coordinate
    i of every projection or every residual is 0), a vector while its projection or residual has
    a zero."""
    m = draw.integer(3, 3 + level)
    k = draw.integer(1, min(m - 1, 1 + level))
    count = draw.integer(2, max(2, 1 + level))
    for _ in range(16):
        a = full_column_rank(draw, m, k)
        at = rational.transpose(a)
        projector = _matmul(a, _matmul(rational.inverse(_matmul(at, a)), at))
        if all(0 < projector[i][i] < 1 for i in range(m)):
            break
    else:
        raise Reject("every drawn A has a coordinate its projections or residuals always zero")
    vectors = []
    for _ in range(count):
        for _ in range(16):
            v = [as_int(_small(draw)) for _ in range(m)]
            projected = rational.matvec(projector, v)
            if all(p != 0 and p != x for p, x in zip(projected, v, strict=True)):
                vectors.append(v)
                break
        else:
            raise Reject("every drawn vector has a zero in its projection or residual")
    return {"A": a, "vectors": vectors}


def sample_eigenvalues(draw: Draw, level: int) -> dict:
    count = 2 if level <= 2 else 3
    return {"matrices": [symmetric_with_radical_eigenvalues(draw, draw.integer(*_SQUARE[level]))
                         for _ in range(count)]}


def sample_pca(draw: Draw, level: int) -> dict:
    """4 + 2 * (level - 1) points with coordinates multiples of 1/2**(level // 2) in [-4, 4].
    Points whose covariance has a zero entry or a zero or rational eigenvalue (an undeclared
    zero in the key, or nothing irrational to pose) are refused here, before the reference runs."""
    bits = level // 2
    points = [[as_int(draw.dyadic(-4, 4, bits)) for _ in range(2)] for _ in range(4 + 2 * (level - 1))]
    n = len(points)
    mean = [sum((F(p[j]) for p in points), F(0)) / n for j in range(2)]
    (sxx, sxy), (_, syy) = ([sum(((F(p[i]) - mean[i]) * (F(p[j]) - mean[j]) for p in points), F(0)) / n
                             for j in range(2)] for i in range(2))
    if sxx * syy * sxy == 0 or sxx * syy == sxy * sxy:
        raise Reject("an exact zero in the covariance or its eigenvalues")
    if is_rational_square((sxx - syy) ** 2 + 4 * sxy * sxy):
        raise Reject("every eigenvalue of a matrix is rational")
    return {"points": points}


def _irrational_eigenvalues(task: Task) -> str | None:
    """The eigen tasks are posed for their exact irrational answers (level 1; the upper levels ask
    other questions of matrices built with irrational eigenvalues)."""
    import sympy

    if task.level not in (None, 1):
        return None
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
