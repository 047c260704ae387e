"""The projection family of linalg: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade import rational
from exactgrade.domains.deeplearning._family import as_int, deeplearning_family, key_agrees
from exactgrade.domains.deeplearning.common import prompt
from exactgrade.domains.deeplearning.linalg.shared import (
    _matmul,
    _small,
    first_level,
    full_column_rank,
    projection_rows,
    question_level,
    rational_matrix,
    restated_level,
    rows_agree,
    to_fraction,
)
from exactgrade.family import Draw, Level, Reject
from exactgrade.task import uses


def _projection_prompt(inputs):
    return prompt("Project each vector in `vectors` orthogonally onto the column space of A. Give the "
                  "projection and the residual (vector minus projection), exactly.",
                  {"A": ("matrix with linearly independent columns", inputs["A"]),
                   "vectors": ("list of vectors to project", inputs["vectors"])},
                  '{"rows": [{"projection": [Fraction, ...], "residual": [Fraction, ...]}, ...]}  '
                  "(one row per vector, in order)",
                  "the units of the vectors")


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


def _check_projections(task):
    a = task.inputs["A"]
    at = rational.transpose(a)
    expected = []
    for v in task.inputs["vectors"]:
        projected = rational.matvec(a, rational.solve(rational.matmul(at, a), rational.matvec(at, v)))
        expected.append({"projection": list(projected),
                         "residual": [vi - pi for vi, pi in zip(v, projected, strict=True)]})
    return rows_agree(task, expected)


LEVEL_1 = Level(first_level(projection_rows, _projection_prompt, ("projection",), _check_projections),
                sample_projection)


# L2 (derive): the closest point of the column space, no projector stated
LEVEL_2 = Level(restated_level(
    ("projection", "words"), projection_rows, _check_projections,
    "For each vector v in `vectors`, give the point of the column space of A (the set of all A c) closest to "
    "v in Euclidean distance, and v minus that point, exactly.",
    '{"rows": [{"projection": [Fraction, ...], "residual": [Fraction, ...]}, ...]}  '
    "(one row per vector, in order)", "the units of the vectors"), sample_projection)


# L3 (compose): squared distance and squared cosine
def column_projector(A):
    """The orthogonal projector A (A^T A)^-1 A^T onto the column space of the sympy matrix A."""
    return A * (A.T * A).inv() * A.T


@uses(rational_matrix, to_fraction, column_projector)
def distances_and_cosines(A, vectors, question=None):
    p = column_projector(rational_matrix(A))
    rows = []
    for v in vectors:
        vector = rational_matrix([[x] for x in v])
        projected = p * vector
        residual = vector - projected
        rows.append({"distance_sq": to_fraction((residual.T * residual)[0, 0]),
                     "cos_sq": to_fraction((projected.T * projected)[0, 0] / (vector.T * vector)[0, 0])})
    return {"rows": rows}


def _residual_sq(a, v) -> F:
    """The squared distance of v to the column space of a, by Gauss-Jordan on the normal equations."""
    at = rational.transpose(a)
    c = rational.solve(rational.matmul(at, a), rational.matvec(at, v))
    r = [rational.as_fraction(x) - y for x, y in zip(v, rational.matvec(a, c), strict=True)]
    return sum((x * x for x in r), F(0))


def _check_distances(task):
    rows = []
    for v in task.inputs["vectors"]:
        d = _residual_sq(task.inputs["A"], v)
        norm = sum((rational.as_fraction(x) ** 2 for x in v), F(0))
        rows.append({"distance_sq": d, "cos_sq": (norm - d) / norm})
    return key_agrees(task, {"rows": rows})


def sample_distances(draw: Draw, level: int) -> dict:
    return {"question": "distance", **sample_projection(draw, 2)}


LEVEL_3 = Level(question_level(
    "distance", distances_and_cosines, _check_distances,
    "For each vector v in `vectors`, give its squared Euclidean distance to the column space of A (the set "
    "of all A c), and the squared cosine of the angle between v and the closest point of that space to v.",
    '{"rows": [{"distance_sq": Fraction, "cos_sq": Fraction}, ...]}  (one row per vector)',
    "squared units of the vectors; cos_sq dimensionless"), sample_distances)


# L4 (search): the vector closest to the subspace
@uses(rational_matrix, to_fraction, column_projector)
def closest_vector(A, vectors, question=None):
    p = column_projector(rational_matrix(A))
    scored = []
    for k, v in enumerate(vectors, start=1):
        residual = rational_matrix([[x] for x in v]) - p * rational_matrix([[x] for x in v])
        scored.append(((residual.T * residual)[0, 0], k))
    d, k = min(scored)
    return {"rows": [{"closest": k, "distance_sq": to_fraction(d)}]}


def _check_closest_vector(task):
    scored = [(_residual_sq(task.inputs["A"], v), k) for k, v in enumerate(task.inputs["vectors"], start=1)]
    return key_agrees(task, {"closest": min(scored)[1], "distance_sq": min(scored)[0]})


def sample_closest_vector(draw: Draw, level: int) -> dict:
    """At least three vectors (a third of small integers is added to two)."""
    base = sample_projection(draw, 2)
    if len(base["vectors"]) < 3:
        base["vectors"] = base["vectors"] + [[draw.integer(-2, 2) for _ in base["A"]]]
    return {"question": "closest_vector", **base}


LEVEL_4 = Level(question_level(
    "closest_vector", closest_vector, _check_closest_vector,
    "Which vector in `vectors` is closest to the column space of A (the set of all A c) in Euclidean "
    "distance? On a tie, the earliest. Give its position, counted from 1, and its squared distance.",
    '{"closest": int, "distance_sq": Fraction}', "squared units of the vectors"), sample_closest_vector)


# L5 (design): the column to delete that keeps the total squared distance smallest
@uses(rational_matrix, to_fraction, column_projector)
def column_to_drop(A, vectors, question=None):
    import sympy

    a = rational_matrix(A)
    scored = []
    for c in range(a.cols):
        p = column_projector(a[:, [k for k in range(a.cols) if k != c]])
        total = sympy.Integer(0)
        for v in vectors:
            residual = rational_matrix([[x] for x in v]) - p * rational_matrix([[x] for x in v])
            total += (residual.T * residual)[0, 0]
        scored.append((total, c + 1))
    total, c = min(scored)
    return {"rows": [{"drop": c, "total_sq": to_fraction(total)}]}


def _check_column_to_drop(task):
    columns = rational.transpose(task.inputs["A"])
    scored = []
    for c in range(len(columns)):
        kept = rational.transpose(columns[:c] + columns[c + 1:])
        scored.append((sum((_residual_sq(kept, v) for v in task.inputs["vectors"]), F(0)), c + 1))
    return key_agrees(task, {"drop": min(scored)[1], "total_sq": min(scored)[0]})


def sample_column_to_drop(draw: Draw, level: int) -> dict:
    base = sample_projection(draw, 3)
    if len(base["A"][0]) < 2:
        raise Reject("one column: nothing to choose")
    return {"question": "drop_column", **base}


LEVEL_5 = Level(question_level(
    "drop_column", column_to_drop, _check_column_to_drop,
    "One column of A is to be deleted. After deleting it, the sum over the vectors in `vectors` of their "
    "squared Euclidean distances to the column space of the remaining matrix should be as small as "
    "possible. Which column, counted from 1? On a tie, the smallest number. Give it and that sum.",
    '{"drop": int, "total_sq": Fraction}', "squared units of the vectors"), sample_column_to_drop)


PROJECTION = deeplearning_family(
    "projection", (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5), about=
    "L1: projections onto a column space with P = A (A^T A)^-1 A^T stated. L2 (derive): the closest point "
    "of the column space (no projector stated). L3 (compose): squared distance and squared cosine. L4 "
    "(search): the vector closest to the subspace, ties to the earliest. L5 (design): the column to delete "
    "that keeps the total squared distance smallest, ties to the smallest.")
