"""Roofline tasks (sc-000..sc-006): arithmetic intensity against the chip's critical intensity.

Each reference is a self-contained function (imports inside, no globals): its source is the
program a perfect model would run. Each ``*_float`` twin recomputes the answer in floats with
the operations reordered, and can reproduce one named mistake; the tests use both.
"""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling import levels_compute5, levels_inverse2, levels_roofline, levels_roofline2
from exactgrade.domains.scaling._sample import (
    chip_inputs,
    hbm_bandwidth,
    jitter,
    peak_and_bandwidth,
    peak_flops,
    round_numbers,
    rows,
    sample_min_compute_bound_batch,
    sorted_sample,
    value_bytes,
)
from exactgrade.domains.scaling._task import Level, known_mistake, rounding_edge, scaling_family, tie_edge
from exactgrade.domains.scaling.hardware import TIERS, draw_in
from exactgrade.family import Branch, Draw, Reject
from exactgrade.task import Task

# ---------------------------------------------------------------- reference solutions


def matmul_roofline(batches, d_model, d_ff, weight_bytes, activation_bytes, peak_flops, hbm_bandwidth):
    """x[batch, d_model] @ W[d_model, d_ff]: read x and W, write y, once each."""
    from fractions import Fraction

    rows = []
    for batch in batches:
        flops = 2 * batch * d_model * d_ff
        traffic = (activation_bytes * batch * d_model + weight_bytes * d_model * d_ff
                   + activation_bytes * batch * d_ff)
        compute_s = Fraction(flops) / peak_flops
        memory_s = Fraction(traffic) / hbm_bandwidth
        rows.append({
            "batch": batch,
            "intensity": Fraction(flops) / traffic,
            "time_s": max(compute_s, memory_s),
            "bound": "compute" if compute_s >= memory_s else "memory",
        })
    return {"rows": rows}


def min_compute_bound_batch(chips, d_model, d_ff, bytes_per_value):
    """Smallest batch B with 2*B*D*F / (bytes*(B*D + D*F + B*F)) >= peak/bandwidth."""
    import math
    from fractions import Fraction

    rows = []
    for chip in chips:
        critical = Fraction(chip["peak_flops"], chip["hbm_bandwidth"])
        # Rearranged: B * (2*D*F - c*bytes*(D + F)) >= c*bytes*D*F.
        slope = 2 * d_model * d_ff - critical * bytes_per_value * (d_model + d_ff)
        if slope <= 0:
            min_batch = None
        else:
            min_batch = math.ceil(critical * bytes_per_value * d_model * d_ff / slope)
        rows.append({"chip": chip["name"], "critical_intensity": critical, "min_batch": min_batch})
    return {"rows": rows}


def elementwise_roofline(element_counts, flops_per_element, bytes_read_per_element,
                         bytes_written_per_element, peak_flops, hbm_bandwidth):
    """An elementwise kernel: each element read once, computed on, written once."""
    from fractions import Fraction

    rows = []
    for count in element_counts:
        flops = count * flops_per_element
        traffic = count * (bytes_read_per_element + bytes_written_per_element)
        compute_s = Fraction(flops) / peak_flops
        memory_s = Fraction(traffic) / hbm_bandwidth
        rows.append({
            "elements": count,
            "intensity": Fraction(flops) / traffic,
            "time_s": max(compute_s, memory_s),
            "bound": "compute" if compute_s >= memory_s else "memory",
        })
    return {"rows": rows}


def matmul_fraction_of_peak(shapes, bytes_per_value, peak_flops, hbm_bandwidth):
    """A[m, k] @ B[k, n]: roofline time and the fraction of peak FLOP/s it achieves."""
    from fractions import Fraction

    rows = []
    for m, k, n in shapes:
        flops = 2 * m * k * n
        traffic = bytes_per_value * (m * k + k * n + m * n)
        time_s = max(Fraction(flops) / peak_flops, Fraction(traffic) / hbm_bandwidth)
        rows.append({
            "shape": [m, k, n],
            "time_s": time_s,
            "fraction_of_peak": Fraction(flops) / time_s / peak_flops,
        })
    return {"rows": rows}


