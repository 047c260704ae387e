"""Levels 2-5 of the linear-algebra families: the quantity described instead of named, composed,
searched over a parameter or a choice, and designed under constraints.

References are self-contained sandbox programs (Fractions and sympy); checks.py recomputes each
(``meta["linalg_question"]``) another way with exactgrade.rational (Fraction Gauss-Jordan), exact
LDL^T pivots (Sylvester's inertia) or numpy eigenvalues with a margin.
"""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade.domains.deeplearning import linalg as _base
from exactgrade.domains.deeplearning._family import answer_field, dl_family, single_row
from exactgrade.domains.deeplearning.common import POLICY, api, prompt
from exactgrade.domains.deeplearning.linalg import (
    _builder,
    _eigenvalue_prompt,
    _inverse_prompt,
    _irrational_eigenvalues,
    _least_squares_prompt,
    _pca_prompt,
    _projection_prompt,
    _rank_prompt,
    eigenvalue_rows,
    inverse_rows,
    least_squares_rows,
    pca_rows,
    projection_rows,
    rank_rows,
)
from exactgrade.family import Branch, Draw, Reject
from exactgrade.task import TaskDef

BASICS = (
    "Linear-algebra conventions. A matrix is a list of rows (lists of fractions.Fraction or int); a vector "
    "is "
    "a list. All arithmetic is exact over the rationals (sympy.Matrix with sympy.Rational entries, or "
    "fractions.Fraction by hand); rational results are given as Fraction (or int), irrational ones as exact "
    "sympy expressions (e.g. 3/2 - sqrt(5)/2). Positions in a list, rows and columns are counted from 1 in "
    "answers."
)

_API = api(BASICS)


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


# ---------------------------------------------------------------------------- prompts

