"""Roofline tasks (sc-000..sc-006): arithmetic intensity against the chip's critical intensity.

Each reference is a self-contained function (imports inside, no globals): its source is the
program a perfect model would run. Each ``*_float`` twin recomputes the answer in floats with
the operations reordered, and can reproduce one named mistake; the tests use both.
"""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling._task import known_mistake, scaling_family, scaling_task
from exactgrade.family import Draw
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
    rows = []
    for chip in chips:
        critical = chip["peak_flops"] / chip["hbm_bandwidth"]
        if mistake == "batch_equals_critical_intensity":
            batch = math.ceil(critical * bytes_per_value / 2)
        else:  # scan upwards instead of solving the inequality
            batch = 1
            def intensity(b):
                return 2.0 * b * d_model * d_ff / (bytes_per_value * (d_model * d_ff + b * (d_model + d_ff)))

            while intensity(batch) < critical:
                batch += 1
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


# ---------------------------------------------------------------- tasks

_ROOFLINE_ROW = '{"rows": [{"batch": <int>, "intensity": <number>, "time_s": <number>, ' \
    '"bound": "compute" | "memory"}, ...]}  # one row per entry of `batches`, in order'

def sample_matmul_roofline(draw: Draw, level: int) -> dict:
    """Level 1: a canonical-sized layer on a round chip; each level adds batches (3 + level),
    widens the model (d_model up to 2048 * 2**level) and from level 3 on uses non-round chip
    numbers and int8 or fp32 operands."""
    d_model = 1024 * draw.integer(2, 2 * 2**level)
    d_ff = d_model * draw.choice((2, 3, 4, 8) if level >= 2 else (4,))
    batches = sorted(draw.sample(range(1, 2**(9 + level)), 2 + level))
    batches = sorted({1, *batches})
    if level <= 2:
        peak, bandwidth = 10**12 * 50 * draw.integer(2, 20), 10**9 * 100 * draw.integer(4, 40)
        weight_bytes = activation_bytes = 2
    else:
        peak, bandwidth = 10**9 * draw.integer(100_000, 2_000_000), 10**7 * draw.integer(40_000, 400_000)
        weight_bytes, activation_bytes = draw.choice(((1, 2), (2, 2), (4, 4), (1, 1)))
    return {"batches": batches, "d_model": d_model, "d_ff": d_ff, "weight_bytes": weight_bytes,
            "activation_bytes": activation_bytes, "peak_flops": peak, "hbm_bandwidth": bandwidth}


def _bound_not_tied(task: Task) -> str | None:
    """A row whose compute time equals its memory time is a tie no float method can be sure of."""
    inputs = task.inputs
    for row in task.expected["rows"]:
        batch = row["batch"]
        flops = 2 * batch * inputs["d_model"] * inputs["d_ff"]
        traffic = (inputs["activation_bytes"] * batch * (inputs["d_model"] + inputs["d_ff"])
                   + inputs["weight_bytes"] * inputs["d_model"] * inputs["d_ff"])
        if Fraction(flops, inputs["peak_flops"]) == Fraction(traffic, inputs["hbm_bandwidth"]):
            return f"batch {batch} sits exactly on the compute/memory tie"
    return None


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
    levels="batches 3+level (always batch 1); d_model up to 2048*2**level, d_ff 2-8x; level 3+: "
           "non-round chip numbers, int8/fp32 operands",
    tags=("headline:matmul_roofline_crossover",),
    reject=_bound_not_tied,
)

FAMILIES = (MATMUL_ROOFLINE,)

