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

from exactgrade.domains.deeplearning.linalg.eigenvalues import EIGENVALUES
from exactgrade.domains.deeplearning.linalg.inverse import INVERSE
from exactgrade.domains.deeplearning.linalg.least_squares import LEAST_SQUARES
from exactgrade.domains.deeplearning.linalg.pca import PCA
from exactgrade.domains.deeplearning.linalg.projection import PROJECTION
from exactgrade.domains.deeplearning.linalg.rank import RANK

FAMILIES = (INVERSE, LEAST_SQUARES, RANK, PROJECTION, EIGENVALUES, PCA)


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