def decode_attention_roofline(batches, seq_len, n_heads, n_kv_heads, head_dim, bytes_per_value,
                              peak_flops, hbm_bandwidth):
    """One decode step of attention for one layer: each sequence reads its own K and V cache."""
    from fractions import Fraction

    rows = []
    for batch in batches:
        flops = 2 * 2 * batch * n_heads * seq_len * head_dim  # q.K^T and p.V
        traffic = 2 * batch * seq_len * n_kv_heads * head_dim * bytes_per_value  # K and V
        compute_s = Fraction(flops) / peak_flops
        memory_s = Fraction(traffic) / hbm_bandwidth
        rows.append({
            "batch": batch,
            "intensity": Fraction(flops) / traffic,
            "time_s": max(compute_s, memory_s),
            "bound": "compute" if compute_s >= memory_s else "memory",
        })
    return {"rows": rows}


def weight_streaming_roofline(batch, d_model, d_ff, bytes_per_value, peak_flops, tiers):
    """The same matmul with its operands streamed from memories of different bandwidth."""
    from fractions import Fraction

    flops = 2 * batch * d_model * d_ff
    traffic = bytes_per_value * (batch * d_model + d_model * d_ff + batch * d_ff)
    rows = []
    for tier in tiers:
        compute_s = Fraction(flops) / peak_flops
        memory_s = Fraction(traffic) / tier["bandwidth"]
        rows.append({
            "tier": tier["name"],
            "critical_intensity": Fraction(peak_flops) / tier["bandwidth"],
            "time_s": max(compute_s, memory_s),
            "bound": "compute" if compute_s >= memory_s else "memory",
        })
    return {"rows": rows}


# ---------------------------------------------------------------- float twins (tests only)


def matmul_roofline_float(batches, d_model, d_ff, weight_bytes, activation_bytes, peak_flops,
                          hbm_bandwidth, mistake=None):
    known_mistake(mistake, "weights_only_traffic")
    critical = peak_flops / hbm_bandwidth
    rows = []
    for b in batches:
        traffic = d_model * d_ff * weight_bytes + (d_model + d_ff) * b * activation_bytes
        if mistake == "weights_only_traffic":
            traffic = weight_bytes * d_ff * d_model
        intensity = 2.0 * b / traffic * d_model * d_ff
        bound = "compute" if intensity >= critical else "memory"
        time = d_model * (2 * b * d_ff / peak_flops) if bound == "compute" else traffic / hbm_bandwidth
        rows.append({"batch": b, "intensity": intensity, "time_s": time, "bound": bound})
    return {"rows": rows}


def min_compute_bound_batch_float(chips, d_model, d_ff, bytes_per_value, mistake=None):
    known_mistake(mistake, "batch_equals_critical_intensity")

    def intensity(b):
        return 2.0 * b * d_model * d_ff / (bytes_per_value * (d_model * d_ff + b * (d_model + d_ff)))

    rows = []
    for chip in chips:
        critical = chip["peak_flops"] / chip["hbm_bandwidth"]
        if mistake == "batch_equals_critical_intensity":
            batch = math.ceil(critical * bytes_per_value / 2)
        elif 2.0 * d_model * d_ff / (bytes_per_value * (d_model + d_ff)) <= critical:
            batch = None  # even an unbounded batch stays below the critical intensity
        else:  # search the monotone intensity instead of solving the inequality
            low, high = 0, 1
            while intensity(high) < critical:
                low, high = high, 2 * high
            while high - low > 1:
                middle = (low + high) // 2
                low, high = (low, middle) if intensity(middle) >= critical else (middle, high)
            batch = high
        rows.append({"chip": chip["name"], "critical_intensity": critical, "min_batch": batch})
    return {"rows": rows}


