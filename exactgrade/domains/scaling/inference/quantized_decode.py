"""The quantized_decode family of inference: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling._sample import (
    bandwidth_for_capacity,
    chip_inputs,
    hbm_capacity,
    model_on_chip,
    n_params_between,
    peak_flops,
    resident_bytes,
    round_numbers,
    rows,
)
from exactgrade.domains.scaling._task import (
    known_mistake,
    near_integer,
    near_tie,
    scaling_level,
    smallest_satisfying,
    tie_edge,
)
from exactgrade.domains.scaling._text import DEQUANT_AT_PEAK, SAME_SPEED_ANY_FORMAT
from exactgrade.family import Draw, Reject, five_levels
from exactgrade.task import Task


def quantized_decode(n_params, formats, batch, peak_flops, hbm_bandwidth):
    """Decode-step time as weight precision drops; speedup relative to the first format."""
    from fractions import Fraction

    compute_s = Fraction(2 * n_params * batch, peak_flops)
    times = []
    rows = []
    for fmt in formats:
        memory_s = Fraction(n_params * fmt["bits_per_weight"], 8 * hbm_bandwidth)
        times.append(max(compute_s, memory_s))
        rows.append(
            {
                "format": fmt["name"],
                "time_s": times[-1],
                "speedup": times[0] / times[-1],
                "bound": "compute" if compute_s >= memory_s else "memory",
            }
        )
    return {"rows": rows}


def quantized_decode_float(n_params, formats, batch, peak_flops, hbm_bandwidth, mistake=None):
    known_mistake(mistake, "bits_as_bytes")
    per_byte = 1 if mistake == "bits_as_bytes" else 8
    compute = batch * 2.0 * n_params / peak_flops
    base = max(compute, formats[0]["bits_per_weight"] / per_byte * n_params / hbm_bandwidth)
    rows = []
    for f in formats:
        memory = f["bits_per_weight"] / per_byte * n_params / hbm_bandwidth
        time = max(compute, memory)
        rows.append(
            {
                "format": f["name"],
                "time_s": time,
                "speedup": base / time,
                "bound": "memory" if memory > compute else "compute",
            }
        )
    return {"rows": rows}


_FORMATS = (("fp8", 8), ("int8", 8), ("int4", 4), ("int3", 3), ("int2", 2), ("fp6", 6))


_SCALED_FORMATS = (
    ("int4_g128_scales", Fraction(33, 8)),
    ("int4_g32_scales", Fraction(9, 2)),
    ("int8_g64_scales", Fraction(33, 4)),
)


def sample_quantized_decode(draw: Draw, level: int) -> dict:
    pool = _FORMATS if round_numbers(level) else _FORMATS + _SCALED_FORMATS
    formats = [("bf16", 16), *draw.sample(pool, rows(level, 3) - 1)]
    chip = chip_inputs(draw, level)
    return {
        "n_params": model_on_chip(draw, level, 2, chip["hbm_bandwidth"]),  # bf16, the widest, fits
        "formats": [{"name": name, "bits_per_weight": bits} for name, bits in formats],
        "batch": draw.integer(1, 128 * level),
        **chip,
    }


def _quantized_not_tied(task: Task) -> str | None:
    i = task.inputs
    compute = Fraction(2 * i["n_params"] * i["batch"], i["peak_flops"])
    for fmt in i["formats"]:
        problem = tie_edge(
            f"{fmt['name']}: compute time against memory time",
            compute,
            Fraction(i["n_params"] * fmt["bits_per_weight"], 8 * i["hbm_bandwidth"]),
        )
        if problem:
            return problem
    return None


LEVEL_1 = scaling_level(
    "inference",
    quantized_decode,
    """\
A model of `n_params` parameters decodes a batch of `batch` sequences; each step costs
2*n_params*batch FLOPs at `peak_flops` FLOP/s
"""
    + SAME_SPEED_ANY_FORMAT
    + """
