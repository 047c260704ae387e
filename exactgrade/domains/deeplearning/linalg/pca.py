"""The pca family of linalg: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction as F

import sympy

from exactgrade import rational
from exactgrade.domains.deeplearning._family import as_int, deeplearning_family, key_agrees
from exactgrade.domains.deeplearning.common import prompt
from exactgrade.domains.deeplearning.linalg.shared import (
    ascending_eigenvalues,
    eigenvalue_identities,
    first_level,
    irrational_eigenvalues,
    is_rational_square,
    near_numpy,
    numpy_eigenvalues,
    question_level,
    rational_matrix,
    to_fraction,
)
from exactgrade.family import Draw, Level, Reject
from exactgrade.task import uses


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


def _pca_prompt(inputs):
    return prompt("Principal component analysis of the 2-D points in `points`: compute the population "
                  "covariance matrix (1/n normalisation), its eigenvalues in ascending order, and the "
                  "fraction of the total variance explained by the first principal component (largest "
                  "eigenvalue / trace), all exactly.",
                  {"points": ("list of points [x, y] with Fraction coordinates", inputs["points"])},
                  '{"rows": [{"covariance": [[Fraction, Fraction], [Fraction, Fraction]], '
                  '"eigenvalues": [exact value, exact value], "explained_variance_ratio": exact value}]}',
                  "covariance and eigenvalues in squared point units; the ratio is dimensionless")


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


def _covariance(points) -> list[list[F]]:
    """The population covariance of 2-D points, in Fractions."""
    n = len(points)
    mean = [sum((rational.as_fraction(p[j]) for p in points), F(0)) / n for j in range(2)]
    return [[sum(((rational.as_fraction(p[i]) - mean[i]) * (rational.as_fraction(p[j]) - mean[j])
                  for p in points), F(0)) / n for j in range(2)] for i in range(2)]


def _check_pca(task):
    """The covariance by exactgrade.rational (centred points, C^T C / n), then the eigenvalue identities."""
    points = task.inputs["points"]
    n = len(points)
    mean = [sum((F(p[j]) for p in points), F(0)) / n for j in range(len(points[0]))]
    centred = [[F(p[j]) - mean[j] for j in range(len(mean))] for p in points]
    covariance = [[c / n for c in row] for row in rational.matmul(rational.transpose(centred), centred)]
    if task.expected["rows"][0]["covariance"] != covariance:
        return [f"the expected covariance differs from exactgrade.rational: {covariance}"]
    return eigenvalue_identities(task, [covariance])


LEVEL_1 = Level(first_level(pca_rows, _pca_prompt, ("pca", "eigenvalues", "irrational"), _check_pca),
                sample_pca, irrational_eigenvalues)


@uses(rational_matrix)
def covariance_matrix(points):
    """The population covariance (1/n) sum_k (p_k - mean)(p_k - mean)^T, a sympy matrix."""
    import sympy

    data = rational_matrix(points)
    n = data.rows
    mean = sympy.ones(1, n) * data / n
    centred = data - sympy.ones(n, 1) * mean
    return centred.T * centred / n


# L2 (derive): the largest variance of a 1-D projection and its share
@uses(covariance_matrix, ascending_eigenvalues)
def max_variance(points, question=None):
    import sympy

    cov = covariance_matrix(points)
    top = ascending_eigenvalues(cov)[-1]
    return {"rows": [{"variance": top, "ratio": sympy.radsimp(top / cov.trace())}]}


def _check_max_variance(task):
    row, cov = task.expected["rows"][0], _covariance(task.inputs["points"])
    top = numpy_eigenvalues([cov])[0][-1]
    return near_numpy([float(sympy.N(row["variance"], 30)), float(sympy.N(row["ratio"], 30))],
                      [top, top / float(cov[0][0] + cov[1][1])])


def sample_max_variance(draw: Draw, level: int) -> dict:
    return {"question": "max_variance", **sample_pca(draw, 2)}


LEVEL_2 = Level(question_level(
    "max_variance", max_variance, _check_max_variance,
    "The points in `points` are projected onto a line through their mean with unit direction u, and the "
    "population variance (1/n normalisation) of the projections is taken. Give the largest such variance "
    "over all u (exact, possibly irrational), and that variance as a fraction of the sum of the variances "
    "of the two coordinates.",
    '{"variance": exact value, "ratio": exact value}',
    "variance in squared point units; the ratio is dimensionless"), sample_max_variance)


# L3 (compose): the variance along a given direction, and the rest
@uses(rational_matrix)
def captured_variance(cov, direction):
    """The variance of the points along ``direction`` (u^T C u / u^T u for the covariance C)."""
    u = rational_matrix([[x] for x in direction])
    return (u.T * cov * u)[0, 0] / (u.T * u)[0, 0]


@uses(covariance_matrix, captured_variance, to_fraction)
def variance_along(points, direction, question=None):
    cov = covariance_matrix(points)
    along = captured_variance(cov, direction)
    return {"rows": [{"variance": to_fraction(along), "rest": to_fraction(cov.trace() - along)}]}


def _captured(cov: list[list[F]], d) -> F:
    """The variance captured along the direction d."""
    u = [rational.as_fraction(x) for x in d]
    quadratic = sum((u[i] * cov[i][j] * u[j] for i in range(2) for j in range(2)), F(0))
    return quadratic / (u[0] ** 2 + u[1] ** 2)


def _check_along(task):
    cov = _covariance(task.inputs["points"])
    along = _captured(cov, task.inputs["direction"])
    return key_agrees(task, {"variance": along, "rest": cov[0][0] + cov[1][1] - along})


def sample_direction(draw: Draw, level: int) -> dict:
    base = sample_pca(draw, 2)
    direction = [draw.integer(1, 3), draw.choice((-2, -1, 1, 2, 3))]
    return {"question": "along", **base, "direction": direction}


LEVEL_3 = Level(question_level(
    "along", variance_along, _check_along,
    "Give the population variance (1/n normalisation) of the points in `points` projected onto the line "
    "through their mean with direction `direction` (the coordinate along the unit vector direction / "
    "||direction||), and the variance that is left: the sum of the variances of the two coordinates minus "
    "that variance.",
    '{"variance": Fraction, "rest": Fraction}', "squared point units"), sample_direction)


# L4 (search): the best of five directions
@uses(covariance_matrix, captured_variance, to_fraction)
def best_direction(points, directions, question=None):
    cov = covariance_matrix(points)
    value, k = min((-captured_variance(cov, d), k) for k, d in enumerate(directions, start=1))
    return {"rows": [{"best": k, "ratio": to_fraction(-value / cov.trace())}]}


def _check_best_direction(task):
    cov = _covariance(task.inputs["points"])
    value, best = min((-_captured(cov, d), k) for k, d in enumerate(task.inputs["directions"], start=1))
    return key_agrees(task, {"best": best, "ratio": -value / (cov[0][0] + cov[1][1])})


CANDIDATE_DIRECTIONS = ([1, 0], [0, 1], [1, 1], [1, -1], [2, 1], [1, 2], [2, -1], [1, -2], [3, 1], [1, 3])


def sample_five_directions(draw: Draw, level: int) -> dict:
    base = sample_pca(draw, 2)
    directions = [list(d) for d in draw.sample(CANDIDATE_DIRECTIONS, 5)]
    return {"question": "best_direction", **base, "directions": directions}


LEVEL_4 = Level(question_level(
    "best_direction", best_direction, _check_best_direction,
    "Of the directions in `directions`, which captures the largest population variance (1/n normalisation) "
    "of the points in `points` projected onto it (the coordinate along the unit vector direction / "
    "||direction||)? On a tie, the earliest. Give its position, counted from 1, and the captured variance "
    "as a fraction of the sum of the variances of the two coordinates.",
    '{"best": int, "ratio": Fraction}', "the ratio is dimensionless"), sample_five_directions)


# L5 (design): the best integer direction in a grid
@uses(covariance_matrix, captured_variance, to_fraction)
def best_grid_direction(points, bound, question=None):
    from math import gcd

    cov = covariance_matrix(points)
    best = None
    for a in range(1, bound + 1):
        for b in range(-bound, bound + 1):
            if b == 0 or gcd(a, abs(b)) != 1:
                continue
            captured = captured_variance(cov, [a, b])
            if best is None or captured > best[0]:
                best = (captured, [a, b])
    return {"rows": [{"direction": best[1], "ratio": to_fraction(best[0] / cov.trace())}]}


def _check_grid_direction(task):
    from math import gcd

    cov, bound = _covariance(task.inputs["points"]), task.inputs["bound"]
    value, a, b = min((-_captured(cov, [a, b]), a, b) for a in range(1, bound + 1)
                      for b in range(-bound, bound + 1) if b != 0 and gcd(a, abs(b)) == 1)
    return key_agrees(task, {"direction": [a, b], "ratio": -value / (cov[0][0] + cov[1][1])})


def sample_grid_bound(draw: Draw, level: int) -> dict:
    return {"question": "grid_direction", **sample_pca(draw, 2), "bound": draw.integer(2, 4)}


LEVEL_5 = Level(question_level(
    "grid_direction", best_grid_direction, _check_grid_direction,
    "Among the directions [a, b] with integers 1 <= a <= `bound`, b non-zero with |b| <= `bound` and "
    "gcd(a, |b|) = 1, which captures the largest population variance (1/n normalisation) of the points in "
    "`points` projected onto it (the coordinate along [a, b] / ||[a, b]||)? On a tie, the smallest a, then "
    "the smallest b. Give it and the captured variance as a fraction of the sum of the variances of the two "
    "coordinates.", '{"direction": [int, int], "ratio": Fraction}', "the ratio is dimensionless"),
    sample_grid_bound)


PCA = deeplearning_family(
    "pca", (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5), about=
    "L1: covariance, eigenvalues and explained ratio, formulas stated. L2 (derive): the largest variance of "
    "a 1-D projection and its share (not named as an eigenvalue). L3 (compose): the variance along a given "
    "direction and the rest. L4 (search): the best of five directions, ties to the earliest. L5 (design): "
    "the best integer direction in a grid, ties to the smallest components.")
