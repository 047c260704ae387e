"""Hardware and model numbers the scaling samplers share, so every family grows the same way.

Levels 1-2 draw round numbers (whole TFLOP/s, GB/s, billions of parameters) about the size of
the canonical tasks; levels 3-5 draw non-round ones (any MFLOP/s, MB/s, any parameter count), so
a model cannot lean on mental arithmetic, and the ranges widen with the level.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction

from exactgrade.domains.scaling.hardware import (
    ANY_LINK,
    FULL_READ_MS,
    HBM_BANDWIDTH,
    HBM_CAPACITY,
    HBM_PER_PEAK,
    HOST_LINK,
    PEAK_FLOPS,
    RIDGE,
    SERVER_HBM,
    TP_LINK,
    Range,
    draw_in,
    require,
    ridge_ok,
)
from exactgrade.family import Draw, Reject


def rows(level: int, base: int) -> int:
    """The number of rows at a level: the canonical count at level 1, one more per level."""
    return base + level - 1


def round_numbers(level: int) -> bool:
    return level <= 2


def peak_flops(draw: Draw, level: int, bandwidth: int | None = None) -> int:
    """FLOP/s of one chip (hardware.PEAK_FLOPS): 100 to 1000 TFLOP/s in steps of 10 at levels 1-2,
    any GFLOP/s above; given the chip's HBM bandwidth, redrawn until the ridge point is real."""
    while True:
        peak = draw_in(draw, PEAK_FLOPS, 10**9, 10**13, round_numbers(level), 10**15)
        if bandwidth is None or ridge_ok(peak, bandwidth):
            return peak


def hbm_bandwidth(draw: Draw, level: int, peak: int | None = None) -> int:
    """HBM bytes/s (hardware.HBM_BANDWIDTH): 500 to 5000 GB/s in steps of 100 at levels 1-2, any
    MB/s up to 6 TB/s above; given the chip's peak FLOP/s, redrawn until the ridge point is real."""
    rng = HBM_BANDWIDTH.within(low=5 * 10**11, high=6 * 10**12)
    while True:
        bandwidth = draw_in(draw, rng, 10**6, 10**11, round_numbers(level), 5 * 10**12)
        if peak is None or ridge_ok(peak, bandwidth):
            return bandwidth


