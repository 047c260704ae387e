"""What two or more autograd families use (written once)."""

from __future__ import annotations

from exactgrade.domains.pytorch.sampling import dyadic_tensor
from exactgrade.family import Draw


def elementwise_input(low: float, high: float, bits: int):
    def sample(draw: Draw, level: int) -> dict:
        shape = (3 + level,) if level <= 2 else (draw.integer(2, level), draw.integer(3, 2 + level))
        return {"x0": dyadic_tensor(draw, shape, low, high, bits, nonzero=True)}

    return sample
