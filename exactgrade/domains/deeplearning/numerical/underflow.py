"""The underflow family of numerical: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade.domains.deeplearning.numerical.shared import (
    _cases,
    _formats,
    numerical_family,
    op,
    underflow_power,
)
from exactgrade.family import Draw


def sample_underflow(draw: Draw, level: int) -> dict:
    """powi(q, n) with n within 3 (level 1) .. 3 + level of where q**n crosses half the smallest
    subnormal (q = 1/2 gives exact ties), and its log-space twin n * log(q)."""
    bases = (F(1, 2), F(1, 4), F(1, 1000))
    if level > 1:
        bases += (F(1, 8), F(1, 10), F(3, 4), F(1, 3))

    def make(draw, i):
        fmt = draw.choice(_formats(level))
        q = draw.choice(bases)
        n = max(2, underflow_power(q, fmt) + draw.integer(-2 - level, 2 + level))
        if draw.chance(1, 4):
            return "log_likelihood", fmt, op("mul", n, op("log", q))
        return "likelihood", fmt, op("powi", q, n)

    return {"cases": _cases(draw, 4 + level, make)}


UNDERFLOW = numerical_family("underflow", ("underflow", "subnormal"), sample_underflow,
                              "powers q**n near the underflow edge, and log-space twins")