and reads every weight once at `hbm_bandwidth` bytes/s, a weight taking bits_per_weight / 8 bytes
(bits_per_weight already includes any quantization scales of the format; ignore the KV cache). For
each format in `formats`, give the roofline step time in seconds, the speedup over the first
format (its time / this time) and the bound.""",
    '{"rows": [{"format": <str>, "time_s": <number>, "speedup": <number>, '
    '"bound": "compute" | "memory"}, ...]}  # one row per format, in order',
    quantized_decode_float,
    "bits_as_bytes",
    sample=sample_quantized_decode,
    reject=_quantized_not_tied,
    varying=("rows[].bound",),
)


FORMATS = """\
A weight format stores each weight as a code of `code_bits` bits; weights are grouped in
consecutive groups of `group_size` weights, and each group also stores one scale of `scale_bits`
bits (a format with group_size 0 has no scales)."""


def grouped_quantized_decode(n_params, formats, batch, peak_flops, hbm_bandwidth):
    """quantized_decode with the bits per weight derived: code bits plus the group's scale."""
    from fractions import Fraction

    compute_s = Fraction(2 * n_params * batch, peak_flops)
    times, rows = [], []
    for fmt in formats:
        bits = fmt["code_bits"] + (Fraction(fmt["scale_bits"], fmt["group_size"]) if fmt["group_size"] else 0)
        memory_s = Fraction(n_params) * bits / (8 * hbm_bandwidth)
        times.append(max(compute_s, memory_s))
        rows.append(
            {
                "format": fmt["name"],
                "time_s": times[-1],
                "speedup": times[0] / times[-1],
                "bound": "compute" if compute_s >= memory_s else "memory",
            }
        )
    return {"rows": rows}


def grouped_quantized_decode_float(n_params, formats, batch, peak_flops, hbm_bandwidth, mistake=None):
    known_mistake(mistake, "ignore_scales")
    compute = 2.0 * batch * n_params / peak_flops
    out, base = [], None
    for f in formats:
        scales = (
            0.0 if mistake == "ignore_scales" or not f["group_size"] else f["scale_bits"] / f["group_size"]
        )
        memory = (f["code_bits"] + scales) / 8 * n_params / hbm_bandwidth
        time = max(compute, memory)
        base = time if base is None else base
        out.append(
            {
                "format": f["name"],
                "time_s": time,
                "speedup": base / time,
                "bound": "memory" if memory > compute else "compute",
            }
        )
    return {"rows": out}


_GROUPED = (
    ("fp8", 8, 0, 0),
    ("int8_g128", 8, 128, 16),
    ("int4_g128", 4, 128, 16),
    ("int4_g32", 4, 32, 16),
    ("int4_g64_fp32", 4, 64, 32),
    ("int3_g64", 3, 64, 16),
    ("int2_g16", 2, 16, 16),
    ("nf4_g64", 4, 64, 8),
)


def sample_grouped(draw: Draw, level: int) -> dict:
    """bf16 first and formats whose compute/memory bound differs at the drawn batch."""
    chosen = [("bf16", 16, 0, 0), *draw.sample(_GROUPED, rows(level, 3) - 1)]
    chip = chip_inputs(draw, level)
    inputs = {
        "n_params": model_on_chip(draw, level, 2, chip["hbm_bandwidth"]),  # bf16, the widest, fits
        "formats": [{"name": a, "code_bits": b, "group_size": g, "scale_bits": sb} for a, b, g, sb in chosen],
        "batch": 1,
        **chip,
    }
    bits = sorted(b + (Fraction(sb, g) if g else 0) for _, b, g, sb in chosen)
    # compute-bound iff batch >= bits * peak / (16 * bandwidth): a batch between two formats' thresholds
    k = draw.integer(1, len(bits) - 1)
    low = bits[k - 1] * inputs["peak_flops"] / (16 * inputs["hbm_bandwidth"])
    high = bits[k] * inputs["peak_flops"] / (16 * inputs["hbm_bandwidth"])
    first, last = math.floor(low) + 1, math.ceil(high) - 1
    if first > last:
        raise Reject("no whole batch between two formats' thresholds")
    inputs["batch"] = draw.integer(first, last)
    return inputs


