"""The cancellation family of numerical: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade.domains.deeplearning.numerical.shared import (
    PRECISION,
    _cases,
    _formats,
    numerical_family,
    op,
)
from exactgrade.family import Draw


def _variance(values):
    """E[x^2] - E[x]^2 in one pass, as the canonical dl-034 case writes it."""
    n = len(values)
    mean_square = op("div", op("sum", *[op("mul", x, x) for x in values]), n)
    mean = op("div", op("sum", *values), n)
    return op("sub", mean_square, op("mul", mean, mean))


def sample_cancellation(draw: Draw, level: int) -> dict:
    """(1 + d) - 1 with d = 2**-k near the format's precision (ties at k = p) or 10**-k;
    (2**k + 1) - 2**k at the large-integer tie; one-pass variance of 2 (3 from level 3)
    integers near 2**(p/2), where the squares stop being exact."""

    def make(draw, i):
        fmt = draw.choice(_formats(level))
        p = PRECISION[fmt]
        kind = draw.choice(("increment", "decimal", "integer", "variance"))
        if kind == "increment":
            return "one_plus", fmt, op("sub", op("add", 1, F(1, 2 ** (p + draw.integer(-2, 1)))), 1)
        if kind == "decimal":
            k = draw.integer(max(1, p * 3 // 10 - 2), p * 3 // 10 + 2)
            return "one_plus_decimal", fmt, op("sub", op("add", 1, F(1, 10**k)), 1)
        if kind == "integer":
            big = 2 ** (p + draw.integer(-1, 1))
            return "big_plus_one", fmt, op("sub", op("add", big, draw.choice((1, 2, 3))), big)
        start = draw.integer(2 ** (p // 2 - 1), 2 ** (p // 2 + 2))
        values = [start + step for step in sorted(draw.sample(range(0, 5), 3 if level >= 3 else 2))]
        return "variance_one_pass", fmt, _variance(values)

    return {"cases": _cases(draw, 4 + level, make)}


CANCELLATION = numerical_family("cancellation", ("cancellation",), sample_cancellation,
                                 "(1 + 2**-k) - 1, (1 + 10**-k) - 1, (2**p + c) - 2**p, one-pass variance")