def bandwidth_for_capacity(draw: Draw, level: int, capacity: int, peak: int | None = None) -> int:
    """HBM bytes/s of a chip holding capacity bytes: reading the whole HBM once takes as long as on
    a real part (hardware.FULL_READ_MS), the bandwidth in its own real range and, given the chip's
    peak FLOP/s, at a real ridge point; whole GB/s at levels 1-2 where one fits, else MB/s.
    Reject when none does (a capacity and a bandwidth each real can still pair as no part does)."""
    low = max(HBM_BANDWIDTH.low, -(-capacity * 1000 // FULL_READ_MS.high))
    high = min(HBM_BANDWIDTH.high, capacity * 1000 // FULL_READ_MS.low)
    if peak is not None:
        low, high = max(low, -(-peak // RIDGE.high)), min(high, peak // RIDGE.low)
    step = 10**9 if round_numbers(level) and high // 10**9 > -(-low // 10**9) else 10**6
    if -(-low // step) > high // step:
        raise Reject(f"no real HBM bandwidth reads {capacity} bytes as a real part does")
    return step * draw.integer(-(-low // step), high // step)


def peak_and_bandwidth(draw: Draw, level: int) -> tuple[int, int]:
    """A chip's peak FLOP/s and HBM bandwidth, with a ridge point of a real order."""
    peak = peak_flops(draw, level)
    return peak, hbm_bandwidth(draw, level, peak)


def chip_at_ridge(
    draw: Draw, level: int, low: int, high: int, peaks: Range = PEAK_FLOPS, ridges: Range = RIDGE
) -> tuple[int, int]:
    """A chip's peak FLOP/s (of peaks: the matmul peak, or hardware.VECTOR_FLOPS for elementwise
    work with ridges hardware.VECTOR_RIDGE) and HBM bytes/s with a ridge point of low..high FLOPs
    per byte (a part of ridges), both numbers in their real ranges: the bandwidth drawn first
    (again while no such ridge gives a real peak), the ridge then."""
    if not ridges.low <= low <= high <= ridges.high:
        raise ValueError(f"a ridge of {low}..{high} FLOPs per byte is not of a real order")
    while True:
        bandwidth = hbm_bandwidth(draw, level)
        ratios = range(max(low, -(-peaks.low // bandwidth)), min(high, peaks.high // bandwidth) + 1)
        if ratios:
            return bandwidth * draw.choice(ratios), bandwidth


def slower_link(draw: Draw, faster: int, low: int, high: int, rng: Range) -> int:
    """Bytes/s of a link in rng (a range of hardware.py) 1/low to 1/high of a faster one's, the
    ratio drawn among those that give a link of rng; Reject when none does."""
    ratios = range(max(low, -(-faster // rng.high)), min(high, faster // rng.low) + 1)
    if not ratios:
        raise Reject(f"no link of {rng.parts} is 1/{low} to 1/{high} of {faster} bytes/s")
    return faster // draw.choice(ratios)


def host_link(draw: Draw, hbm: int, low: int, high: int) -> int:
    """Bytes/s of a host-memory link (hardware.HOST_LINK) 1/low to 1/high of the HBM bandwidth."""
    return slower_link(draw, hbm, low, high, HOST_LINK)


def chip_inputs(draw: Draw, level: int) -> dict:
    """A chip's inputs ``peak_flops`` and ``hbm_bandwidth`` (peak_and_bandwidth)."""
    peak, bandwidth = peak_and_bandwidth(draw, level)
    return {"peak_flops": peak, "hbm_bandwidth": bandwidth}


def tp_link_bandwidth(draw: Draw, level: int) -> int:
    """Bytes/s of a link inside a tensor-parallel group (hardware.TP_LINK: TPU ICI or NVLink, never
    a network link): 50 to 900 GB/s in steps of 50 at levels 1-2, any MB/s above."""
    return draw_in(draw, TP_LINK, 10**6, 50 * 10**9, round_numbers(level))


def chip_for_capacity(draw: Draw, level: int, capacity: int) -> dict:
    """A chip's inputs ``peak_flops`` and ``hbm_bandwidth`` for an HBM of capacity bytes, paired as
    a real part pairs them (peak_for_capacity, bandwidth_for_capacity)."""
    peak = peak_for_capacity(draw, level, capacity)
    return {"peak_flops": peak, "hbm_bandwidth": bandwidth_for_capacity(draw, level, capacity, peak)}


def link_bandwidth(draw: Draw, level: int) -> int:
    """Per-device link bytes/s (hardware.ANY_LINK): 25 to 400 GB/s in steps of 25 at levels 1-2,
    any MB/s from 20 to 450 GB/s above."""
    return draw_in(
        draw,
        ANY_LINK.within(low=20 * 10**9, high=450 * 10**9),
        10**6,
        25 * 10**9,
        round_numbers(level),
        400 * 10**9,
    )


def hbm_capacity(draw: Draw, level: int) -> int:
    """HBM bytes of one chip (hardware.HBM_CAPACITY): whole GB at levels 1-2, any byte count above."""
    return draw_in(draw, HBM_CAPACITY, 1, 10**9, round_numbers(level))


def hbm_capacity_for_peak(draw: Draw, level: int, peak: int) -> int:
    """HBM bytes of a chip of the given peak FLOP/s, as much per FLOP/s as a real part holds
    (hardware.HBM_PER_PEAK): a capacity drawn apart from the peak posed 24 GB at 1.6 PFLOP/s."""
    low, high = -(-HBM_PER_PEAK.low * peak // 10**6), HBM_PER_PEAK.high * peak // 10**6
    rng = HBM_CAPACITY.within(low=low, high=high)
    return draw_in(draw, rng, 1, 10**9, round_numbers(level))


def peak_for_capacity(draw: Draw, level: int, capacity: int) -> int:
    """FLOP/s of a chip holding capacity bytes of HBM, as much peak per byte as a real part has
    (hardware.HBM_PER_PEAK; peak_flops' steps): a peak drawn apart posed 112 GB at 213 TFLOP/s."""
    low = max(PEAK_FLOPS.low, -(-capacity * 10**6 // HBM_PER_PEAK.high))
    rng = PEAK_FLOPS.within(low=low, high=capacity * 10**6 // HBM_PER_PEAK.low)
    step = 10**13 if round_numbers(level) and rng.high // 10**13 >= -(-rng.low // 10**13) else 10**9
    return draw_in(draw, rng, step)


def capacity_between(draw: Draw, low: int | Fraction, high: int | Fraction) -> int:
    """An HBM capacity of one chip (hardware.HBM_CAPACITY) 1-99% of the way between two memory
    needs, clipped to the real range; Reject when the needs leave it (a capacity set between two
    needs must still be one a real part has)."""
    low, high = max(low, HBM_CAPACITY.low), min(high, HBM_CAPACITY.high)
    if low >= high:
        raise Reject("no real HBM capacity lies between the two needs")
    return math.ceil(low + (high - low) * Fraction(draw.integer(1, 99), 100))


def overlaps_capacities(low: int | Fraction, high: int | Fraction) -> bool:
    """Whether some real HBM capacity lies strictly between two memory needs."""
    return max(low, HBM_CAPACITY.low) < min(high, HBM_CAPACITY.high)


def n_params(draw: Draw, level: int) -> int:
    """A dense model size: tenths of billions from 1 B to 50*level B at levels 1-2; any count
    up to 100 * 2**(level-2) B above."""
    if round_numbers(level):
        return 10**8 * draw.integer(10, 500 * level)
    return draw.integer(10**9, 10**11 * 2 ** (level - 2))


def n_params_between(draw: Draw, level: int, low: int | Fraction, high: int | Fraction) -> int:
    """A dense model size strictly between low and high, within n_params' range at the level
    (tenths of billions at levels 1-2): the model chosen to fit a real device, never the device
    to fit the model. Reject when no such size exists."""
    step = 10**8 if round_numbers(level) else 1
    most = 5 * 10**10 * level if round_numbers(level) else 10**11 * 2 ** (level - 2)
    fewest, most = max(10**9 // step, low // step + 1), min(most // step, -(-high // step) - 1)
    if fewest > most:
        raise Reject(f"no model of {float(low):.4g}-{float(high):.4g} parameters is of the level's sizes")
    return step * draw.integer(fewest, most)


def resident_bytes(bandwidth: int) -> int:
    """The most HBM a chip of this bandwidth holds: one that reads it whole as a real part does
    (hardware.FULL_READ_MS), at most the largest chip's (a 65 GB model on a 0.8 TB/s chip, an
    81 ms read, is no part's)."""
    return min(HBM_CAPACITY.high, bandwidth * FULL_READ_MS.high // 1000)


def model_on_chip(draw: Draw, level: int, bytes_per_param: int | Fraction, bandwidth: int) -> int:
    """A dense model size (n_params_between) whose weights fit one chip of this HBM bandwidth."""
    return n_params_between(draw, level, 0, Fraction(resident_bytes(bandwidth)) / bytes_per_param)


def require_resident(what: str, nbytes: int | Fraction, bandwidth: int) -> None:
    """Reject what must sit in one chip's HBM but exceeds what a chip of its bandwidth holds."""
    if nbytes > resident_bytes(bandwidth):
        raise Reject(
            f"{what} ({float(nbytes) / 1e9:.4g} GB) exceeds the HBM of a chip of "
            f"{float(bandwidth) / 1e12:.4g} TB/s ({FULL_READ_MS.parts})"
        )


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


def divisors_of(n: int) -> list[int]:
    """The divisors of n, increasing."""
    return [d for d in range(1, n + 1) if n % d == 0]


def letters(prefix: str, k: int) -> list[str]:
    """Row names prefix_a, prefix_b, ..."""
    return [f"{prefix}_{chr(ord('a') + i)}" for i in range(k)]


def chips(draw: Draw, level: int, k: int) -> list[dict]:
    """k named chips with their peak FLOP/s and HBM bandwidth."""
    return [{"name": name, **chip_inputs(draw, level)} for name in letters("chip", k)]


def kv_bytes_per_token(shape: Mapping[str, int]) -> int:
    """KV-cache bytes one cached position holds: a key and a value vector per KV head and layer
    (a sampler's or rule's view of the inputs `layers`, `n_kv_heads`, `head_dim`, `kv_bytes`)."""
    return 2 * shape["layers"] * shape["n_kv_heads"] * shape["head_dim"] * shape["kv_bytes"]


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
    return {
        "d_model": d_model,
        "d_ff": d_ff,
        "n_heads": n_heads,
        "n_kv_heads": n_kv_heads,
        "head_dim": head_dim,
        "mlp_matrices": draw.choice((2, 3)),
    }


BF16_ONLY = (2,)
"""The operand width of a matmul timed at the bf16 peak (`peak_flops`): an int8 or fp32 operand runs
at another peak (twice it, or a TF32/vector fraction of it), which these tasks do not pose."""


def value_bytes(draw: Draw, level: int, wide: tuple[int, ...] = (1, 2, 4)) -> int:
    """Bytes per value: bf16 at levels 1-2, also int8/fp32 (or the given sizes) above."""
    return 2 if round_numbers(level) else draw.choice(wide)


def jitter(draw: Draw, level: int, step: int) -> int:
    """0 at levels 1-2; above, an offset in [1, step) that moves a size off its round multiple."""
    return 0 if round_numbers(level) else draw.integer(1, step - 1)


# ---- level-1 samplers that upper levels of their families draw from too


def chip_count(draw: Draw, level: int) -> int:
    if round_numbers(level):
        return 2 ** draw.integer(6, 12 + level)
    return draw.integer(64, 2 ** (12 + level))


def step_time(draw: Draw, level: int, flops_per_step: int, capacity: int) -> Fraction:
    """A measured step time near a plausible utilization, to 0.1 s (levels 1-2) or 1 ms."""
    ideal = Fraction(flops_per_step, capacity) / fraction(draw, level, 25, 65)
    scale = 10 if round_numbers(level) else 1000
    step = Fraction(round(ideal * scale), scale)
    if step <= 0:
        raise Reject("the step time rounds to zero")
    return step


def tokens_per_step(draw: Draw, level: int) -> int:
    if round_numbers(level):
        return 2**20 * draw.integer(1, 8 * level)
    return 1024 * draw.integer(256, 4096 * level)


def sample_utilization_by_counting(draw: Draw, level: int) -> dict:
    params, chips, peak = n_params(draw, level), chip_count(draw, level), peak_flops(draw, level)
    tokens = tokens_per_step(draw, level)
    seq_len = 1024 * draw.integer(1, 32 * level) + jitter(draw, level, 1024)
    layers, n_heads = draw.integer(8, 40 * level), draw.integer(8, 64)
    head_dim = draw.choice((64, 128) if round_numbers(level) else (64, 80, 96, 128, 256))
    # The step time is drawn against the largest count (recomputation), so every utilization
    # stays below 100%.
    hardware = 8 * params + 16 * layers * n_heads * head_dim * seq_len
    return {
        "n_params": params,
        "layers": layers,
        "n_heads": n_heads,
        "head_dim": head_dim,
        "seq_len": seq_len,
        "tokens_per_step": tokens,
        "step_time_s": step_time(draw, level, hardware * tokens, chips * peak),
        "chips": chips,
        "peak_flops": peak,
    }


def sample_moe_training_flops(draw: Draw, level: int) -> dict:
    shape = attention_shape(draw, level)
    n_experts = draw.choice((8, 16, 32, 64, 128) if level > 1 else (8, 16))
    return {
        "layers": draw.integer(8, 40 * level),
        "d_model": shape["d_model"],
        "n_heads": shape["n_heads"],
        "n_kv_heads": shape["n_kv_heads"],
        "head_dim": shape["head_dim"],
        "expert_d_ff": shape["d_ff"],
        "n_experts": n_experts,
        "top_k": draw.integer(1, min(8, n_experts - 1)),
        "mlp_matrices": shape["mlp_matrices"],
        "n_tokens": n_tokens(draw, level),
    }


def sample_kv_cache_size(draw: Draw, level: int) -> dict:
    shape = attention_shape(draw, level)
    n_heads = shape["n_heads"]
    kv_heads = sorted({n_heads, 1, *(d for d in range(2, n_heads) if n_heads % d == 0)}, reverse=True)
    kv_heads = sorted(draw.sample(kv_heads, min(len(kv_heads), rows(level, 3))), reverse=True)
    if len(kv_heads) < 2:
        raise Reject("a single attention variant")

    def name(h: int) -> str:
        return "mha" if h == n_heads else "mqa" if h == 1 else f"gqa_{h}"

    layers = draw.integer(8, 40 * level)
    configs = [
        {"name": name(h), "layers": layers, "n_kv_heads": h, "head_dim": shape["head_dim"]} for h in kv_heads
    ]
    seq_len = 1024 * draw.integer(1, 32 * level) + jitter(draw, level, 1024)
    return {
        "configs": configs,
        "seq_len": seq_len,
        "batch": draw.integer(1, 32 * level),
        "bytes_per_value": value_bytes(draw, level),
    }


def sample_max_batch_for_kv_cache(draw: Draw, level: int) -> dict:
    return sample_server_kv(draw, level)[0]


def sample_server_kv(draw: Draw, level: int) -> tuple[dict, int]:
    """A server's model and KV-cache shape, and its chip count (1-16 chips of one real capacity,
    at most hardware.SERVER_HBM in total)."""
    chips = draw.choice((1, 2, 4, 8, 16))
    hbm = int(require("hbm_bytes", chips * hbm_capacity(draw, level), SERVER_HBM))
    weight_bytes = draw.choice((1, 2))
    most = hbm * 4 // (5 * weight_bytes)  # leave at least a fifth of the HBM for the cache
    params = 10**9 * draw.integer(1, most // 10**9) if round_numbers(level) else draw.integer(10**9, most)
    shape = attention_shape(draw, level)
    seq_lens = [1024 * s for s in sorted_sample(draw, 1, 32 * 2**level, rows(level, 3))]
    if not round_numbers(level):
        seq_lens = sorted({s - draw.integer(0, 1023) for s in seq_lens})
    inputs = {
        "hbm_bytes": hbm,
        "n_params": params,
        "weight_bytes": weight_bytes,
        "layers": draw.integer(8, 40 * level),
        "n_kv_heads": shape["n_kv_heads"],
        "head_dim": shape["head_dim"],
        "kv_bytes": draw.choice((1, 2)),
        "seq_lens": seq_lens,
    }
    per_token = kv_bytes_per_token(inputs)
    longest = per_token * seq_lens[-1]
    if longest > hbm - params * weight_bytes:
        raise Reject("the longest sequence does not fit")
    return inputs, chips


def sample_min_compute_bound_batch(draw: Draw, level: int) -> dict:
    """Half the instances have a chip whose critical intensity no batch reaches (the None
    branch): a narrower layer, whose intensity limit 2*D*F / (bytes*(D + F)) is lower, and one
    chip drawn above that limit; every instance keeps a chip below it."""
    narrow = draw.chance(4, 5)  # narrow draws are refused more often (most chips above a narrow limit)
    d_model = 128 * draw.integer(2, 16) if narrow else 1024 * draw.integer(2, 4 * 2**level)
    d_ff = d_model * draw.choice((2, 3, 4)) + (0 if round_numbers(level) else 16 * draw.integer(1, 15))
    width = value_bytes(draw, level)
    limit = Fraction(2 * d_model * d_ff, width * (d_model + d_ff))
    drawn = chips(draw, level, rows(level, 3))
    reachable = [Fraction(c["peak_flops"], c["hbm_bandwidth"]) < limit for c in drawn]
    if not any(reachable) or narrow != (not all(reachable)):
        raise Reject("the None branch is not where this draw put it")
    return {"chips": drawn, "d_model": d_model, "d_ff": d_ff, "bytes_per_value": width}
