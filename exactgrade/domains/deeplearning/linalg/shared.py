"""What two or more linalg families use (written once)."""

from __future__ import annotations

from fractions import Fraction as F
from math import isqrt, lcm

from exactgrade.domains.deeplearning._family import as_int, dl_family, nonzero_dyadic, single_row
from exactgrade.domains.deeplearning.common import POLICY, api, prompt
from exactgrade.family import Draw
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


API = api(CONVENTIONS)


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


def is_rational_square(q: F) -> bool:
    """q >= 0 is the square of a rational (numerator and denominator are perfect squares)."""
    return q >= 0 and isqrt(q.numerator) ** 2 == q.numerator and isqrt(q.denominator) ** 2 == q.denominator


SQUARE = {1: (2, 3), 2: (3, 3), 3: (3, 4), 4: (4, 4), 5: (4, 5)}
"""matrix sizes per level"""


def irrational_eigenvalues(task: Task) -> str | None:
    """The eigen tasks are posed for their exact irrational answers (level 1; the upper levels ask
    other questions of matrices built with irrational eigenvalues)."""
    import sympy

    if task.level not in (None, 1):
        return None
    for row in task.expected["rows"]:
        if all(isinstance(v, sympy.Rational) or type(v) in (int, F) for v in row["eigenvalues"]):
            return "every eigenvalue of a matrix is rational"
    return None


def _builder(reference, render, kind, tags):
    def build(task_id, inputs):
        return TaskDef(task_id, "linalg", inputs, reference, render, API, POLICY, tags=tags,
                       meta={"linalg": kind})

    return build

BASICS = (
    "Linear-algebra conventions. A matrix is a list of rows (lists of fractions.Fraction or int); a vector "
    "is "
    "a list. All arithmetic is exact over the rationals (sympy.Matrix with sympy.Rational entries, or "
    "fractions.Fraction by hand); rational results are given as Fraction (or int), irrational ones as exact "
    "sympy expressions (e.g. 3/2 - sqrt(5)/2). Positions in a list, rows and columns are counted from 1 in "
    "answers."
)

UPPER_API = api(BASICS)