TASKS = (
    MATMUL_ROOFLINE.task(
        "sc-000",
        {"batches": [1, 64, 256, 512, 4096], "d_model": 8192, "d_ff": 32768, "weight_bytes": 2,
         "activation_bytes": 2, "peak_flops": 400 * 10**12, "hbm_bandwidth": 1600 * 10**9},
    ),
    scaling_task(
        "sc-001", "roofline", min_compute_bound_batch,
        {"chips": [
            {"name": "chip_a", "peak_flops": 400 * 10**12, "hbm_bandwidth": 1600 * 10**9},
            {"name": "chip_b", "peak_flops": 990 * 10**12, "hbm_bandwidth": 3350 * 10**9},
            {"name": "chip_c", "peak_flops": 197 * 10**12, "hbm_bandwidth": 820 * 10**9},
        ], "d_model": 8192, "d_ff": 28672, "bytes_per_value": 2},
        """\
The matmul x[batch, d_model] @ W[d_model, d_ff] reads x and W once and writes y[batch, d_ff] once,
every value taking `bytes_per_value` bytes. For each chip in `chips` (peak FLOP/s and HBM bytes/s
given), find the chip's critical intensity (peak_flops / hbm_bandwidth, FLOPs per byte) and the
smallest integer batch at which the matmul is compute-bound (its arithmetic intensity at least the
critical intensity); None if no batch size makes it compute-bound.""",
        '{"rows": [{"chip": <str>, "critical_intensity": <number>, "min_batch": <int> | None}, ...]}'
        "  # one row per chip, in order",
        min_compute_bound_batch_float, "batch_equals_critical_intensity",
    ),
    scaling_task(
        "sc-002", "roofline", elementwise_roofline,
        {"element_counts": [4096 * 8192, 32 * 4096 * 8192], "flops_per_element": 24,
         "bytes_read_per_element": 2, "bytes_written_per_element": 2,
         "peak_flops": 400 * 10**12, "hbm_bandwidth": 1600 * 10**9},
        """\
An elementwise activation kernel (a GELU written out in bf16) reads each element once
(`bytes_read_per_element` bytes), spends `flops_per_element` FLOPs on it and writes the result once
(`bytes_written_per_element` bytes). On a chip with `peak_flops` FLOP/s and `hbm_bandwidth` bytes/s,
give for each tensor size in `element_counts` the arithmetic intensity (FLOPs per byte), the roofline
time in seconds and the bound.""",
        '{"rows": [{"elements": <int>, "intensity": <number>, "time_s": <number>, '
        '"bound": "compute" | "memory"}, ...]}  # one row per entry of `element_counts`, in order',
        elementwise_roofline_float, "reads_only",
    ),
    scaling_task(
        "sc-003", "roofline", matmul_roofline,
        {"batches": [1, 128, 256, 1024], "d_model": 8192, "d_ff": 32768, "weight_bytes": 1,
         "activation_bytes": 2, "peak_flops": 400 * 10**12, "hbm_bandwidth": 1600 * 10**9},
        """\
The weights of a feed-forward matmul y = x @ W are quantized to int8 (`weight_bytes` = 1 byte per
value) while activations stay bf16 (`activation_bytes` = 2); the arithmetic is still counted as 2
FLOPs per multiply-add at `peak_flops` FLOP/s. x has shape [batch, d_model], W [d_model, d_ff];
each step reads x and W from HBM once and writes y once, at `hbm_bandwidth` bytes/s. For each
batch size in `batches`, give the arithmetic intensity (FLOPs per byte), the roofline time in
seconds and the bound.""",
        _ROOFLINE_ROW, matmul_roofline_float, "weights_only_traffic",
    ),
    scaling_task(
        "sc-004", "roofline", matmul_fraction_of_peak,
        {"shapes": [[1, 8192, 8192], [128, 8192, 8192], [4096, 8192, 8192], [4096, 128, 4096]],
         "bytes_per_value": 2, "peak_flops": 400 * 10**12, "hbm_bandwidth": 1600 * 10**9},
        """\
For each matmul A[m, k] @ B[k, n] in `shapes` (given as [m, k, n]), A and B are read from HBM once
and the product written once, `bytes_per_value` bytes per value, on a chip with `peak_flops` FLOP/s
and `hbm_bandwidth` bytes/s. Give the roofline time in seconds and the fraction of peak FLOP/s the
matmul achieves (its FLOPs / time / peak_flops).""",
        '{"rows": [{"shape": [<int>, <int>, <int>], "time_s": <number>, "fraction_of_peak": <number>}, ...]}'
        "  # one row per shape, in order",
        matmul_fraction_of_peak_float, "uncapped_fraction",
    ),
    scaling_task(
        "sc-005", "roofline", decode_attention_roofline,
        {"batches": [1, 16, 256], "seq_len": 8192, "n_heads": 64, "n_kv_heads": 8, "head_dim": 128,
         "bytes_per_value": 2, "peak_flops": 400 * 10**12, "hbm_bandwidth": 1600 * 10**9},
        """\
During decoding, one layer's attention computes, for every sequence in the batch, the scores of its
single new query against `seq_len` cached keys and the weighted sum of `seq_len` cached values:
2*2*n_heads*seq_len*head_dim FLOPs per sequence. Grouped-query attention stores `n_kv_heads` key
heads and as many value heads of size `head_dim`, `bytes_per_value` bytes per value; every sequence
reads its own K and V cache from HBM once (ignore the query and output bytes). On a chip with
`peak_flops` FLOP/s and `hbm_bandwidth` bytes/s, give for each batch size in `batches` the
arithmetic intensity, the roofline time in seconds and the bound.""",
        _ROOFLINE_ROW, decode_attention_roofline_float, "kv_shared_across_batch",
    ),
    scaling_task(
        "sc-006", "roofline", weight_streaming_roofline,
        {"batch": 512, "d_model": 8192, "d_ff": 32768, "bytes_per_value": 2, "peak_flops": 400 * 10**12,
         "tiers": [{"name": "hbm", "bandwidth": 1600 * 10**9},
                   {"name": "host_dram_over_pcie", "bandwidth": 64 * 10**9},
                   {"name": "nvme_offload", "bandwidth": 7 * 10**9}]},
        """\
The matmul x[batch, d_model] @ W[d_model, d_ff] (read x and W once, write y once, `bytes_per_value`
bytes per value) runs at `peak_flops` FLOP/s, but its operands are streamed from one of several
memory tiers in `tiers`, each with its bandwidth in bytes/s. For each tier give the critical
intensity (peak_flops / bandwidth, FLOPs per byte), the roofline time in seconds and the bound.""",
        '{"rows": [{"tier": <str>, "critical_intensity": <number>, "time_s": <number>, '
        '"bound": "compute" | "memory"}, ...]}  # one row per tier, in order',
        weight_streaming_roofline_float, "weights_only_traffic",
    ),
)
