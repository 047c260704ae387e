"""Drawing the inputs of generated pytorch tasks, and the words their prompts use.

Float inputs sit on dyadic grids (k / 2**bits within a range) with few significant bits, so sums and
products of a few of them are exact in float32 and the independent Fraction arithmetic starts from
the very numbers torch sees. Every choice comes from the task's Draw (never torch's RNG).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from exactgrade.domains.pytorch.common import tensor
from exactgrade.domains.pytorch.exact import reshape
from exactgrade.family import Draw
from exactgrade.values import TensorValue

_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
          "twelve")


def dyadic_list(draw: Draw, count: int, low: float, high: float, bits: int, *,
                nonzero: bool = False) -> list[float]:
    """``count`` multiples of 2**-bits in [low, high] (none zero if asked)."""
    out = []
    while len(out) < count:
        value = float(draw.dyadic(Fraction(low), Fraction(high), bits))
        if not (nonzero and value == 0):
            out.append(value)
    return out


def dyadic_tensor(draw: Draw, shape: Sequence[int], low: float, high: float, bits: int, *,
                  nonzero: bool = False) -> TensorValue:
    """A float32 tensor of the given shape on the dyadic grid."""
    flat = dyadic_list(draw, math.prod(shape), low, high, bits, nonzero=nonzero)
    return tensor("float32", reshape(flat, tuple(shape)))


def int_tensor(draw: Draw, shape: Sequence[int], low: int, high: int, dtype: str = "int64") -> TensorValue:
    """An integer tensor with elements uniform in [low, high]."""
    flat = [draw.integer(low, high) for _ in range(math.prod(shape))]
    return tensor(dtype, reshape(flat, tuple(shape)))


def word(n: int) -> str:
    """A count as the prompts spell it: words up to twelve, digits beyond."""
    return _WORDS[n] if 0 <= n < len(_WORDS) else str(n)


def shape_text(shape: Sequence[int]) -> str:
    """(4, 6), or (4,) for one dimension, as Python prints a shape tuple."""
    return str(tuple(shape))


def first_duplicate(items: Sequence[Any]) -> Any | None:
    """The first value that occurs twice in ``items`` (exact comparison), or None."""
    seen = set()
    for item in items:
        if item in seen:
            return item
        seen.add(item)
    return None


def regression_inputs(draw: Draw, level: int) -> dict[str, TensorValue]:
    """w0, x, y of a least-squares loss mean((x @ w - y)^2): 4..3+level samples, 3..2+level weights."""
    samples, weights = draw.integer(4, 3 + level), draw.integer(3, 2 + level)
    return {"w0": dyadic_tensor(draw, (weights,), -1.5, 1.5, 2),
            "x": dyadic_tensor(draw, (samples, weights), -3, 3, 2),
            "y": dyadic_tensor(draw, (samples,), -3, 3, 2)}


def distribution(draw: Draw, classes: int, bits: int) -> list[float]:
    """``classes`` positive multiples of 2**-bits that sum to exactly 1 (2**bits >= classes)."""
    cuts = sorted(draw.sample(range(1, 2**bits), classes - 1))
    edges = [0, *cuts, 2**bits]
    return [(b - a) / 2**bits for a, b in zip(edges, edges[1:], strict=False)]


def distinct_dyadic_tensor(draw: Draw, shape: Sequence[int], bits: int) -> TensorValue:
    """A float32 tensor of pairwise distinct multiples of 2**-bits (so no maximum or order is tied),
    within +-2 * size / 2**bits."""
    count = math.prod(shape)
    numerators = draw.sample(range(-2 * count, 2 * count + 1), count)
    return tensor("float32", reshape([k / 2**bits for k in numerators], tuple(shape)))
