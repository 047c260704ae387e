"""Hardware and model numbers the scaling samplers share, so every family grows the same way.

Levels 1-2 draw round numbers (whole TFLOP/s, GB/s, billions of parameters) about the size of
the canonical tasks; levels 3-5 draw non-round ones (any MFLOP/s, MB/s, any parameter count), so
a model cannot lean on mental arithmetic, and the ranges widen with the level.
"""

from __future__ import annotations

from fractions import Fraction

from exactgrade.family import Draw


def rows(level: int, base: int) -> int:
    """The number of rows at a level: the canonical count at level 1, one more per level."""
    return base + level - 1


def round_numbers(level: int) -> bool:
    return level <= 2


def peak_flops(draw: Draw, level: int) -> int:
    """FLOP/s of one chip: 100 to 1000 TFLOP/s in steps of 10 at levels 1-2, any GFLOP/s above."""
    if round_numbers(level):
        return 10**13 * draw.integer(10, 100)
    return 10**9 * draw.integer(100_000, 2_500_000)


def hbm_bandwidth(draw: Draw, level: int) -> int:
    """HBM bytes/s: 500 to 5000 GB/s in steps of 100 at levels 1-2, any MB/s above."""
    if round_numbers(level):
        return 10**11 * draw.integer(5, 50)
    return 10**6 * draw.integer(500_000, 6_000_000)


def link_bandwidth(draw: Draw, level: int) -> int:
    """Per-device link bytes/s: 25 to 400 GB/s in steps of 25 at levels 1-2, any MB/s above."""
    if round_numbers(level):
        return 25 * 10**9 * draw.integer(1, 16)
    return 10**6 * draw.integer(20_000, 450_000)


def hbm_capacity(draw: Draw, level: int) -> int:
    """HBM bytes of one chip: 16 to 192 whole GB at levels 1-2, any byte count above."""
    if round_numbers(level):
        return 10**9 * draw.integer(16, 192)
    return draw.integer(16 * 10**9, 192 * 10**9)


def n_params(draw: Draw, level: int) -> int:
    """A dense model size: tenths of billions from 1 B to 50*level B at levels 1-2; any count
    up to 100 * 2**(level-2) B above."""
    if round_numbers(level):
        return 10**8 * draw.integer(10, 500 * level)
    return draw.integer(10**9, 10**11 * 2 ** (level - 2))


def n_tokens(draw: Draw, level: int) -> int:
    """Training tokens: whole hundreds of billions at levels 1-2, any count above."""
    if round_numbers(level):
        return 10**11 * draw.integer(1, 100 * level)
    return draw.integer(10**11, 10**13 * level)


def fraction(draw: Draw, level: int, low: int, high: int) -> Fraction:
    """A fraction between low% and high%: whole percent at levels 1-2, a basis point above."""
    if round_numbers(level):
        return Fraction(draw.integer(low, high), 100)
    return Fraction(draw.integer(100 * low, 100 * high), 10_000)


def sorted_sample(draw: Draw, low: int, high: int, k: int) -> list[int]:
    """k distinct ints from [low, high], ascending."""
    return sorted(draw.sample(range(low, high + 1), k))


def letters(prefix: str, k: int) -> list[str]:
    """Row names prefix_a, prefix_b, ..."""
    return [f"{prefix}_{chr(ord('a') + i)}" for i in range(k)]


def chips(draw: Draw, level: int, k: int) -> list[dict]:
    """k named chips with their peak FLOP/s and HBM bandwidth."""
    return [{"name": name, "peak_flops": peak_flops(draw, level), "hbm_bandwidth": hbm_bandwidth(draw, level)}
            for name in letters("chip", k)]


def attention_shape(draw: Draw, level: int) -> dict:
    """A decoder layer's attention and MLP widths, larger with the level; from level 3 on the
    widths need not be powers of two."""
    head_dim = draw.choice((64, 128) if round_numbers(level) else (64, 80, 96, 128, 256))
    n_kv_heads = draw.choice((1, 2, 4, 8, 16))
    n_heads = max(8, n_kv_heads * draw.choice((1, 2, 4, 8)))  # a multiple of n_kv_heads, at least 8
    if round_numbers(level):
        d_model = 1024 * draw.integer(1, 8 * level)
        d_ff = 1024 * draw.integer(2, 32 * level)
    else:
        d_model = 64 * draw.integer(8, 128 * 2 ** (level - 2))
        d_ff = 64 * draw.integer(16, 512 * 2 ** (level - 2))
    return {"d_model": d_model, "d_ff": d_ff, "n_heads": n_heads, "n_kv_heads": n_kv_heads,
            "head_dim": head_dim, "mlp_matrices": draw.choice((2, 3))}


def value_bytes(draw: Draw, level: int, wide: tuple[int, ...] = (1, 2, 4)) -> int:
    """Bytes per value: bf16 at levels 1-2, also int8/fp32 (or the given sizes) above."""
    return 2 if round_numbers(level) else draw.choice(wide)


def jitter(draw: Draw, level: int, step: int) -> int:
    """0 at levels 1-2; above, an offset in [1, step) that moves a size off its round multiple."""
    return 0 if round_numbers(level) else draw.integer(1, step - 1)
