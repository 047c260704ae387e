"""Helpers that several inference families use."""

from __future__ import annotations

from exactgrade.domains.scaling._sample import attention_shape, value_bytes
from exactgrade.family import Draw


def _kv_shape(draw: Draw, level: int) -> dict:
    shape = attention_shape(draw, level)
    return {
        "layers": draw.integer(8, 40 * level),
        "n_kv_heads": shape["n_kv_heads"],
        "head_dim": shape["head_dim"],
        "kv_bytes": value_bytes(draw, level, (1, 2)),
    }
