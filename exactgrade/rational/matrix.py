"""Exact matrix operations over the rationals.

Matrices are tuples of row tuples of Fractions (lists and ints are accepted on input);
vectors are tuples of Fractions. Elimination is Gauss-Jordan in Fraction arithmetic, so
determinants, inverses, solutions and ranks are exact, never rounded.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from exactgrade.rational.convert import as_fraction
from exactgrade.rational.errors import ShapeError, SingularMatrixError

Matrix = tuple[tuple[Fraction, ...], ...]
Vector = tuple[Fraction, ...]


def as_matrix(rows: Sequence[Sequence[int | Fraction]]) -> Matrix:
    """rows as a rectangular, non-empty tuple of Fraction tuples"""
    m = tuple(tuple(as_fraction(x) for x in row) for row in rows)
    if not m or not m[0] or len({len(r) for r in m}) != 1:
        raise ShapeError("a matrix must be a non-empty rectangular list of non-empty rows")
    return m


def as_vector(values: Sequence[int | Fraction]) -> Vector:
    """values as a tuple of Fractions"""
    return tuple(as_fraction(x) for x in values)


def shape(a: Sequence[Sequence[int | Fraction]]) -> tuple[int, int]:
    """(rows, columns)"""
    m = as_matrix(a)
    return len(m), len(m[0])


def transpose(a: Sequence[Sequence[int | Fraction]]) -> Matrix:
    """a^T"""
    return tuple(zip(*as_matrix(a), strict=True))


def matmul(a: Sequence[Sequence[int | Fraction]], b: Sequence[Sequence[int | Fraction]]) -> Matrix:
    """a @ b"""
    a, b = as_matrix(a), as_matrix(b)
    if len(a[0]) != len(b):
        raise ShapeError(f"cannot multiply {len(a)}x{len(a[0])} by {len(b)}x{len(b[0])}")
    columns = tuple(zip(*b, strict=True))
    return tuple(tuple(sum((x * y for x, y in zip(row, col, strict=True)), Fraction(0)) for col in columns)
                 for row in a)


def matvec(a: Sequence[Sequence[int | Fraction]], v: Sequence[int | Fraction]) -> Vector:
    """a @ v for a vector v"""
    return tuple(row[0] for row in matmul(a, [[x] for x in as_vector(v)]))


def identity(n: int) -> Matrix:
    """the n x n identity"""
    return tuple(tuple(Fraction(int(i == j)) for j in range(n)) for i in range(n))


def _row_reduce(m: Matrix) -> tuple[list[list[Fraction]], list[int], Fraction]:
    """Reduced row echelon form, pivot columns, and the determinant factor (swaps and pivots)."""
    rows = [list(r) for r in m]
    pivots: list[int] = []
    factor = Fraction(1)
    r = 0
    for c in range(len(rows[0])):
        pivot = next((i for i in range(r, len(rows)) if rows[i][c] != 0), None)
        if pivot is None:
            continue
        if pivot != r:
            rows[r], rows[pivot] = rows[pivot], rows[r]
            factor = -factor
        p = rows[r][c]
        factor *= p
        rows[r] = [x / p for x in rows[r]]
        for i in range(len(rows)):
            if i != r and rows[i][c] != 0:
                k = rows[i][c]
                rows[i] = [x - k * y for x, y in zip(rows[i], rows[r], strict=True)]
        pivots.append(c)
        r += 1
        if r == len(rows):
            break
    return rows, pivots, factor


def _square(a: Sequence[Sequence[int | Fraction]]) -> Matrix:
    m = as_matrix(a)
    if len(m) != len(m[0]):
        raise ShapeError(f"expected a square matrix, got {len(m)}x{len(m[0])}")
    return m


def determinant(a: Sequence[Sequence[int | Fraction]]) -> Fraction:
    """det(a) for square a"""
    m = _square(a)
    _, pivots, factor = _row_reduce(m)
    return factor if len(pivots) == len(m) else Fraction(0)


def rank(a: Sequence[Sequence[int | Fraction]]) -> int:
    """the number of linearly independent rows (= columns) of a"""
    return len(_row_reduce(as_matrix(a))[1])


def inverse(a: Sequence[Sequence[int | Fraction]]) -> Matrix:
    """a^-1; SingularMatrixError if det(a) == 0"""
    m = _square(a)
    n = len(m)
    augmented = tuple(row + identity(n)[i] for i, row in enumerate(m))
    rows, pivots, _ = _row_reduce(augmented)
    if pivots[:n] != list(range(n)):
        raise SingularMatrixError(f"the {n}x{n} matrix is singular (determinant 0)")
    return tuple(tuple(row[n:]) for row in rows)


def solve(a: Sequence[Sequence[int | Fraction]], b: Sequence[int | Fraction]) -> Vector:
    """x with a @ x == b, for square non-singular a"""
    m = _square(a)
    v = as_vector(b)
    if len(v) != len(m):
        raise ShapeError(f"b has {len(v)} entries, the matrix has {len(m)} rows")
    rows, pivots, _ = _row_reduce(tuple(row + (x,) for row, x in zip(m, v, strict=True)))
    if pivots[: len(m)] != list(range(len(m))) or len(pivots) > len(m):
        raise SingularMatrixError(f"the {len(m)}x{len(m)} matrix is singular (determinant 0)")
    return tuple(row[-1] for row in rows)