def _grouped_edges(task: Task) -> str | None:
    i = task.inputs
    compute = Fraction(2 * i["n_params"] * i["batch"], i["peak_flops"])
    for f in i["formats"]:
        bits = f["code_bits"] + (Fraction(f["scale_bits"], f["group_size"]) if f["group_size"] else 0)
        problem = tie_edge(
            f"{f['name']}: compute against memory",
            compute,
            Fraction(i["n_params"]) * bits / (8 * i["hbm_bandwidth"]),
        )
        if problem:
            return problem
    return None


_L2 = (
    FORMATS
    + """
A model of `n_params` parameters decodes a batch of `batch` sequences; each step costs
2*n_params*batch FLOPs at `peak_flops` FLOP/s
"""
    + SAME_SPEED_ANY_FORMAT
    + """
and reads every weight, with its share of the scales, once at `hbm_bandwidth` bytes/s (8 bits per
byte; ignore the KV cache). For each format in `formats`, give the roofline step time in seconds,
the speedup over the first format (its time / this time) and the bound."""
)


LEVEL_2 = scaling_level(
    "inference",
    grouped_quantized_decode,
    _L2,
    '{"rows": [{"format": <str>, "time_s": <number>, "speedup": <number>, '
    '"bound": "compute" | "memory"}, ...]}  # one row per format, in order',
    grouped_quantized_decode_float,
    "ignore_scales",
    sample=sample_grouped,
    reject=_grouped_edges,
    varying=("rows[].bound",),
)


def dequantized_decode(n_params, formats, batch, kv_cache_bytes, peak_flops, hbm_bandwidth):
    """Per format: 2 N B FLOPs plus dequant_flops per weight, against the weights at their bits
    plus the KV cache; speedup over the first format."""
    from fractions import Fraction

    times, rows = [], []
    for fmt in formats:
        compute = Fraction(2 * n_params * batch + fmt["dequant_flops_per_weight"] * n_params, peak_flops)
        memory = (n_params * Fraction(fmt["bits_per_weight"]) / 8 + kv_cache_bytes) / hbm_bandwidth
        times.append(max(compute, memory))
        rows.append(
            {
                "format": fmt["name"],
                "time_s": times[-1],
                "speedup": times[0] / times[-1],
                "bound": "compute" if compute >= memory else "memory",
            }
        )
    return {"rows": rows}


def dequantized_decode_float(
    n_params, formats, batch, kv_cache_bytes, peak_flops, hbm_bandwidth, mistake=None
):
    known_mistake(mistake, "no_dequant_work")
    out, base = [], None
    for f in formats:
        work = 0.0 if mistake == "no_dequant_work" else f["dequant_flops_per_weight"]
        compute = (2.0 * batch + work) * n_params / peak_flops
        memory = (f["bits_per_weight"] / 8 * n_params + kv_cache_bytes) / hbm_bandwidth
        time = max(compute, memory)
        base = time if base is None else base
        out.append(
            {
                "format": f["name"],
                "time_s": time,
                "speedup": base / time,
                "bound": "memory" if memory > compute else "compute",
            }
        )
    return {"rows": out}


_DEQUANT = (
    ("fp8", Fraction(8), 1),
    ("int8_g128", Fraction(65, 8), 2),
    ("int4_g128", Fraction(33, 8), 4),
    ("int4_g32", Fraction(9, 2), 4),
    ("int3_g64", Fraction(13, 4), 6),
    ("int2_g16", Fraction(3), 8),
)


