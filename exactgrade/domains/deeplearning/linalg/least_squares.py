"""The least_squares family of linalg: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade import rational
from exactgrade.domains.deeplearning._family import as_int, deeplearning_family, key_agrees
from exactgrade.domains.deeplearning.common import prompt
from exactgrade.domains.deeplearning.linalg.shared import (
    _small,
    first_level,
    least_squares_rows,
    question_level,
    rational_matrix,
    restated_level,
    rows_agree,
    to_fraction,
)
from exactgrade.family import Branch, Degenerate, Draw, Level, Reject
from exactgrade.task import uses


def _least_squares_prompt(inputs):
    return prompt("Fit the linear model y ~ X w by ordinary least squares (X already contains a column of "
                  "ones for the intercept). Give the exact minimiser w and the residual sum of squares.",
                  {"X": ("design matrix, one row per observation", inputs["X"]),
                   "y": ("observed targets", inputs["y"])},
                  '{"rows": [{"w": [Fraction, ...], "rss": Fraction}]}  (a single row)',
                  "w in units of y per unit of each column of X; rss in squared units of y")


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


def _fit(x, y) -> tuple[tuple[F, ...], F]:
    """The least-squares weights and rss by Gauss-Jordan on the normal equations."""
    xt = rational.transpose(x)
    w = rational.solve(rational.matmul(xt, x), rational.matvec(xt, y))
    r = [rational.as_fraction(a) - b for a, b in zip(y, rational.matvec(x, w), strict=True)]
    return w, sum((e * e for e in r), F(0))


def _check_least_squares(task):
    w, rss = _fit(task.inputs["X"], task.inputs["y"])
    return rows_agree(task, [{"w": list(w), "rss": rss}])


LEVEL_1 = Level(first_level(least_squares_rows, _least_squares_prompt, ("least-squares",),
                            _check_least_squares), sample_least_squares)


# L2 (derive): the same fit, asked as the minimiser of the squared error (no normal equations)
LEVEL_2 = Level(restated_level(
    ("least-squares", "words"), least_squares_rows, _check_least_squares,
    "Choose the coefficient vector w that makes the sum over observations of (y_k - (X w)_k)**2 as small as "
    "possible (X already contains a column of ones for the intercept). Give w and that smallest sum, "
    "exactly.",
    '{"rows": [{"w": [Fraction, ...], "rss": Fraction}]}  (a single row)',
    "w in units of y per unit of each column of X; rss in squared units of y"), sample_least_squares)


# L3 (compose): a prediction at a new row, and R**2
def least_squares_fit(x, y):
    """(w, rss) of the least-squares fit of the sympy column y on the sympy matrix x."""
    w = (x.T * x).LUsolve(x.T * y)
    r = y - x * w
    return w, (r.T * r)[0, 0]


@uses(rational_matrix, to_fraction, least_squares_fit)
def prediction_and_r2(X, y, x_new, question=None):
    x, target = rational_matrix(X), rational_matrix([[v] for v in y])
    w, rss = least_squares_fit(x, target)
    mean = sum(target) / len(target)
    tss = sum((v - mean) ** 2 for v in target)
    new = rational_matrix([x_new])
    return {"rows": [{"prediction": to_fraction((new * w)[0, 0]), "r2": to_fraction(1 - rss / tss)}]}


def _check_prediction(task):
    inputs = task.inputs
    w, rss = _fit(inputs["X"], inputs["y"])
    y = [rational.as_fraction(v) for v in inputs["y"]]
    mean = sum(y, F(0)) / len(y)
    tss = sum(((v - mean) ** 2 for v in y), F(0))
    terms = zip(inputs["x_new"], w, strict=True)
    return key_agrees(task, {"prediction": sum((rational.as_fraction(a) * b for a, b in terms), F(0)),
                             "r2": 1 - rss / tss})


def sample_prediction(draw: Draw, level: int) -> dict:
    """A level-2 design and a new row at an integer x (with its square when the design has x**2)."""
    base = sample_least_squares(draw, 2)
    x_new = [1, draw.integer(-6, 12), *([] if len(base["X"][0]) == 2 else [0])]
    if len(x_new) == 3:
        x_new[2] = x_new[1] ** 2
    return {"question": "prediction", **base, "x_new": x_new}


LEVEL_3 = Level(question_level(
    "prediction", prediction_and_r2, _check_prediction,
    "Fit y ~ X w by ordinary least squares (X already contains a column of ones for the intercept). Give the "
    "fitted model's prediction for a new observation whose row of X is `x_new`, and the coefficient of "
    "determination R**2 = 1 - (residual sum of squares) / (sum of squares of y about its mean), exactly.",
    '{"prediction": Fraction, "r2": Fraction}', "prediction in units of y; R**2 dimensionless"),
    sample_prediction)


# L4 (search): the observation whose removal leaves the smallest rss
@uses(rational_matrix, to_fraction, least_squares_fit)
def best_left_out(X, y, question=None):
    scored = []
    for k in range(len(X)):
        keep = [r for n, r in enumerate(X) if n != k]
        ys = [v for n, v in enumerate(y) if n != k]
        rss = least_squares_fit(rational_matrix(keep), rational_matrix([[v] for v in ys]))[1]
        scored.append((rss, k + 1))
    rss, k = min(scored)
    return {"rows": [{"drop": k, "rss": to_fraction(rss)}]}


def _check_left_out(task):
    x, y = task.inputs["X"], task.inputs["y"]
    scored = [(_fit([r for n, r in enumerate(x) if n != k], [v for n, v in enumerate(y) if n != k])[1], k + 1)
              for k in range(len(x))]
    return key_agrees(task, {"drop": min(scored)[1], "rss": min(scored)[0]})


def sample_leave_one_out(draw: Draw, level: int) -> dict:
    return {"question": "leave_one_out", **sample_least_squares(draw, 3)}


LEVEL_4 = Level(question_level(
    "leave_one_out", best_left_out, _check_left_out,
    "Fit y ~ X w by ordinary least squares with one observation left out (X already contains a column of "
    "ones). Which observation, counted from 1, when left out gives the smallest residual sum of squares on "
    "the remaining ones? On a tie, the smallest number. Give it and that residual sum of squares.",
    '{"drop": int, "rss": Fraction}', "rss in squared units of y"), sample_leave_one_out)


# L5 (regimes): the whole lasso path
@uses(to_fraction)
def lasso_path(X, y, question=None):
    """The homotopy: on each stretch w is affine in lambda."""
    from fractions import Fraction

    import sympy

    xs = [[Fraction(v) for v in row] for row in X]
    y = [Fraction(v) for v in y]
    p = len(xs[0])
    col = [[row[j] for row in xs] for j in range(p)]

    def dot(u, v):
        return sum((a * b for a, b in zip(u, v, strict=True)), Fraction(0))

    def solved(rhs):
        gram = sympy.Matrix([[dot(col[i], col[j]) for j in active] for i in active])
        return [to_fraction(v) for v in gram.LUsolve(sympy.Matrix(rhs))]

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


def lasso_mistake(x, y) -> list[F]:
    """least_squares L5's named mistake: soft-thresholding as if the columns were orthogonal, so each
    column would join at lambda = |X_j . y| (the change points would be those correlations)."""
    cols = [[F(row[j]) for row in x] for j in range(len(x[0]))]
    return sorted({abs(sum((a * F(b) for a, b in zip(c, y, strict=True)), F(0))) for c in cols}, reverse=True)


def sample_lasso(draw: Draw, level: int) -> dict:
    """3 columns of 5-6 small integers (full rank, columns correlated), y small integers; every change
    of the support a single event (no two at one lambda), two to five of them, and the orthogonal-design
    mistake wrong."""
    from exactgrade.rational import rank

    sample_least_squares(draw, 3)  # the design levels 2-4 draw first: drawn here too, so the streams stay
    n = draw.integer(5, 6)
    x = [[draw.integer(-3, 3) for _ in range(3)] for _ in range(n)]
    y = [draw.integer(-6, 6) for _ in range(n)]
    if rank(x) < 3:
        raise Reject("X is not of full column rank")
    inputs = {"question": "lasso_path", "X": x, "y": y}
    rows = lasso_path(**inputs)["rows"]
    if len({r["lambda"] for r in rows}) != len(rows) or not 2 <= len(rows) <= 5:
        raise Reject("too few or too many changes of the support")
    steps = zip(rows, rows[1:], strict=False)
    if any(len(set(a["support_below"]) ^ set(b["support_below"])) != 1 for a, b in steps) \
            or len(rows[0]["support_below"]) != 1:
        raise Reject("two weights join or leave at one lambda")
    if [r["lambda"] for r in rows] == lasso_mistake(x, y)[:len(rows)]:
        raise Reject("the orthogonal-design mistake gives the key")
    return inputs


def _lasso_at(x, y, lam: F) -> list[F]:
    """The lasso minimiser at one lambda, by the optimality conditions alone: for every sign
    pattern s in {-1, 0, 1}^p, w_A = (X_A^T X_A)^-1 (X_A^T y - lam s_A) is kept when its signs are
    s_A and every other column's residual correlation is at most lam in size; exactly one w
    (the minimiser is unique) must survive."""
    from itertools import product

    p = len(x[0])
    cols = [[rational.as_fraction(row[j]) for row in x] for j in range(p)]
    ys = [rational.as_fraction(v) for v in y]

    def dot(u, v) -> F:
        return sum((a * b for a, b in zip(u, v, strict=True)), F(0))

    found = set()
    for signs in product((-1, 0, 1), repeat=p):
        active = [j for j in range(p) if signs[j]]
        w = [F(0)] * p
        if active:
            gram = [[dot(cols[i], cols[j]) for j in active] for i in active]
            part = rational.solve(gram, [dot(cols[i], ys) - lam * signs[i] for i in active])
            if any((v > 0) != (signs[j] > 0) or v == 0 for v, j in zip(part, active, strict=True)):
                continue
            for v, j in zip(part, active, strict=True):
                w[j] = v
        residual = [v - sum((w[j] * cols[j][r] for j in range(p)), F(0)) for r, v in enumerate(ys)]
        if all(abs(dot(cols[j], residual)) <= lam for j in range(p) if not signs[j]):
            found.add(tuple(w))
    if len(found) != 1:
        raise rational.RationalError(f"{len(found)} lasso minimisers at lambda = {lam}")
    return list(found.pop())


def _check_lasso_path(task):
    """The minimiser at each key lambda and on both sides of it (a quarter of the way to the
    neighbouring key lambdas, and beyond the last), each from the optimality conditions alone
    (_lasso_at), never by following the path: w must be the key's at each key lambda, the support
    must change there, and not change between two key lambdas (w must be affine in lambda there:
    checked at three points of every stretch); the orthogonal-design mistake must give other lambdas."""
    x, y, rows = task.inputs["X"], task.inputs["y"], task.expected["rows"]
    lams = [rational.as_fraction(r["lambda"]) for r in rows]
    problems = []

    def support(w: list[F]) -> list[int]:
        return [j + 1 for j, v in enumerate(w) if v != 0]

    if support(_lasso_at(x, y, lams[0] * F(5, 4))):
        problems.append("above the first lambda the lasso weights are not all 0")
    for k, (lam, row) in enumerate(zip(lams, rows, strict=True)):
        if _lasso_at(x, y, lam) != list(row["w"]):
            problems.append(f"at lambda = {lam} the optimality conditions give w = "
                            "[" + ", ".join(str(v) for v in _lasso_at(x, y, lam)) + "]")
        low = lams[k + 1] if k + 1 < len(lams) else F(0)
        points = [low + (lam - low) * F(i, 4) for i in (1, 2, 3)]
        ws = [_lasso_at(x, y, t) for t in points]
        if any(support(w) != list(row["support_below"]) for w in ws):
            problems.append(f"below lambda = {lam} the support is not {row['support_below']}")
        if any(ws[0][j] + ws[2][j] != 2 * ws[1][j] for j in range(len(ws[0]))):
            problems.append(f"below lambda = {lam} w is not affine in lambda (a change point is missing)")
    if lams == lasso_mistake(x, y)[:len(lams)]:
        problems.append(Degenerate("the named mistake (orthogonal soft-thresholding) gives the key"))
    return problems


LEVEL_5 = Level(question_level(
    "lasso_path", lasso_path, _check_lasso_path,
    "The lasso: for a penalty lambda > 0, w(lambda) minimises 1/2 * sum_k (y_k - (X w)_k)**2 + lambda * "
    "sum_j |w_j| (no intercept: X has no column of ones; X has full column rank, so the minimiser is "
    "unique). As lambda decreases from infinity to 0, the set of j with w_j(lambda) != 0 (the support) "
    "changes at finitely many values of lambda. Give every such value, in decreasing order, with the "
    "support just below it (column numbers counted from 1, increasing) and w at that value of lambda.",
    '{"rows": [{"lambda": Fraction, "support_below": [int, ...], "w": [Fraction, ...]}, ...]}  '
    "(one row per value, largest lambda first)",
    "lambda in squared units of y; w in units of y per unit of X",
    zero_reason=lambda rows: "the weights outside the support are exactly 0 (at the largest lambda every "
                             "weight is): the lasso's sparsity"), sample_lasso)


def _lasso_leaves(task):
    rows = task.expected["rows"] if task.inputs.get("question") == "lasso_path" else []
    steps = zip(rows, rows[1:], strict=False)
    return any(len(b["support_below"]) < len(a["support_below"]) for a, b in steps)


LEAST_SQUARES = deeplearning_family(
    "least_squares", (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5), about=
    "L1: OLS weights and rss, normal equations stated. L2 (derive): the same, asked as the minimiser of the "
    "squared error (no normal equations). L3 (compose): a prediction at a new row and R**2. L4 (search): the "
    "observation whose removal leaves the smallest rss, ties to the smallest. L5 (regimes): the whole lasso "
    "path of three correlated columns: every penalty at which the support changes (columns join, and in "
    "some instances one leaves), the support below it and the weights there, exact rationals at the regime "
    "boundaries (the KKT conditions derived, no grid finds them); soft-thresholding as if the columns were "
    "orthogonal never gives the key.",
    branches=(Branch("a weight leaves the support", _lasso_leaves, F(1, 50), (5,)),))
