"""The format_limits family of numerical: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade.domains.deeplearning.numerical.shared import (
    FORMATS,
    MAX_EXPONENT,
    PRECISION,
    SUBNORMAL_EXPONENT,
    _cases,
    max_finite,
    numerical_family,
    op,
)
from exactgrade.family import Draw


def sample_format_limits(draw: Draw, level: int) -> dict:
    """max + c around half an ulp (the tie rounds to even = up = inf), k * k around sqrt(max),
    1 / 2**-k around max, and a two-value mean square; float16 at levels 1-2, all formats above."""
    formats = ("float16",) if level <= 2 else FORMATS

    def make(draw, i):
        fmt = draw.choice(formats)
        p, e = PRECISION[fmt], MAX_EXPONENT[fmt]
        kind = draw.choice(("max_plus", "square", "reciprocal", "mean_square"))
        if kind == "max_plus":
            half_ulp = 2 ** (e - p)
            return kind, fmt, op("add", max_finite(fmt), half_ulp + draw.integer(-3, 3) * half_ulp // 8)
        if kind == "square":
            root = 2 ** ((e + 1) // 2) if e % 2 else 2 ** (e // 2) * 181 // 128
            k = root + draw.integer(-4, 4) * max(1, root // 256)
            return kind, fmt, op("mul", k, k)
        if kind == "reciprocal":
            k = min(SUBNORMAL_EXPONENT[fmt], e + draw.integer(-2, 2))
            return kind, fmt, op("div", 1, F(1, 2**k))
        x = 2 ** (e // 2) * 181 // 128 + draw.integer(-4, 4) * max(1, 2 ** (e // 2) // 256)
        return kind, fmt, op("div", op("add", op("mul", x, x), op("mul", x, x)), 2)

    return {"cases": _cases(draw, 4 + level, make)}


FORMAT_LIMITS = numerical_family("format_limits", ("float16", "overflow", "limits"), sample_format_limits,
                                  "max + half ulp, squares near sqrt(max), 1/2**-k, mean squares")