def _formats(draw: Draw, count: int) -> list[dict]:
    chosen = [("bf16", Fraction(16), 0), *draw.sample(_DEQUANT, count - 1)]
    scale = draw.integer(1, 4)
    return [{"name": a, "bits_per_weight": b, "dequant_flops_per_weight": w * scale} for a, b, w in chosen]


def sample_dequantized(draw: Draw, level: int) -> dict:
    """A KV cache of at most half the chip's HBM and a model whose bf16 weights (the widest
    format) fit beside it."""
    formats, chip = _formats(draw, rows(level, 3)), chip_inputs(draw, level)
    held = resident_bytes(chip["hbm_bandwidth"])
    kv = draw.integer(10**8, min(10**11, held // 2))
    inputs = {
        "n_params": n_params_between(draw, level, 0, Fraction(held - kv, 2)),
        "formats": formats,
        "batch": 1,
        "kv_cache_bytes": kv,
        **chip,
    }
    # the batch that puts the middle format on its ridge, moved by a random factor
    mid = inputs["formats"][len(inputs["formats"]) // 2]
    memory = (inputs["n_params"] * mid["bits_per_weight"] / 8 + inputs["kv_cache_bytes"]) / inputs[
        "hbm_bandwidth"
    ]
    ridge = (memory * inputs["peak_flops"] / inputs["n_params"] - mid["dequant_flops_per_weight"]) / 2
    if ridge < 2:
        raise Reject("the ridge batch is below two")
    inputs["batch"] = max(1, math.floor(ridge * Fraction(draw.integer(50, 150), 100)))
    return inputs


def _dequantized_edges(task: Task) -> str | None:
    if len({row["bound"] for row in task.expected["rows"]}) < 2:
        return "every format has the same bound"
    i = task.inputs
    for f in i["formats"]:
        compute = Fraction(
            2 * i["n_params"] * i["batch"] + f["dequant_flops_per_weight"] * i["n_params"], i["peak_flops"]
        )
        memory = (i["n_params"] * f["bits_per_weight"] / 8 + i["kv_cache_bytes"]) / i["hbm_bandwidth"]
        problem = tie_edge(f"{f['name']}: compute against memory", compute, memory)
        if problem:
            return problem
    return None


_L3 = """\
A model of `n_params` parameters decodes a batch of `batch` sequences on a chip with `peak_flops`
FLOP/s and `hbm_bandwidth` bytes/s, compute and reads overlapping. Each step runs the model on one
token per sequence (2 FLOPs per parameter per token) and first dequantises every weight once
(`dequant_flops_per_weight` FLOPs per weight, on the same units), and reads every weight once, at
`bits_per_weight` bits per weight (scales included; 8 bits per byte), plus the KV cache of
`kv_cache_bytes` bytes. For each format in `formats`, give the step time in seconds, the speedup
over the first format (its time / this time) and the bound ("compute" when the compute time is
at least the read time).
""" + DEQUANT_AT_PEAK


LEVEL_3 = scaling_level(
    "inference",
    dequantized_decode,
    _L3,
    '{"rows": [{"format": <str>, "time_s": <number>, "speedup": <number>, '
    '"bound": "compute" | "memory"}, ...]}  # one row per format, in order',
    dequantized_decode_float,
    "no_dequant_work",
    sample=sample_dequantized,
    reject=_dequantized_edges,
)


def largest_memory_bound_batch(n_params, formats, peak_flops, hbm_bandwidth):
    """Per format, the largest batch whose decode step is still strictly memory-bound."""
    import math
    from fractions import Fraction

    rows = []
    for fmt in formats:
        # 2*N*B/peak < N*bits/8/bw  <=>  B < bits * peak / (16 * bw)
        bound = Fraction(fmt["bits_per_weight"]) * peak_flops / (16 * hbm_bandwidth)
        batch = math.ceil(bound) - 1
        rows.append({"format": fmt["name"], "max_batch": batch if batch >= 1 else None})
    return {"rows": rows}


def largest_memory_bound_batch_float(n_params, formats, peak_flops, hbm_bandwidth, mistake=None):
    known_mistake(mistake, "bits_as_bytes")
    per_byte = 1 if mistake == "bits_as_bytes" else 8
    rows = []
    for f in formats:
        memory = f["bits_per_weight"] / per_byte * n_params / hbm_bandwidth
        b = smallest_satisfying(lambda b, m=memory: 2.0 * n_params * b / peak_flops >= m, 10**9)
        rows.append({"format": f["name"], "max_batch": (b - 1) if b and b > 1 else None})
    return {"rows": rows}


def sample_quantized_batch(draw: Draw, level: int) -> dict:
    formats = [
        ("bf16", 16),
        ("fp8", 8),
        ("int4", 4),
        ("int4_g32_scales", Fraction(9, 2)),
        ("int3", 3),
        ("int2", 2),
        ("int8_g64_scales", Fraction(33, 4)),
    ]
    picked = [("bf16", 16), *draw.sample(formats[1:], 1 + level)]
    chip = chip_inputs(draw, level)
    return {
        "n_params": model_on_chip(draw, level, 2, chip["hbm_bandwidth"]),  # bf16, the widest, fits
        "formats": [{"name": name, "bits_per_weight": bits} for name, bits in picked],
        **chip,
    }


def _quantized_edges(task: Task) -> str | None:
    i = task.inputs
    for f in i["formats"]:
        if near_integer(Fraction(f["bits_per_weight"]) * i["peak_flops"] / (16 * i["hbm_bandwidth"])):
            return f"{f['name']}: the memory-bound batches end on an integer"
    return None


QUANTIZED_L4 = (
    """\
A model of `n_params` parameters decodes a batch of B sequences; each step costs 2*n_params*B
FLOPs at `peak_flops` FLOP/s
"""
    + SAME_SPEED_ANY_FORMAT
    + """
and reads every weight once at `hbm_bandwidth` bytes/s, a weight taking bits_per_weight / 8 bytes
(bits_per_weight already includes any quantization scales; ignore the KV cache). For each format
in `formats`, give the largest batch at which the step is still strictly memory-bound, or None if
even batch 1 is not."""
)


LEVEL_4 = scaling_level(
    "inference",
    largest_memory_bound_batch,
    QUANTIZED_L4,
    '{"rows": [{"format": <str>, "max_batch": <int> | None}, ...]}  # one row per format, in order',
    largest_memory_bound_batch_float,
    "bits_as_bytes",
    sample=sample_quantized_batch,
    reject=_quantized_edges,
)


def best_format(
    n_params, formats, kv_bytes_per_token, hbm_bytes, peak_flops, hbm_bandwidth, max_step_s, seq_lens
):
    """Per context: the format and batch of the most tokens per second. With dequantisation
    work fixed per step, B / step(B) rises with B, so a format's best batch is its largest
    allowed one; without it (bf16) the rate is flat once compute-bound, and the first such B
    wins the tie. Ties between formats: the earlier one."""
    import math
    from fractions import Fraction

    rows = []
    for seq_len in seq_lens:
        best = None
        for fmt in formats:
            weights = n_params * Fraction(fmt["bits_per_weight"]) / 8
            per_seq = seq_len * kv_bytes_per_token
            fixed = Fraction(fmt["dequant_flops_per_weight"] * n_params, peak_flops)
            token = Fraction(2 * n_params, peak_flops)
            caps = [
                math.floor((hbm_bytes - weights) / per_seq),
                math.floor((max_step_s - fixed) / token),
                math.floor((max_step_s * hbm_bandwidth - weights) / per_seq),
            ]
            batch = min(caps)
            if batch < 1:
                continue
            slope = token - Fraction(per_seq, hbm_bandwidth)
            if fixed == 0 and slope > 0:  # no fixed work: flat once compute-bound, the first such B
                batch = min(batch, max(1, math.ceil(weights / hbm_bandwidth / slope)))
            step = max(fixed + token * batch, (weights + per_seq * batch) / hbm_bandwidth)
            rate = batch / step
            if best is None or rate > best[2]:
                best = (fmt["name"], batch, rate)
        if best is None:
            rows.append({"seq_len": seq_len, "format": None, "batch": None, "tokens_per_s": None})
        else:
            rows.append({"seq_len": seq_len, "format": best[0], "batch": best[1], "tokens_per_s": best[2]})
    return {"rows": rows}


def best_format_float(
    n_params,
    formats,
    kv_bytes_per_token,
    hbm_bytes,
    peak_flops,
    hbm_bandwidth,
    max_step_s,
    seq_lens,
    mistake=None,
):
    """Each format's largest allowed batch by bisection on the memory and the step; the best in
    floats."""
    known_mistake(mistake, "no_dequant_work")
    out = []
    for s in seq_lens:
        found = []
        for f in formats:
            weights = n_params * f["bits_per_weight"] / 8
            work = (
                0.0 if mistake == "no_dequant_work" else f["dequant_flops_per_weight"] * n_params / peak_flops
            )

            def step(b, weights=weights, work=work, s=s):
                return max(
                    work + 2.0 * n_params * b / peak_flops,
                    (weights + b * s * kv_bytes_per_token) / hbm_bandwidth,
                )

            def allowed(b, weights=weights, step=step, s=s):
                return weights + b * s * kv_bytes_per_token <= hbm_bytes and step(b) <= max_step_s * (
                    1 + 1e-13
                )

            if not allowed(1):
                continue
            low, high = 1, 2
            while allowed(high) and high < 2**40:
                low, high = high, 2 * high
            while high - low > 1:
                mid = (low + high) // 2
                low, high = (mid, high) if allowed(mid) else (low, mid)
            target = low / step(low)
            lo, hi = 0, low  # the first batch as fast per step-token as the largest (a flat stretch)
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if mid / step(mid) >= target * (1 - 1e-12) else (mid, hi)
            found.append(((f["name"], hi), hi / step(hi)))
        if not found:
            out.append({"seq_len": s, "format": None, "batch": None, "tokens_per_s": None})
            continue
        top = max(v for _, v in found)
        (name, b), v = next((k, v) for k, v in found if v >= top * (1 - 1e-12))
        out.append({"seq_len": s, "format": name, "batch": b, "tokens_per_s": v})
    return {"rows": out}


def sample_best(draw: Draw, level: int) -> dict:
    """The HBM holds bf16 weights with room to spare or only the narrow formats; contexts over a
    factor of 32, so a short context is limited by the step (dequantisation work) and a long one
    by the HBM (where narrow weights free room for more sequences)."""
    params = draw.integer(10**9, 60 * 10**9)
    formats = _formats(draw, rows(level, 1) - 1)
    hbm = hbm_capacity(draw, level)
    if 2 * params > hbm * 2 or params // 2 > hbm * 9 // 10:
        raise Reject("the model does not fit the HBM in a narrow format")
    bandwidth = bandwidth_for_capacity(draw, level, hbm)
    read = Fraction(params * 2, bandwidth)  # bf16 weights
    exponents = sorted(draw.sample(range(8, 18), rows(level, 1) - 1))
    if exponents[-1] - exponents[0] < 5:
        raise Reject("context lengths too close together")
    return {
        "n_params": params,
        "formats": formats,
        "kv_bytes_per_token": 1024 * draw.integer(16, 512),
        "hbm_bytes": hbm,
        "peak_flops": peak_flops(draw, level, bandwidth),
        "hbm_bandwidth": bandwidth,
        "max_step_s": Fraction(math.ceil(read * Fraction(draw.integer(60, 300), 100) * 10**6), 10**6),
        "seq_lens": [2**e - draw.integer(0, 2 ** (e - 2)) for e in exponents],
    }


def _best_rules(task: Task) -> str | None:
    i = task.inputs
    found = task.expected["rows"]
    if 2 * sum(row["format"] is None for row in found) > len(found):
        return "more than half of the rows are None"
    if len({row["format"] for row in found if row["format"] is not None}) < 2:
        return "the same format for every context length"
    for row in found:
        rates = []
        for f in i["formats"]:
            weights = i["n_params"] * Fraction(f["bits_per_weight"]) / 8
            per_seq = row["seq_len"] * i["kv_bytes_per_token"]
            fixed = Fraction(f["dequant_flops_per_weight"] * i["n_params"], i["peak_flops"])
            token = Fraction(2 * i["n_params"], i["peak_flops"])
            bounds = [
                (i["hbm_bytes"] - weights) / per_seq,
                (i["max_step_s"] - fixed) / token,
                (i["max_step_s"] * i["hbm_bandwidth"] - weights) / per_seq,
            ]
            if any(b > 0 and near_integer(b) for b in bounds):
                return f"context {row['seq_len']}, {f['name']}: a batch bound sits on an integer"
            batch = math.floor(min(bounds))
            slope = token - Fraction(per_seq, i["hbm_bandwidth"])
            if fixed == 0 and slope > 0 and batch >= 1:
                plateau = weights / i["hbm_bandwidth"] / slope
                if near_integer(plateau):
                    return f"context {row['seq_len']}: the compute-bound batch sits on an integer"
                batch = min(batch, max(1, math.ceil(plateau)))
            if batch >= 1:
                if batch > 20_000:
                    return "a batch above 20000"
                rates.append(
                    batch / max(fixed + token * batch, (weights + per_seq * batch) / i["hbm_bandwidth"])
                )
        rates.sort(reverse=True)
        if len(rates) > 1 and rates[0] != rates[1] and near_tie(rates[0], rates[1]):
            return f"context {row['seq_len']}: two formats within 1e-9"
    return None


_L5 = """\
A model of `n_params` parameters is served on one chip with `peak_flops` FLOP/s, `hbm_bandwidth`
bytes/s and `hbm_bytes` bytes of HBM, in a weight format you choose from `formats`. A decode step
for a batch of B sequences first dequantises every weight once (`dequant_flops_per_weight` FLOPs
per weight), runs the model on one token per sequence (2 FLOPs per parameter per token), reads
every weight once at `bits_per_weight` bits per weight (scales included; 8 bits per byte) and
reads each sequence's KV cache, `kv_bytes_per_token` bytes per cached position; compute and reads
overlap (the step takes the longer of the two) and the step yields B tokens. Every step must take
at most `max_step_s` seconds, and the HBM must hold the weights plus every sequence's cache. For
each context length in `seq_lens` (cached positions per sequence), give the format and the
integer batch B >= 1 of the highest throughput in tokens per second (on a tie, the format listed
first, then the smaller batch) and that throughput; None for all three if nothing is allowed.
""" + DEQUANT_AT_PEAK


LEVEL_5 = scaling_level(
    "inference",
    best_format,
    _L5,
    '{"rows": [{"seq_len": <int>, "format": <str> | None, "batch": <int> | None, '
    '"tokens_per_s": <number> | None}, ...]}  # one row per entry of `seq_lens`, in order',
    best_format_float,
    "no_dequant_work",
    sample=sample_best,
    reject=_best_rules,
    varying=("rows[].format",),
)


QUANTIZED_DECODE = five_levels(
    "quantized_decode",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L2: the bits per weight derived from the code bits and the group scales; L3: "
    "dequantisation work added to the compute and the KV cache to the reads (the bound "
    "differs between formats); L4: the largest strictly memory-bound batch per format "
    "(None); L5: the format and batch of the highest throughput per context length under "
    "a step-latency limit and the HBM (narrow weights free HBM but cost dequantisation)",
)