def elementwise_roofline_float(element_counts, flops_per_element, bytes_read_per_element,
                               bytes_written_per_element, peak_flops, hbm_bandwidth, mistake=None):
    known_mistake(mistake, "reads_only")
    moved = bytes_read_per_element + (0 if mistake == "reads_only" else bytes_written_per_element)
    intensity = flops_per_element / moved
    bound = "compute" if intensity * hbm_bandwidth >= peak_flops else "memory"
    rows = []
    for count in element_counts:
        time = count / peak_flops * flops_per_element if bound == "compute" else moved / hbm_bandwidth * count
        rows.append({"elements": count, "intensity": intensity, "time_s": time, "bound": bound})
    return {"rows": rows}


def matmul_fraction_of_peak_float(shapes, bytes_per_value, peak_flops, hbm_bandwidth, mistake=None):
    known_mistake(mistake, "uncapped_fraction")
    rows = []
    for m, k, n in shapes:
        intensity = 2.0 * m * k * n / (bytes_per_value * (m * k + k * n + m * n))
        fraction = intensity / (peak_flops / hbm_bandwidth)
        if mistake != "uncapped_fraction":
            fraction = min(1.0, fraction)
        time = (2.0 * m * k * n / peak_flops) / fraction
        rows.append({"shape": [m, k, n], "time_s": time, "fraction_of_peak": fraction})
    return {"rows": rows}


def decode_attention_roofline_float(batches, seq_len, n_heads, n_kv_heads, head_dim, bytes_per_value,
                                    peak_flops, hbm_bandwidth, mistake=None):
    known_mistake(mistake, "kv_shared_across_batch")
    rows = []
    for b in batches:
        readers = 1 if mistake == "kv_shared_across_batch" else b
        traffic = 2.0 * head_dim * n_kv_heads * seq_len * bytes_per_value * readers
        flops = 4.0 * seq_len * head_dim * n_heads * b
        intensity = flops / traffic
        bound = "compute" if flops / traffic >= peak_flops / hbm_bandwidth else "memory"
        rows.append({"batch": b, "intensity": intensity,
                     "time_s": flops / peak_flops if bound == "compute" else traffic / hbm_bandwidth,
                     "bound": bound})
    return {"rows": rows}


def weight_streaming_roofline_float(batch, d_model, d_ff, bytes_per_value, peak_flops, tiers, mistake=None):
    known_mistake(mistake, "weights_only_traffic")
    if mistake == "weights_only_traffic":
        traffic = float(d_model * d_ff * bytes_per_value)
    else:
        traffic = ((batch + d_ff) * d_model + batch * d_ff) * float(bytes_per_value)
    intensity = 2 * d_ff * (batch * d_model / traffic)
    rows = []
    for tier in tiers:
        critical = peak_flops / tier["bandwidth"]
        compute_bound = intensity >= critical
        time = batch * d_model * d_ff * 2 / peak_flops if compute_bound else traffic / tier["bandwidth"]
        rows.append({"tier": tier["name"], "critical_intensity": critical, "time_s": time,
                     "bound": "compute" if compute_bound else "memory"})
    return {"rows": rows}


# ---------------------------------------------------------------- families and tasks

_ROOFLINE_ROW = '{"rows": [{"batch": <int>, "intensity": <number>, "time_s": <number>, ' \
    '"bound": "compute" | "memory"}, ...]}  # one row per entry of `batches`, in order'


def _intensity_not_tied(task: Task) -> str | None:
    """A row whose intensity equals the chip's critical intensity (compute time = memory time)
    is a tie a float method may break either way."""
    critical = Fraction(task.inputs["peak_flops"], task.inputs["hbm_bandwidth"])
    for number, row in enumerate(task.expected["rows"]):
        problem = tie_edge(f"row {number}: the intensity against the critical intensity", row["intensity"],
                           critical)
        if problem:
            return problem
    return None


def sample_matmul_roofline(draw: Draw, level: int) -> dict:
    """Level 1: a canonical-sized layer on a round chip; each level adds batches (3 + level),
    widens the model (d_model up to 2048 * 2**level) and from level 3 on uses non-round chip
    numbers and int8 or fp32 operands."""
    d_model = 1024 * draw.integer(2, 2 * 2**level)
    d_ff = d_model * draw.choice((2, 3, 4, 8) if level >= 2 else (4,))
    batches = sorted(draw.sample(range(1, 2**(9 + level)), 2 + level))
    batches = sorted({1, *batches})
    peak, bandwidth = peak_and_bandwidth(draw, level)
    if level <= 2:
        weight_bytes = activation_bytes = 2
    else:
        weight_bytes, activation_bytes = draw.choice(((1, 2), (2, 2), (4, 4), (1, 1)))
    return {"batches": batches, "d_model": d_model, "d_ff": d_ff, "weight_bytes": weight_bytes,
            "activation_bytes": activation_bytes, "peak_flops": peak, "hbm_bandwidth": bandwidth}


