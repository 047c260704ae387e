"""The pca family of linalg: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade.domains.deeplearning._family import as_int
from exactgrade.domains.deeplearning.common import prompt
from exactgrade.domains.deeplearning.linalg.shared import (
    _builder,
    irrational_eigenvalues,
    is_rational_square,
    linalg_family,
)
from exactgrade.family import Draw, Reject


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


def sample_pca_upper(draw: Draw, level: int) -> dict:
    base = sample_pca(draw, 2)
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


PCA = linalg_family(
    "pca", _builder(pca_rows, _pca_prompt, "pca", ("pca", "eigenvalues", "irrational")), sample_pca,
    "L1: covariance, eigenvalues and explained ratio, formulas stated. L2 (derive): the largest variance of "
    "a 1-D projection and its share (not named as an eigenvalue). L3 (compose): the variance along a given "
    "direction and the rest. L4 (search): the best of five directions, ties to the earliest. L5 (design): "
    "the best integer direction in a grid, ties to the smallest components.", sample_pca_upper,
    reject=irrational_eigenvalues)
