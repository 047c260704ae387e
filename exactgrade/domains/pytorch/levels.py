"""Levels 2-5 of a pytorch family: one Family per level, joined into the family the domain lists.

A level may ask another question of its own inputs (its own reference, independent recomputation,
question text and answer form), so each upper level is a whole ``pytorch_family``; ``leveled``
dispatches build, sample and reject on the level, and level 1 stays the canonical builder.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from exactgrade.domains.pytorch.exact import to_fraction
from exactgrade.family import Branch, Draw, Family, Level, five_levels


def leveled(base: Family, upper: Mapping[int, Family], *, levels: str, varying: tuple[str, ...] = (),
            constant: Mapping[str, str] | None = None, branches: tuple[Branch, ...] = ()) -> Family:
    """``base`` (level 1, the canonical builder) joined with ``upper`` (levels 2..5, each a Family
    of the same name) through five_levels; the shortcut rules hold for every level."""
    if any(f.name != base.name for f in upper.values()):
        raise ValueError(f"family {base.name!r}: an upper level is named otherwise")
    chosen = [base, *(upper[level] for level in sorted(upper))]
    return five_levels(base.name, [Level(f.build, f.sample, f.reject) for f in chosen], about=levels,
                       varying=varying, constant=constant, branches=branches)


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


def rounded(value: Any, bits: int) -> float:
    """``value`` rounded down to the 2**-bits grid, as a float (a target an output lies near)."""
    scale = 2**bits
    return float(Fraction(int(value * scale) - (1 if value < 0 else 0), scale))


def noise(draw: Draw, bits: int) -> float:
    """A small offset on the 2**-bits grid in [-2, 2] * 2**-bits."""
    return draw.integer(-2, 2) / 2**bits


__all__ = ["clear_winner", "leveled", "noise", "rounded", "solve"]