MATMUL_ROOFLINE = scaling_family(
    "matmul_roofline", "roofline", matmul_roofline,
    """\
A feed-forward matmul y = x @ W multiplies activations x of shape [batch, d_model] by weights W of
shape [d_model, d_ff]. Each step reads x and W from HBM once and writes y once; weights take
`weight_bytes` bytes per value and activations (x and y) `activation_bytes`. The chip peaks at
`peak_flops` FLOP/s with `hbm_bandwidth` bytes/s of HBM bandwidth. For each batch size in
`batches`, give the arithmetic intensity (FLOPs per byte moved), the roofline time in seconds and
whether the matmul is compute- or memory-bound.""",
    _ROOFLINE_ROW, matmul_roofline_float, "weights_only_traffic",
    sample=sample_matmul_roofline,
    levels="L2: the backward pass (two kernels, fp32 weight gradient) derived; L3: an MLP of three "
           "kernels (up-projection, GeLU, down-projection) chained into a block time and throughput; "
           "L4: the largest batch under each latency budget (None below batch 1's time); L5: the chip "
           "and batch of the fewest dollars per million rows under a latency budget",
    tags=("headline:matmul_roofline_crossover",),
    reject=_intensity_not_tied,
    varying=("rows[].bound",),
    upper=levels_roofline.MATMUL_LEVELS,
    branches=levels_roofline.MATMUL_BRANCHES,
)


def _min_batch_edges(task: Task) -> str | None:
    """The exact batch bound B* = c*bytes*D*F / (2*D*F - c*bytes*(D + F)) must not sit on an
    integer (ceil could go either way), nor the denominator on zero (None or a huge batch)."""
    d, f, w = task.inputs["d_model"], task.inputs["d_ff"], task.inputs["bytes_per_value"]
    for chip in task.inputs["chips"]:
        critical = Fraction(chip["peak_flops"], chip["hbm_bandwidth"])
        problem = tie_edge(f"{chip['name']}: the largest intensity against the critical one",
                           Fraction(2 * d * f, w * (d + f)), critical)
        slope = 2 * d * f - critical * w * (d + f)
        if problem is None and slope > 0:
            problem = rounding_edge(f"{chip['name']}: the batch bound", critical * w * d * f / slope)
        if problem:
            return problem
    return None


_MIN_BATCH_ROW = ('{"rows": [{"chip": <str>, "critical_intensity": <number>, "min_batch": <int> | None}, '
                  '...]}  # one row per chip, in order')

_MIN_BATCH_L2 = """\
The matmul x[batch, d_model] @ W[d_model, d_ff] reads x and W once and writes y[batch, d_ff] once,
every value taking `bytes_per_value` bytes. For each chip in `chips` (peak FLOP/s and HBM bytes/s
given), give the chip's critical intensity and the smallest integer batch at which the matmul is
compute-bound; None if no batch size makes it compute-bound."""