def linalg_question_rows(question, **given):
    def answer(question, **given):
        from fractions import Fraction

        import sympy

        def matrix(rows):
            return sympy.Matrix([[sympy.Rational(Fraction(x).numerator, Fraction(x).denominator) for x in row]
                                 for row in rows])

        def fraction(x):
            return Fraction(int(x.p), int(x.q))

        def least_squares(x, y):
            w = (x.T * x).LUsolve(x.T * y)
            r = y - x * w
            return w, (r.T * r)[0, 0]

        def eigenvalues(m):
            return sorted(m.eigenvals(multiple=True), key=lambda v: sympy.N(v, 50))

        def substituted(a, i, j, t):
            m = matrix(a)
            m[i, j] = t
            return m

        if question == "solve":
            return {"rows": [{"x": [fraction(v) for v in matrix(a).LUsolve(matrix([[x] for x in b]))]}
                             for a, b in zip(given["matrices"], given["vectors"], strict=True)]}
        if question == "product":
            a, b = matrix(given["A"]), matrix(given["B"])
            ab = a * b
            return {"det": fraction(ab.det()), "trace_inverse": fraction(ab.inv().trace())}
        if question == "singular_entry":
            i, j = given["entry"][0] - 1, given["entry"][1] - 1
            t = sympy.Symbol("t")
            det = sympy.expand(substituted(given["A"], i, j, t).det())
            slope = det.coeff(t, 1)
            return {"t": None if slope == 0 else fraction(-det.coeff(t, 0) / slope)}
        if question == "minimax_entry":  # every inverse entry is (a + b t) / det(t), det affine in t
            i, j = given["entry"][0] - 1, given["entry"][1] - 1
            t = sympy.Symbol("t")
            m = substituted(given["A"], i, j, t)
            det = sympy.Poly(m.det(), t)
            tops = [sympy.Poly(v, t) for v in m.adjugate()]
            candidates = set()
            for k, top in enumerate(tops):
                candidates.update(top.real_roots())  # where one entry is 0 (a linear numerator)
                for other in tops[k + 1:]:
                    for side in (top - other, top + other):  # where two entries have the same size
                        if side.degree() == 1:
                            candidates.update(side.real_roots())
            scored = []
            for x in candidates:
                if det.eval(x) != 0:
                    sizes = [abs(top.eval(x) / det.eval(x)) for top in tops]
                    scored.append((max(sizes), x, sizes))
            value, best, sizes = min(scored, key=lambda s: (s[0], s[1]))
            n = m.rows
            reach = [[k // n + 1, k % n + 1] for k, v in enumerate(sizes) if v == value]
            return {"t": fraction(best), "max_entry": fraction(value), "entries": reach}
        if question == "prediction":
            x, y = matrix(given["X"]), matrix([[v] for v in given["y"]])
            w, rss = least_squares(x, y)
            mean = sum(y) / len(y)
            tss = sum((v - mean) ** 2 for v in y)
            new = matrix([given["x_new"]])
            return {"prediction": fraction((new * w)[0, 0]), "r2": fraction(1 - rss / tss)}
        if question == "leave_one_out":
            scored = []
            for k in range(len(given["X"])):
                keep = [r for n, r in enumerate(given["X"]) if n != k]
                ys = [v for n, v in enumerate(given["y"]) if n != k]
                scored.append((least_squares(matrix(keep), matrix([[v] for v in ys]))[1], k + 1))
            rss, k = min(scored)
            return {"drop": k, "rss": fraction(rss)}
        if question == "lasso_path":  # the homotopy: on each stretch w is affine in lambda
            xs = [[Fraction(v) for v in row] for row in given["X"]]
            y = [Fraction(v) for v in given["y"]]
            p = len(xs[0])
            col = [[row[j] for row in xs] for j in range(p)]

            def dot(u, v):
                return sum((a * b for a, b in zip(u, v, strict=True)), Fraction(0))

            def solved(rhs):
                gram = sympy.Matrix([[dot(col[i], col[j]) for j in active] for i in active])
                return [fraction(v) for v in gram.LUsolve(sympy.Matrix(rhs))]

            corr = [dot(c, y) for c in col]
            lam = max(abs(c) for c in corr)
            active = sorted(j for j in range(p) if abs(corr[j]) == lam)
            signs = {j: 1 if corr[j] > 0 else -1 for j in active}
            rows = [{"lambda": lam, "support_below": [j + 1 for j in active], "w": [Fraction(0)] * p}]
            while True:
                fixed = solved([dot(col[i], y) for i in active])  # w_active(lambda) = fixed - lambda * slope
                slope = solved([signs[i] for i in active])
                fit_fixed = [sum((fixed[k] * col[j][r] for k, j in enumerate(active)), Fraction(0))
                             for r in range(len(y))]
                fit_slope = [sum((slope[k] * col[j][r] for k, j in enumerate(active)), Fraction(0))
                             for r in range(len(y))]
                events = []
                for j in range(p):
                    if j in active:  # a weight reaches 0 and leaves
                        k = active.index(j)
                        if slope[k] != 0 and 0 < fixed[k] / slope[k] < lam:
                            events.append((fixed[k] / slope[k], j, 0))
                        continue
                    base = dot(col[j], [v - f for v, f in zip(y, fit_fixed, strict=True)])
                    rate = dot(col[j], fit_slope)  # its correlation with the residual: base + lambda * rate
                    for sign in (1, -1):  # reaches +lambda or -lambda and joins with that sign
                        if 1 - sign * rate != 0 and 0 < sign * base / (1 - sign * rate) < lam:
                            events.append((sign * base / (1 - sign * rate), j, sign))
                if not events:
                    break
                lam = max(e[0] for e in events)
                w = [Fraction(0)] * p
                for k, j in enumerate(active):
                    w[j] = fixed[k] - lam * slope[k]
                for at, j, sign in events:
                    if at == lam and sign == 0:
                        active.remove(j)
                        del signs[j]
                    elif at == lam:
                        active = sorted([*active, j])
                        signs[j] = sign
                rows.append({"lambda": lam, "support_below": [j + 1 for j in active], "w": w})
            return {"rows": rows}
        if question == "nullity":
            rows = []
            for a in given["matrices"]:
                r = matrix(a).rank()
                rows.append({"nullity": len(a[0]) - r, "left_nullity": len(a) - r})
            return {"rows": rows}
        if question == "product_rank":
            return {"rows": [{"rank": (matrix(pair["A"]) * matrix(pair["B"])).rank()}
                             for pair in given["products"]]}
        if question == "spanning_prefix":
            rows = []
            for a in given["matrices"]:
                m = matrix(a)
                full = m.rank()
                rows.append({"k": next(k for k in range(1, m.cols + 1) if m[:, :k].rank() == full)})
            return {"rows": rows}
        if question == "essential_columns":
            rows = []
            for a in given["matrices"]:
                m = matrix(a)
                full = m.rank()
                rows.append({"essential": sum(1 for c in range(m.cols)
                                              if m[:, [k for k in range(m.cols) if k != c]].rank() < full)})
            return {"rows": rows}
        if question == "distance":
            a = matrix(given["A"])
            p = a * (a.T * a).inv() * a.T
            rows = []
            for v in given["vectors"]:
                vector = matrix([[x] for x in v])
                projected = p * vector
                residual = vector - projected
                rows.append({"distance_sq": fraction((residual.T * residual)[0, 0]),
                             "cos_sq": fraction((projected.T * projected)[0, 0] / (vector.T * vector)[0, 0])})
            return {"rows": rows}
        if question == "closest_vector":
            a = matrix(given["A"])
            p = a * (a.T * a).inv() * a.T
            scored = []
            for k, v in enumerate(given["vectors"], start=1):
                residual = matrix([[x] for x in v]) - p * matrix([[x] for x in v])
                scored.append(((residual.T * residual)[0, 0], k))
            d, k = min(scored)
            return {"closest": k, "distance_sq": fraction(d)}
        if question == "drop_column":
            a = matrix(given["A"])
            scored = []
            for c in range(a.cols):
                kept = a[:, [k for k in range(a.cols) if k != c]]
                p = kept * (kept.T * kept).inv() * kept.T
                total = sympy.Integer(0)
                for v in given["vectors"]:
                    residual = matrix([[x] for x in v]) - p * matrix([[x] for x in v])
                    total += (residual.T * residual)[0, 0]
                scored.append((total, c + 1))
            total, c = min(scored)
            return {"drop": c, "total_sq": fraction(total)}
        if question == "unit_maximum":
            return {"rows": [{"max": eigenvalues(matrix(m))[-1]} for m in given["matrices"]]}
        if question == "radius":
            rows = []
            for m in given["matrices"]:
                values = eigenvalues(matrix(m))
                radius = max(values, key=lambda v: sympy.N(abs(v), 50))
                rows.append({"spectral_radius": sympy.Abs(radius) if sympy.N(radius, 50) < 0 else radius,
                             "sum_squares": fraction(sympy.expand(sum(v**2 for v in values)))})
            return {"rows": rows}
        if question == "shift":
            rows = []
            for m in given["matrices"]:
                low = eigenvalues(matrix(m))[0]
                rows.append({"shift": int(sympy.floor(-low)) + 1})
            return {"rows": rows}
        if question == "count_below":
            rows = []
            for m, c in zip(given["matrices"], given["thresholds"], strict=True):
                c = sympy.Rational(Fraction(c).numerator, Fraction(c).denominator)
                rows.append({"below": sum(1 for v in eigenvalues(matrix(m)) if sympy.N(v - c, 50) < 0)})
            return {"rows": rows}
        # PCA questions: the population covariance of the points
        data = matrix(given["points"])
        n = data.rows
        mean = sympy.ones(1, n) * data / n
        centred = data - sympy.ones(n, 1) * mean
        cov = centred.T * centred / n
        if question == "max_variance":
            top = eigenvalues(cov)[-1]
            return {"variance": top, "ratio": sympy.radsimp(top / cov.trace())}
        if question == "along":
            u = matrix([[x] for x in given["direction"]])
            along = (u.T * cov * u)[0, 0] / (u.T * u)[0, 0]
            return {"variance": fraction(along), "rest": fraction(cov.trace() - along)}
        if question == "grid_direction":
            from math import gcd

            bound = given["bound"]
            best = None
            for a in range(1, bound + 1):
                for b in range(-bound, bound + 1):
                    if b == 0 or gcd(a, abs(b)) != 1:
                        continue
                    u = matrix([[a], [b]])
                    captured = (u.T * cov * u)[0, 0] / (u.T * u)[0, 0]
                    if best is None or captured > best[0]:
                        best = (captured, [a, b])
            return {"direction": best[1], "ratio": fraction(best[0] / cov.trace())}
        scored = []
        for k, d in enumerate(given["directions"], start=1):
            u = matrix([[x] for x in d])
            scored.append((-(u.T * cov * u)[0, 0] / (u.T * u)[0, 0], k))
        value, k = min(scored)
        return {"best": k, "ratio": fraction(-value / cov.trace())}

    out = answer(question, **given)
    return out if list(out) == ["rows"] else {"rows": [out]}


QUESTIONS = {
    "solve": ("For each square matrix A in `matrices` and the vector b at the same position in `vectors`, "
              "give "
              "the vector x with A x = b, exactly.",
              '{"rows": [{"x": [Fraction, ...]}, ...]}  (one row per matrix, in order)', "dimensionless"),
    "product": ("Let C = A B (the matrix product). Give the determinant of C and the trace (sum of the "
                "diagonal entries) of the inverse of C, exactly.",
                '{"det": Fraction, "trace_inverse": Fraction}', "dimensionless"),
    "singular_entry": ("The entry of A at row entry[0], column entry[1] (counted from 1) is replaced by an "
                       "unknown t. Give the value of t for which the matrix is singular, or None if it is "
                       "invertible for every t or singular for every t.",
                       '{"t": Fraction or None}', "dimensionless"),
    "minimax_entry": ("The entry of A at row entry[0], column entry[1] (counted from 1) is replaced by a "
                      "real number t (every other entry stays). Among the t for which the matrix is "
                      "invertible, which makes the largest absolute value of an entry of the inverse "
                      "smallest? On a tie, the smallest t. Give t, that largest absolute entry, and every "
                      "entry of the inverse that reaches it at that t, as [row, column] counted from 1, in "
                      "row-major order.",
                      '{"t": Fraction, "max_entry": Fraction, "entries": [[int, int], ...]}',
                      "dimensionless"),
    "ls_words": ("Choose the coefficient vector w that makes the sum over observations of (y_k - (X w)_k)**2 "
                 "as small as possible (X already contains a column of ones for the intercept). Give w and "
                 "that smallest sum, exactly.",
                 '{"rows": [{"w": [Fraction, ...], "rss": Fraction}]}  (a single row)',
                 "w in units of y per unit of each column of X; rss in squared units of y"),
    "prediction": ("Fit y ~ X w by ordinary least squares (X already contains a column of ones for the "
                   "intercept). Give the fitted model's prediction for a new observation whose row of X is "
                   "`x_new`, and the coefficient of determination R**2 = 1 - (residual sum of squares) / "
                   "(sum "
                   "of squares of y about its mean), exactly.",
                   '{"prediction": Fraction, "r2": Fraction}',
                   "prediction in units of y; R**2 dimensionless"),
    "leave_one_out": ("Fit y ~ X w by ordinary least squares with one observation left out (X already "
                      "contains a column of ones). Which observation, counted from 1, when left out gives "
                      "the smallest residual sum of squares on the remaining ones? On a tie, the smallest "
                      "number. Give it and that residual sum of squares.",
                      '{"drop": int, "rss": Fraction}', "rss in squared units of y"),
    "lasso_path": ("The lasso: for a penalty lambda > 0, w(lambda) minimises 1/2 * sum_k (y_k - (X w)_k)**2 "
                   "+ lambda * sum_j |w_j| (no intercept: X has no column of ones; X has full column rank, "
                   "so the minimiser is unique). As lambda decreases from infinity to 0, the set of j "
                   "with w_j(lambda) != 0 (the support) changes at finitely many values of lambda. Give "
                   "every such value, in decreasing order, with the support just below it (column numbers "
                   "counted from 1, increasing) and w at that value of lambda.",
                   '{"rows": [{"lambda": Fraction, "support_below": [int, ...], "w": [Fraction, ...]}, '
                   '...]}  '
                   "(one row per value, largest lambda first)",
                   "lambda in squared units of y; w in units of y per unit of X"),
    "projection_words": ("For each vector v in `vectors`, give the point of the column space of A (the set "
                         "of all A c) closest to v in Euclidean distance, and v minus that point, exactly.",
                         '{"rows": [{"projection": [Fraction, ...], "residual": [Fraction, ...]}, ...]}  '
                         "(one row per vector, in order)", "the units of the vectors"),
    "distance": ("For each vector v in `vectors`, give its squared Euclidean distance to the column space of "
                 "A (the set of all A c), and the squared cosine of the angle between v and the closest "
                 "point of that space to v.",
                 '{"rows": [{"distance_sq": Fraction, "cos_sq": Fraction}, ...]}  (one row per vector)',
                 "squared units of the vectors; cos_sq dimensionless"),
    "closest_vector": ("Which vector in `vectors` is closest to the column space of A (the set of all A c) "
                       "in Euclidean distance? On a tie, the earliest. Give its position, counted from 1, "
                       "and its squared distance.", '{"closest": int, "distance_sq": Fraction}',
                       "squared units of the vectors"),
    "drop_column": ("One column of A is to be deleted. After deleting it, the sum over the vectors in "
                    "`vectors` of their squared Euclidean distances to the column space of the remaining "
                    "matrix should be as small as possible. Which column, counted from 1? On a tie, the "
                    "smallest number. Give it and that sum.", '{"drop": int, "total_sq": Fraction}',
                    "squared units of the vectors"),
    "nullity": ("For each matrix A (m rows, n columns) in `matrices`, give the dimension of the set of "
                "vectors x with A x = 0, and the dimension of the set of vectors y with y^T A = 0.",
                '{"rows": [{"nullity": int, "left_nullity": int}, ...]}  (one row per matrix)', "dimensions"),
    "product_rank": ("For each pair in `products`, give the rank of the product A B, over the rationals.",
                     '{"rows": [{"rank": int}, ...]}  (one row per pair)', "dimensionless"),
    "spanning_prefix": ("For each matrix in `matrices`, give the smallest k such that its first k columns "
                        "span the same space as all of its columns.",
                        '{"rows": [{"k": int}, ...]}  (one row per matrix)', "a number of columns"),
    "essential_columns": ("For each matrix in `matrices`, give how many of its columns cannot be deleted "
                          "(on its own, the other columns kept) without lowering the rank.",
                          '{"rows": [{"essential": int}, ...]}  (one row per matrix)', "a number of columns"),
    "unit_maximum": ("For each symmetric matrix M in `matrices`, give the largest value of x^T M x over the "
                 "vectors x with x^T x = 1, exactly (it may be irrational).",
                 '{"rows": [{"max": exact value}, ...]}  (one row per matrix)', "dimensionless"),
    "radius": ("For each symmetric matrix M in `matrices`, give the largest |lambda| over the eigenvalues "
               "lambda of M (exact, possibly irrational), and the sum of the squares of its eigenvalues "
               "(with multiplicity).",
               '{"rows": [{"spectral_radius": exact value, "sum_squares": Fraction}, ...]}', "dimensionless"),
    "shift": ("For each symmetric matrix M in `matrices`, give the smallest integer s such that M + s I is "
              "positive definite (x^T (M + s I) x > 0 for every non-zero x).",
              '{"rows": [{"shift": int}, ...]}  (one row per matrix)', "dimensionless"),
    "count_below": ("For each symmetric matrix M in `matrices` and the number c at the same position in "
                    "`thresholds`, give how many eigenvalues of M (counted with multiplicity) are strictly "
                    "less than c.",
                    '{"rows": [{"below": int}, ...]}  (one row per matrix)', "a count"),
    "max_variance": ("The points in `points` are projected onto a line through their mean with unit "
                     "direction u, and the population variance (1/n normalisation) of the projections is "
                     "taken. Give the largest such variance over all u (exact, possibly irrational), and "
                     "that variance as a fraction of the sum of the variances of the two coordinates.",
                     '{"variance": exact value, "ratio": exact value}',
                     "variance in squared point units; the ratio is dimensionless"),
    "along": ("Give the population variance (1/n normalisation) of the points in `points` projected onto the "
              "line through their mean with direction `direction` (the coordinate along the unit vector "
              "direction / ||direction||), and the variance that is left: the sum of the variances of the "
              "two coordinates minus that variance.",
              '{"variance": Fraction, "rest": Fraction}', "squared point units"),
    "best_direction": ("Of the directions in `directions`, which captures the largest population variance "
                       "(1/n normalisation) of the points in `points` projected onto it (the coordinate "
                       "along the unit vector direction / ||direction||)? On a tie, the earliest. Give its "
                       "position, counted from 1, and the captured variance as a fraction of the sum of "
                       "the variances of the two coordinates.",
                       '{"best": int, "ratio": Fraction}', "the ratio is dimensionless"),
    "grid_direction": ("Among the directions [a, b] with integers 1 <= a <= `bound`, b non-zero with "
                       "|b| <= `bound` and gcd(a, |b|) = 1, which captures the largest population variance "
                       "(1/n normalisation) of the points in `points` projected onto it (the coordinate "
                       "along [a, b] / ||[a, b]||)? On a tie, the smallest a, then the smallest b. Give it "
                       "and the captured variance as a fraction of the sum of the variances of the two "
                       "coordinates.", '{"direction": [int, int], "ratio": Fraction}',
                       "the ratio is dimensionless"),
}


GIVEN = {"matrices": "list of matrices (lists of rows of Fraction)", "vectors": "list of vectors",
          "A": "matrix", "B": "matrix", "entry": "[row, column], counted from 1",
          "X": "design matrix, one row per observation", "y": "observed targets",
          "x_new": "a new row of X", "bound": "the bound",
          "products": "list of dicts {'A': matrix, 'B': matrix}", "thresholds": "list of numbers c",
          "points": "list of points [x, y] with Fraction coordinates", "direction": "a direction [a, b]",
          "directions": "list of directions [a, b]"}


def renderer(name):
    def render(inputs):
        question, shape, units = QUESTIONS[name]
        variables = {k: (d, inputs[k]) for k, d in GIVEN.items() if k in inputs}
        if "question" in inputs:
            variables["question"] = ("the question asked, as a word", name)
        return prompt(question, variables, single_row(shape), units)

    return render


ZERO_COUNT = ("a count in the answer is exactly 0 (a full-rank matrix has nullity 0; a threshold below "
               "every eigenvalue has none below it): that count is the answer")


COUNTS = {"nullity": ZERO_COUNT, "count_below": ZERO_COUNT,
           "essential_columns": "a count in the answer is exactly 0 (a matrix whose every column lies in the "
                                "span of the others has no essential column): that count is the answer"}


RENDER = {name: renderer(name) for name in QUESTIONS}


def build(task_id, inputs):
    if "question" not in inputs:  # level 2 of least squares and projection: level 1's reference
        if "X" in inputs:
            return TaskDef(task_id, "linalg", inputs, least_squares_rows, RENDER["ls_words"], UPPER_API,
                           POLICY, tags=("least-squares", "words"), meta={"linalg": "least_squares"})
        return TaskDef(task_id, "linalg", inputs, projection_rows, RENDER["projection_words"], UPPER_API,
                       POLICY, tags=("projection", "words"), meta={"linalg": "projection"})
    name = inputs["question"]
    zero_reason = None
    if name in COUNTS:
        rows = linalg_question_rows(**inputs)["rows"]
        if any(v == 0 for row in rows for v in row.values()):
            zero_reason = COUNTS[name]
    if name == "lasso_path":
        zero_reason = ("the weights outside the support are exactly 0 (at the largest lambda every weight "
                       "is): the lasso's sparsity")
    return TaskDef(task_id, "linalg", inputs, linalg_question_rows, RENDER[name], UPPER_API, POLICY,
                   tags=("linalg", name), zero_reason=zero_reason, meta={"linalg_question": name})


def linalg_family(name, build_first, first, levels, upper_sample, **rules):
    def sample(draw: Draw, level: int) -> dict:
        return first(draw, level) if level == 1 else upper_sample(draw, level)

    upper = {level: build for level in (2, 3, 4, 5)}  # this module's builder of levels 2-5
    return dl_family(name, build_first, sample, levels, upper=upper, **rules)
