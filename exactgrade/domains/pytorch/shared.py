"""What two or more pytorch families of different categories use (written once)."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from exactgrade.domains.pytorch.exact import to_fraction


def dims(x):
    return tuple(x.shape)


def leaves(nested):
    return [e for item in nested for e in leaves(item)] if isinstance(nested, list) else [nested]


def solve(matrix: Sequence[Sequence[Any]], rhs: Sequence[Any]) -> list[Fraction] | None:
    """The exact solution of matrix @ v = rhs (square), or None when the matrix is singular."""
    n = len(matrix)
    rows = [[Fraction(e) for e in row] + [Fraction(b)] for row, b in zip(matrix, rhs, strict=True)]
    for col in range(n):
        pivot = next((r for r in range(col, n) if rows[r][col] != 0), None)
        if pivot is None:
            return None
        rows[col], rows[pivot] = rows[pivot], rows[col]
        for r in range(n):
            if r != col and rows[r][col] != 0:
                factor = rows[r][col] / rows[col][col]
                rows[r] = [a - factor * b for a, b in zip(rows[r], rows[col], strict=True)]
    return [rows[i][n] / rows[i][i] for i in range(n)]


def clear_winner(scores: Sequence[Any], *, larger: bool = False,
                 gap: Fraction = Fraction(1, 100)) -> str | None:
    """Why the best of ``scores`` (smallest, or largest if ``larger``) is too close to the
    runner-up for float32 arithmetic to pick it for certain (relative gap below ``gap``), or None."""
    ordered = sorted((to_fraction(s) for s in scores), reverse=larger)
    first, second = ordered[0], ordered[1]
    if abs(second - first) <= gap * max(abs(first), abs(second), Fraction(1, 100)):
        return f"the best two candidates score {float(first):.6g} and {float(second):.6g}: too close to call"
    return None