MIN_COMPUTE_BOUND_BATCH = scaling_family(
    "min_compute_bound_batch", "roofline", min_compute_bound_batch,
    """\
The matmul x[batch, d_model] @ W[d_model, d_ff] reads x and W once and writes y[batch, d_ff] once,
every value taking `bytes_per_value` bytes. For each chip in `chips` (peak FLOP/s and HBM bytes/s
given), find the chip's critical intensity (peak_flops / hbm_bandwidth, FLOPs per byte) and the
smallest integer batch at which the matmul is compute-bound (its arithmetic intensity at least the
critical intensity); None if no batch size makes it compute-bound.""",
    _MIN_BATCH_ROW,
    min_compute_bound_batch_float, "batch_equals_critical_intensity",
    sample=sample_min_compute_bound_batch,
    upper={2: Level(min_compute_bound_batch, _MIN_BATCH_L2, _MIN_BATCH_ROW, min_compute_bound_batch_float,
                    "batch_equals_critical_intensity", reject=_min_batch_edges),
           **levels_compute5.MIN_BATCH_LEVELS_R2},
    levels="L2: the compute-bound condition derived; L3: with weights and activations of different "
           "widths, the smallest compute-bound batch and its step time (None); L4: the narrowest layer "
           "compute-bound at a given batch, per chip (None where the batch's own limit is below the "
           "critical intensity); L5: per chip, the weight format (narrower bits against decode FLOPs) "
           "compute-bound at the smallest batch, and that batch",
    reject=_min_batch_edges,
    branches=levels_compute5.MIN_BATCH_BRANCHES_R2,
)


def sample_elementwise_roofline(draw: Draw, level: int) -> dict:
    """An activation's few FLOPs per byte stay below every drawn chip's critical intensity, so
    the kernel is memory-bound (constant by physics: the family says so)."""
    counts = [1024 * c for c in sorted_sample(draw, 1, 2**(14 + level), rows(level, 2))]
    inputs = {"element_counts": counts, "flops_per_element": draw.integer(1, 40 * level),
              "bytes_read_per_element": draw.choice((1, 2, 4)),
              "bytes_written_per_element": draw.choice((1, 2, 4)),
              **chip_inputs(draw, level)}
    moved = inputs["bytes_read_per_element"] + inputs["bytes_written_per_element"]
    critical = Fraction(inputs["peak_flops"], inputs["hbm_bandwidth"])
    if Fraction(inputs["flops_per_element"], moved) >= critical:
        raise Reject("a compute-bound activation kernel (outside the physics this family teaches)")
    return inputs


ELEMENTWISE_ROOFLINE = scaling_family(
    "elementwise_roofline", "roofline", elementwise_roofline,
    """\
An elementwise activation kernel (a GELU written out, say) reads each element once
(`bytes_read_per_element` bytes), spends `flops_per_element` FLOPs on it and writes the result once
(`bytes_written_per_element` bytes). On a chip with `peak_flops` FLOP/s and `hbm_bandwidth` bytes/s,
give for each tensor size in `element_counts` the arithmetic intensity (FLOPs per byte), the roofline
time in seconds and the bound. (An activation does far fewer FLOPs per byte than any chip's
critical intensity: at these inputs the kernel is memory-bound.)""",
    '{"rows": [{"elements": <int>, "intensity": <number>, "time_s": <number>, '
    '"bound": "compute" | "memory"}, ...]}  # one row per entry of `element_counts`, in order',
    elementwise_roofline_float, "reads_only",
    sample=sample_elementwise_roofline,
    levels="memory-bound by physics, so L2+ ask about fusion: L2: the time a chain of ops saves when "
           "fused into one kernel; L3: the time saved by fusing the activation into the matmul that "
           "produces it, and the fused kernel's bound (it changes with the batch); L4: the most copies "
           "of an op one kernel fuses while strictly memory-bound, per chip; L5: the least time of a "
           "chain of ops of different output widths split into kernels under an op limit and a launch "
           "cost, and the fewest kernels reaching it (the split search not given)",
    reject=_intensity_not_tied,
    upper={**levels_roofline.ELEMENTWISE_LEVELS, **levels_compute5.ELEMENTWISE_LEVELS_R2},
    constant={"rows[].bound": "an elementwise kernel's intensity (a few FLOPs per byte) is far below "
              "any chip's critical intensity: always memory-bound, and the prompt says so"},
)


def sample_matmul_fraction_of_peak(draw: Draw, level: int) -> dict:
    top = 64 * 2**level
    shapes = [[draw.choice((1, 2, 4, 8, 16)), 128 * draw.integer(1, top), 128 * draw.integer(1, top)]]
    for _ in range(rows(level, 4) - 1):
        shapes.append([128 * draw.integer(1, top), 128 * draw.integer(1, top), 128 * draw.integer(1, top)])
    if not round_numbers(level):
        shapes = [[m + draw.integer(0, 127) * (m > 16), k, n] for m, k, n in shapes]
    return {"shapes": shapes, "bytes_per_value": value_bytes(draw, level),
            **chip_inputs(draw, level)}


