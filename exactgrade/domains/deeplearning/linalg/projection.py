"""The projection family of linalg: everything it needs, its five levels in level order."""

from __future__ import annotations

from exactgrade import rational
from exactgrade.domains.deeplearning._family import as_int
from exactgrade.domains.deeplearning.common import prompt
from exactgrade.domains.deeplearning.linalg.shared import (
    _builder,
    _matmul,
    _small,
    full_column_rank,
    linalg_family,
    projection_rows,
)
from exactgrade.family import Draw, Reject


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


def sample_projection_upper(draw: Draw, level: int) -> dict:
    base = sample_projection(draw, 3 if level == 5 else 2)
    if level == 2:
        return base
    if level == 5 and len(base["A"][0]) < 2:
        raise Reject("one column: nothing to choose")
    name = {3: "distance", 4: "closest_vector", 5: "drop_column"}[level]
    if level == 4 and len(base["vectors"]) < 3:
        base["vectors"] = base["vectors"] + [[draw.integer(-2, 2) for _ in base["A"]]]
    return {"question": name, **base}


PROJECTION = linalg_family(
    "projection", _builder(projection_rows, _projection_prompt, "projection", ("projection",)),
    sample_projection,
    "L1: projections onto a column space with P = A (A^T A)^-1 A^T stated. L2 (derive): the closest point "
    "of the column space (no projector stated). L3 (compose): squared distance and squared cosine. L4 "
    "(search): the vector closest to the subspace, ties to the earliest. L5 (design): the column to delete "
    "that keeps the total squared distance smallest, ties to the smallest.", sample_projection_upper)
