"""The least_squares family of linalg: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade import rational
from exactgrade.domains.deeplearning._family import as_int
from exactgrade.domains.deeplearning.common import prompt
from exactgrade.domains.deeplearning.linalg.shared import (
    _builder,
    _small,
    least_squares_rows,
    linalg_family,
    linalg_question_rows,
)
from exactgrade.family import Branch, Draw, Reject


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


def sample_least_squares_upper(draw: Draw, level: int) -> dict:
    base = sample_least_squares(draw, 3 if level >= 4 else 2)
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


def _lasso_leaves(task):
    rows = task.expected["rows"] if task.inputs.get("question") == "lasso_path" else []
    steps = zip(rows, rows[1:], strict=False)
    return any(len(b["support_below"]) < len(a["support_below"]) for a, b in steps)


LEAST_SQUARES = linalg_family(
    "least_squares", _builder(least_squares_rows, _least_squares_prompt, "least_squares", ("least-squares",)),
    sample_least_squares,
    "L1: OLS weights and rss, normal equations stated. L2 (derive): the same, asked as the minimiser of the "
    "squared error (no normal equations). L3 (compose): a prediction at a new row and R**2. L4 (search): the "
    "observation whose removal leaves the smallest rss, ties to the smallest. L5 (regimes): the whole lasso "
    "path of three correlated columns: every penalty at which the support changes (columns join, and in "
    "some instances one leaves), the support below it and the weights there, exact rationals at the regime "
    "boundaries (the KKT conditions derived, no grid finds them); soft-thresholding as if the columns were "
    "orthogonal never gives the key.", sample_least_squares_upper,
    branches=(Branch("a weight leaves the support", _lasso_leaves, F(1, 50), (5,)),))