MATMUL_FRACTION_OF_PEAK = scaling_family(
    "matmul_fraction_of_peak", "roofline", matmul_fraction_of_peak,
    """\
For each matmul A[m, k] @ B[k, n] in `shapes` (given as [m, k, n]), A and B are read from HBM once
and the product written once, `bytes_per_value` bytes per value, on a chip with `peak_flops` FLOP/s
and `hbm_bandwidth` bytes/s. Give the roofline time in seconds and the fraction of peak FLOP/s the
matmul achieves (its FLOPs / time / peak_flops).""",
    '{"rows": [{"shape": [<int>, <int>, <int>], "time_s": <number>, "fraction_of_peak": <number>}, ...]}'
    "  # one row per shape, in order",
    matmul_fraction_of_peak_float, "uncapped_fraction",
    sample=sample_matmul_fraction_of_peak,
    upper={2: levels_roofline2.fraction_level(sample_matmul_fraction_of_peak),
           **levels_compute5.FRACTION_LEVELS_R2, 4: levels_inverse2.FRACTION},
    branches=(Branch("none", levels_compute5.some_none, Fraction(1, 8), (4,)),),
    levels="L2: the FLOPs (fused multiply-adds), the traffic and the roofline derived from the "
           "described kernel: the intensity, the bound and the fraction of peak, no formula given; "
           "L3: one attention head's two matmuls (scores written, probabilities read) and the "
           "pair's fraction of peak; L4: the smallest m reaching a "
           "target fraction of peak per [k, n] (None); L5: per shape, the tile (padding computed, "
           "operands re-read per band of tiles, an SRAM limit) of the highest useful fraction of peak",
)


def sample_decode_attention_roofline(draw: Draw, level: int) -> dict:
    n_kv_heads = draw.choice((1, 2, 4, 8, 16))
    return {"batches": sorted({1, *draw.sample(range(2, 64 * 2**level), rows(level, 3) - 1)}),
            "seq_len": 1024 * draw.integer(1, 8 * 2**level) + jitter(draw, level, 1024),
            "n_heads": n_kv_heads * draw.choice((1, 2, 4, 8)), "n_kv_heads": n_kv_heads,
            "head_dim": draw.choice((64, 128) if round_numbers(level) else (64, 80, 96, 128, 256)),
            "bytes_per_value": value_bytes(draw, level),
            **chip_inputs(draw, level)}


_DECODE_ATTENTION_L2 = """\
During decoding, one layer's attention takes, for every sequence in the batch, its single new
token: each of its `n_heads` query heads dots its query (`head_dim` values) with the `seq_len`
cached keys of its KV head and sums the `seq_len` cached value vectors weighted by those scores
(2 FLOPs per multiply-add). Grouped-query attention stores `n_kv_heads` key heads and as many value
heads of size `head_dim`, `bytes_per_value` bytes per value; every sequence reads its own K and V
cache from HBM once (ignore the query and output bytes). On a chip with `peak_flops` FLOP/s and
`hbm_bandwidth` bytes/s, give for each batch size in `batches` the arithmetic intensity, the
roofline time in seconds and the bound. (Every sequence reads its own cache, so the intensity,
and with it the bound, is the same at every batch size.)"""