_QUESTIONS = {
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
_GIVEN = {"matrices": "list of matrices (lists of rows of Fraction)", "vectors": "list of vectors",
          "A": "matrix", "B": "matrix", "entry": "[row, column], counted from 1",
          "X": "design matrix, one row per observation", "y": "observed targets",
          "x_new": "a new row of X", "bound": "the bound",
          "products": "list of dicts {'A': matrix, 'B': matrix}", "thresholds": "list of numbers c",
          "points": "list of points [x, y] with Fraction coordinates", "direction": "a direction [a, b]",
          "directions": "list of directions [a, b]"}
_CONVENTIONS = {
    "ls_words": BASICS, "projection_words": BASICS,
}


def _renderer(name):
    def render(inputs):
        question, shape, units = _QUESTIONS[name]
        variables = {k: (d, inputs[k]) for k, d in _GIVEN.items() if k in inputs}
        if "question" in inputs:
            variables["question"] = ("the question asked, as a word", name)
        return prompt(question, variables, single_row(shape), units)

    return render


_ZERO_COUNT = ("a count in the answer is exactly 0 (a full-rank matrix has nullity 0; a threshold below "
               "every eigenvalue has none below it): that count is the answer")
_COUNTS = {"nullity": _ZERO_COUNT, "count_below": _ZERO_COUNT,
           "essential_columns": "a count in the answer is exactly 0 (a matrix whose every column lies in the "
                                "span of the others has no essential column): that count is the answer"}
_RENDER = {name: _renderer(name) for name in _QUESTIONS}


def build(task_id, inputs):
    from exactgrade.domains.deeplearning import linalg

    if "question" not in inputs:  # level 2 of least squares and projection: level 1's reference
        if "X" in inputs:
            return TaskDef(task_id, "linalg", inputs, linalg.least_squares_rows, _RENDER["ls_words"], _API,
                           POLICY, tags=("least-squares", "words"), meta={"linalg": "least_squares"})
        return TaskDef(task_id, "linalg", inputs, linalg.projection_rows, _RENDER["projection_words"], _API,
                       POLICY, tags=("projection", "words"), meta={"linalg": "projection"})
    name = inputs["question"]
    zero_reason = None
    if name in _COUNTS:
        rows = linalg_question_rows(**inputs)["rows"]
        if any(v == 0 for row in rows for v in row.values()):
            zero_reason = _COUNTS[name]
    if name == "lasso_path":
        zero_reason = ("the weights outside the support are exactly 0 (at the largest lambda every weight "
                       "is): the lasso's sparsity")
    return TaskDef(task_id, "linalg", inputs, linalg_question_rows, _RENDER[name], _API, POLICY,
                   tags=("linalg", name), zero_reason=zero_reason, meta={"linalg_question": name})


# ---------------------------------------------------------------------------- samplers


def _small(draw: Draw) -> F:
    return draw.dyadic(-2, 2, 1)


def sample_inverse(draw: Draw, level: int) -> dict:
    from exactgrade.domains.deeplearning.linalg import _plain, invertible_matrix

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


def sample_least_squares(draw: Draw, level: int) -> dict:
    from exactgrade.domains.deeplearning.linalg import sample_least_squares as level_one

    base = level_one(draw, 3 if level >= 4 else 2)
    if level == 2:
        return base
    if level == 3:
        x_new = [1, draw.integer(-6, 12), *([] if len(base["X"][0]) == 2 else [0])]
        if len(x_new) == 3:
            x_new[2] = x_new[1] ** 2
        return {"question": "prediction", **base, "x_new": x_new}
    if level == 4:
        return {"question": "leave_one_out", **base}
    return sample_lasso(draw)


def lasso_mistake(x, y) -> list[F]:
    """least_squares L5's named mistake: soft-thresholding as if the columns were orthogonal, so each
    column would join at lambda = |X_j . y| (the change points would be those correlations)."""
    cols = [[F(row[j]) for row in x] for j in range(len(x[0]))]
    return sorted({abs(sum((a * F(b) for a, b in zip(c, y, strict=True)), F(0))) for c in cols}, reverse=True)


def sample_lasso(draw: Draw) -> dict:
    """3 columns of 5-6 small integers (full rank, columns correlated), y small integers; every change
    of the support a single event (no two at one lambda), two to five of them, and the orthogonal-design
    mistake wrong."""
    from exactgrade.rational import rank

    n = draw.integer(5, 6)
    x = [[draw.integer(-3, 3) for _ in range(3)] for _ in range(n)]
    y = [draw.integer(-6, 6) for _ in range(n)]
    if rank(x) < 3:
        raise Reject("X is not of full column rank")
    inputs = {"question": "lasso_path", "X": x, "y": y}
    rows = linalg_question_rows(**inputs)["rows"]
    if len({r["lambda"] for r in rows}) != len(rows) or not 2 <= len(rows) <= 5:
        raise Reject("too few or too many changes of the support")
    steps = zip(rows, rows[1:], strict=False)
    if any(len(set(a["support_below"]) ^ set(b["support_below"])) != 1 for a, b in steps) \
            or len(rows[0]["support_below"]) != 1:
        raise Reject("two weights join or leave at one lambda")
    if [r["lambda"] for r in rows] == lasso_mistake(x, y)[:len(rows)]:
        raise Reject("the orthogonal-design mistake gives the key")
    return inputs


def sample_rank(draw: Draw, level: int) -> dict:
    from exactgrade import rational
    from exactgrade.domains.deeplearning.linalg import rank_matrix

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
    from exactgrade.domains.deeplearning.linalg import _matmul, _plain, full_column_rank

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


def sample_projection(draw: Draw, level: int) -> dict:
    from exactgrade.domains.deeplearning.linalg import sample_projection as level_one

    base = level_one(draw, 3 if level == 5 else 2)
    if level == 2:
        return base
    if level == 5 and len(base["A"][0]) < 2:
        raise Reject("one column: nothing to choose")
    name = {3: "distance", 4: "closest_vector", 5: "drop_column"}[level]
    if level == 4 and len(base["vectors"]) < 3:
        base["vectors"] = base["vectors"] + [[draw.integer(-2, 2) for _ in base["A"]]]
    return {"question": name, **base}


def sample_eigenvalues(draw: Draw, level: int) -> dict:
    from exactgrade.domains.deeplearning.linalg import symmetric_with_radical_eigenvalues

    matrices = [symmetric_with_radical_eigenvalues(draw, draw.integer(2, 4)) for _ in range(3)]
    name = {2: "unit_maximum", 3: "radius", 4: "shift", 5: "count_below"}[level]
    extra = {"thresholds": [draw.integer(-3, 4) + F(1, 2) for _ in matrices]} if level == 5 else {}
    return {"question": name, "matrices": matrices, **extra}


def sample_pca(draw: Draw, level: int) -> dict:
    from exactgrade.domains.deeplearning.linalg import sample_pca as level_one

    base = level_one(draw, 2)
    if level == 2:
        return {"question": "max_variance", **base}
    if level == 3:
        direction = [draw.integer(1, 3), draw.choice((-2, -1, 1, 2, 3))]
        return {"question": "along", **base, "direction": direction}
    if level == 4:
        directions = draw.sample([[1, 0], [0, 1], [1, 1], [1, -1], [2, 1], [1, 2], [2, -1], [1, -2], [3, 1],
                                  [1, 3]], 5)
        return {"question": "best_direction", **base, "directions": directions}
    return {"question": "grid_direction", **base, "bound": draw.integer(2, 4)}


# ---------------------------------------------------------------------------- families
# (here, not in linalg.py: this module sits above the level-1 module, never the other way round)


def _linalg_family(name, build_first, first, levels, upper_sample, **rules):
    def sample(draw: Draw, level: int) -> dict:
        return first(draw, level) if level == 1 else upper_sample(draw, level)

    upper = {level: build for level in (2, 3, 4, 5)}  # this module's builder of levels 2-5
    return dl_family(name, build_first, sample, levels, upper=upper, **rules)


def _lasso_leaves(task):
    rows = task.expected["rows"] if task.inputs.get("question") == "lasso_path" else []
    steps = zip(rows, rows[1:], strict=False)
    return any(len(b["support_below"]) < len(a["support_below"]) for a, b in steps)


def _none(key, levels):
    return lambda task: task.level in levels and answer_field(task, key) is None


INVERSE = _linalg_family(
    "inverse", _builder(inverse_rows, _inverse_prompt, "inverse", ("inverse", "determinant")),
    _base.sample_inverse,
    "L1: determinant and inverse of two P L U matrices. L2 (derive): the solution of A x = b (no inverse "
    "asked). L3 (compose): det(A B) and the trace of (A B)^-1. L4 (inverse): the value of one entry that "
    "makes A singular (None when the determinant does not depend on it). L5 (regimes): the real value of one "
    "entry that makes the largest absolute entry of the inverse smallest (each inverse entry is a ratio of "
    "affine functions of it with one denominator, so the optimum is an exact rational where two entries "
    "cross or one vanishes; no grid finds it), that value and the entries that bind.",
    sample_inverse, branches=(Branch("the determinant does not depend on the entry", _none("t", (4,)),
                                       F(1, 30), (4,)),))
LEAST_SQUARES = _linalg_family(
    "least_squares", _builder(least_squares_rows, _least_squares_prompt, "least_squares", ("least-squares",)),
    _base.sample_least_squares,
    "L1: OLS weights and rss, normal equations stated. L2 (derive): the same, asked as the minimiser of the "
    "squared error (no normal equations). L3 (compose): a prediction at a new row and R**2. L4 (search): the "
    "observation whose removal leaves the smallest rss, ties to the smallest. L5 (regimes): the whole lasso "
    "path of three correlated columns: every penalty at which the support changes (columns join, and in "
    "some instances one leaves), the support below it and the weights there, exact rationals at the regime "
    "boundaries (the KKT conditions derived, no grid finds them); soft-thresholding as if the columns were "
    "orthogonal never gives the key.", sample_least_squares,
    branches=(Branch("a weight leaves the support", _lasso_leaves, F(1, 50), (5,)),))
RANK = _linalg_family(
    "rank", _builder(rank_rows, _rank_prompt, "rank", ("rank", "low-rank")), _base.sample_rank,
    "L1: ranks of B @ A matrices of drawn rank. L2 (derive): the dimensions of the null space and the left "
    "null space. L3 (compose): the rank of a product of two low-rank matrices. L4 (search): the shortest "
    "prefix of columns spanning the column space. L5 (design): how many columns of each matrix are essential "
    "(deleting one lowers the rank), the matrices built with a drawn number (0-3) of essential columns "
    "among 2-4 dependent ones, so the count is neither the rank nor the nullity and differs between the "
    "matrices of an instance. The counts of L2-L5 vary within an instance.", sample_rank,
    varying_at={2: ("rows[].nullity", "rows[].left_nullity"), 3: ("rows[].rank",), 4: ("rows[].k",),
                5: ("rows[].essential",)})
PROJECTION = _linalg_family(
    "projection", _builder(projection_rows, _projection_prompt, "projection", ("projection",)),
    _base.sample_projection,
    "L1: projections onto a column space with P = A (A^T A)^-1 A^T stated. L2 (derive): the closest point "
    "of the column space (no projector stated). L3 (compose): squared distance and squared cosine. L4 "
    "(search): the vector closest to the subspace, ties to the earliest. L5 (design): the column to delete "
    "that keeps the total squared distance smallest, ties to the smallest.", sample_projection)
EIGENVALUES = _linalg_family(
    "eigenvalues",
    _builder(eigenvalue_rows, _eigenvalue_prompt, "eigenvalues", ("eigenvalues", "irrational")),
    _base.sample_eigenvalues,
    "L1: all eigenvalues of symmetric H D H^T matrices (radicals). L2 (derive): the maximum of x^T M x on "
    "the unit sphere (the largest eigenvalue, not named). L3 (compose): the spectral radius and the sum of "
    "squared eigenvalues. L4 (inverse): the smallest integer shift making M + s I positive definite. L5 "
    "(design): how many eigenvalues lie below a threshold.", sample_eigenvalues,
    reject=_irrational_eigenvalues)
PCA = _linalg_family(
    "pca", _builder(pca_rows, _pca_prompt, "pca", ("pca", "eigenvalues", "irrational")), _base.sample_pca,
    "L1: covariance, eigenvalues and explained ratio, formulas stated. L2 (derive): the largest variance of "
    "a 1-D projection and its share (not named as an eigenvalue). L3 (compose): the variance along a given "
    "direction and the rest. L4 (search): the best of five directions, ties to the earliest. L5 (design): "
    "the best integer direction in a grid, ties to the smallest components.", sample_pca,
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
