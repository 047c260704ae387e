"""The exp_range family of numerical: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade.domains.deeplearning.numerical.shared import (
    LN_HALF_SUBNORMAL,
    LN_MAX,
    _cases,
    _formats,
    _grid,
    numerical_family,
    op,
)
from exactgrade.family import Draw


def sample_exp_range(draw: Draw, level: int) -> dict:
    """exp(x) with x within 3 of ln(max) or ln(half the smallest subnormal): integers at levels
    1-2, multiples of 1/4 from level 3, and from level 4 scaled by 2, 1/2 or 1/16 afterwards."""
    bits = 0 if level <= 2 else 2

    def make(draw, i):
        fmt = draw.choice(_formats(level))
        edge = draw.choice((LN_MAX, LN_HALF_SUBNORMAL))[fmt]
        expr = op("exp", _grid(edge + draw.dyadic(-3, 3, bits), bits))
        if level >= 4 and draw.chance(1, 2):
            expr = op(draw.choice(("mul", "div")), expr, draw.choice((2, F(1, 2), F(1, 16))))
        return "exp", fmt, expr

    return {"cases": _cases(draw, 4 + 2 * level, make)}


EXP_RANGE = numerical_family("exp_range", ("overflow", "exp"), sample_exp_range,
                              "4+2*level exp cases within 3 of the overflow/underflow edges")