DECODE_ATTENTION_ROOFLINE = scaling_family(
    "decode_attention_roofline", "roofline", decode_attention_roofline,
    """\
During decoding, one layer's attention computes, for every sequence in the batch, the scores of its
single new query against `seq_len` cached keys and the weighted sum of `seq_len` cached values:
2*2*n_heads*seq_len*head_dim FLOPs per sequence. Grouped-query attention stores `n_kv_heads` key
heads and as many value heads of size `head_dim`, `bytes_per_value` bytes per value; every sequence
reads its own K and V cache from HBM once (ignore the query and output bytes). On a chip with
`peak_flops` FLOP/s and `hbm_bandwidth` bytes/s, give for each batch size in `batches` the
arithmetic intensity, the roofline time in seconds and the bound. (Every sequence reads its own
cache, so the intensity, and with it the bound, is the same at every batch size.)""",
    _ROOFLINE_ROW, decode_attention_roofline_float, "kv_shared_across_batch",
    sample=sample_decode_attention_roofline,
    upper={2: Level(decode_attention_roofline, _DECODE_ATTENTION_L2, _ROOFLINE_ROW,
                    decode_attention_roofline_float, "kv_shared_across_batch", reject=_intensity_not_tied),
           **levels_compute5.DECODE_ATTENTION_LEVELS_R2},
    branches=levels_compute5.DECODE_ATTENTION_BRANCHES_R2,
    levels="L2: the attention FLOPs derived; L3: a whole layer's decode step with its weights, whose "
           "bound changes with the batch; L4: the smallest compute-bound batch per context length "
           "(None where the KV reads cap the intensity); L5: the KV-cache format and batch of the most "
           "tokens per second under an HBM capacity and a latency budget (decode FLOPs against cheaper "
           "reads; compute-bound throughput ties broken by the smaller batch)",
    reject=_intensity_not_tied,
    constant={"rows[].bound": "each sequence reads its own KV cache, so FLOPs and bytes both grow with "
              "the batch and the intensity 2*n_heads/(n_kv_heads*bytes) does not depend on it: the "
              "prompt says so"},
)

def sample_weight_streaming_roofline(draw: Draw, level: int) -> dict:
    """HBM and slower tiers of the hardware table (host DRAM over PCIe, one NVMe drive, one hard
    disk), fastest first, each at a bandwidth of its own real range: a tier's name and its speed
    agree, so the rows teach the real order."""
    d_model = 1024 * draw.integer(2, 8 * level)
    peak = peak_flops(draw, level)
    slower = sorted(draw.sample(range(1, len(TIERS)), min(rows(level, 3), len(TIERS)) - 1))
    tiers = [{"name": "hbm", "bandwidth": hbm_bandwidth(draw, level, peak)}]
    for name, rng in (TIERS[i] for i in slower):
        step = 10 ** (len(str(rng.low)) - 2)  # two significant digits at levels 1-2
        tiers.append({"name": name, "bandwidth": draw_in(draw, rng, 10**6, step, round_numbers(level))})
    return {"batch": draw.integer(1, 256 * level), "d_model": d_model,
            "d_ff": d_model * draw.choice((2, 3, 4)),
            "bytes_per_value": value_bytes(draw, level),
            "peak_flops": peak,
            "tiers": tiers}


def _tier_not_tied(task: Task) -> str | None:
    i = task.inputs
    flops = 2 * i["batch"] * i["d_model"] * i["d_ff"]
    batch, d_model, d_ff = i["batch"], i["d_model"], i["d_ff"]
    traffic = i["bytes_per_value"] * (batch * d_model + d_model * d_ff + batch * d_ff)
    for tier in i["tiers"]:
        problem = tie_edge(f"tier {tier['name']}: compute time against memory time",
                           Fraction(flops, i["peak_flops"]), Fraction(traffic, tier["bandwidth"]))
        if problem:
            return problem
    return None


WEIGHT_STREAMING_ROOFLINE = scaling_family(
    "weight_streaming_roofline", "roofline", weight_streaming_roofline,
    """\
The matmul x[batch, d_model] @ W[d_model, d_ff] (read x and W once, write y once, `bytes_per_value`
bytes per value) runs at `peak_flops` FLOP/s, but its operands are streamed from one of several
memory tiers in `tiers` (fastest first), each with its bandwidth in bytes/s. For each tier give the critical
intensity (peak_flops / bandwidth, FLOPs per byte), the roofline time in seconds and the bound.""",
    '{"rows": [{"tier": <str>, "critical_intensity": <number>, "time_s": <number>, '
    '"bound": "compute" | "memory"}, ...]}  # one row per tier, in order',
    weight_streaming_roofline_float, "weights_only_traffic",
    sample=sample_weight_streaming_roofline,
    upper={2: levels_roofline2.streaming_level(sample_weight_streaming_roofline, _tier_not_tied),
           **levels_compute5.STREAMING_LEVELS_R2, 4: levels_inverse2.BANDWIDTH},
    branches=levels_compute5.STREAMING_BRANCHES_R2,
    levels="L2: the FLOPs (fused multiply-adds), the traffic and the roofline derived from the "
           "described kernel: per tier the time, the bound and the FLOP/s sustained, no formula "
           "given; L3: weights split between HBM and a concurrent "
           "host stream, and which of compute, HBM and host sets the time; L4: the least tier bandwidth "
           "at which the matmul is compute-bound, per batch; L5: per batch, how many layers to keep "
           "resident in HBM for the fastest pass (streams balanced, or tied at the compute time: the "
           "fewest)",
    reject=_tier_not_tied,
    varying=("rows[].bound",),
)

FAMILIES = (MATMUL_ROOFLINE, MIN_COMPUTE_BOUND_BATCH, ELEMENTWISE_ROOFLINE, MATMUL_FRACTION_OF_PEAK,
            DECODE_ATTENTION_ROOFLINE, WEIGHT_STREAMING_ROOFLINE)

TASKS = (
    MATMUL_ROOFLINE.task(
        "sc-000",
        {"batches": [1, 64, 256, 512, 4096], "d_model": 8192, "d_ff": 32768, "weight_bytes": 2,
         "activation_bytes": 2, "peak_flops": 400 * 10**12, "hbm_bandwidth": 1600 * 10**9},
    ),
    MIN_COMPUTE_BOUND_BATCH.task(
        "sc-001",
        {"chips": [
            {"name": "chip_a", "peak_flops": 400 * 10**12, "hbm_bandwidth": 1600 * 10**9},
            {"name": "chip_b", "peak_flops": 990 * 10**12, "hbm_bandwidth": 3350 * 10**9},
            {"name": "chip_c", "peak_flops": 197 * 10**12, "hbm_bandwidth": 820 * 10**9},
        ], "d_model": 8192, "d_ff": 28672, "bytes_per_value": 2},
    ),
    ELEMENTWISE_ROOFLINE.task(
        "sc-002",
        {"element_counts": [4096 * 8192, 32 * 4096 * 8192], "flops_per_element": 24,
         "bytes_read_per_element": 2, "bytes_written_per_element": 2,
         "peak_flops": 400 * 10**12, "hbm_bandwidth": 1600 * 10**9},
    ),
    # int8 weights with bf16 activations: the same family as sc-000.
    MATMUL_ROOFLINE.task(
        "sc-003",
        {"batches": [1, 128, 256, 1024], "d_model": 8192, "d_ff": 32768, "weight_bytes": 1,
         "activation_bytes": 2, "peak_flops": 400 * 10**12, "hbm_bandwidth": 1600 * 10**9},
    ),
    MATMUL_FRACTION_OF_PEAK.task(
        "sc-004",
        {"shapes": [[1, 8192, 8192], [128, 8192, 8192], [4096, 8192, 8192], [4096, 128, 4096]],
         "bytes_per_value": 2, "peak_flops": 400 * 10**12, "hbm_bandwidth": 1600 * 10**9},
    ),
    DECODE_ATTENTION_ROOFLINE.task(
        "sc-005",
        {"batches": [1, 16, 256], "seq_len": 8192, "n_heads": 64, "n_kv_heads": 8, "head_dim": 128,
         "bytes_per_value": 2, "peak_flops": 400 * 10**12, "hbm_bandwidth": 1600 * 10**9},
    ),
    WEIGHT_STREAMING_ROOFLINE.task(
        "sc-006",
        {"batch": 512, "d_model": 8192, "d_ff": 32768, "bytes_per_value": 2, "peak_flops": 400 * 10**12,
         "tiers": [{"name": "hbm", "bandwidth": 1600 * 10**9},
                   {"name": "host_dram_over_pcie", "bandwidth": 64 * 10**9},
                   {"name": "nvme_offload", "bandwidth": 7 * 10**9}]},
    ),
)
