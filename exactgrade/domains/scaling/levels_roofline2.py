"""Level 2 of matmul_fraction_of_peak and weight_streaming_roofline: level 1's setting with the
formulas withheld. The kernel is described (fused multiply-adds, what it reads and writes, that
transfers overlap compute); the model derives the FLOPs, the traffic, which of the two sets the
time and the FLOP/s sustained (matmul_fraction_of_peak: also the arithmetic intensity). Level 1
states the roofline and the fraction (or the critical intensity); level 2 asks other fields.
References are self-contained; the ``*_float`` twins take another route in floats and can
reproduce one named mistake (tests only)."""

from __future__ import annotations

from fractions import Fraction

from exactgrade.domains.scaling._task import Level, known_mistake, tie_edge
from exactgrade.family import Draw, Reject
from exactgrade.task import Task

# ---------------------------------------------------------------- reference solutions


def matmul_intensity_fraction(shapes, bytes_per_value, peak_flops, hbm_bandwidth):
    """Per [m, k, n]: 2 m k n FLOPs over the bytes of A, B and C; the longer of compute and
    traffic sets the time (compute on a tie); the sustained share of peak."""
    from fractions import Fraction

    rows = []
    for m, k, n in shapes:
        flops = 2 * m * k * n
        traffic = bytes_per_value * (m * k + k * n + m * n)
        compute_s = Fraction(flops, peak_flops)
        memory_s = Fraction(traffic, hbm_bandwidth)
        time_s = max(compute_s, memory_s)
        rows.append({
            "shape": [m, k, n],
            "intensity": Fraction(flops, traffic),
            "bound": "compute" if compute_s >= memory_s else "memory",
            "fraction_of_peak": flops / time_s / peak_flops,
        })
    return {"rows": rows}


def streamed_matmul_rate(batch, d_model, d_ff, bytes_per_value, peak_flops, tiers):
    """Per tier: the longer of 2 b d f / peak and the bytes of x, W and y over the tier's
    bandwidth (compute on a tie), and the FLOP/s sustained over that time."""
    from fractions import Fraction

    flops = 2 * batch * d_model * d_ff
    traffic = bytes_per_value * (batch * d_model + d_model * d_ff + batch * d_ff)
    compute_s = Fraction(flops, peak_flops)
    rows = []
    for tier in tiers:
        memory_s = Fraction(traffic, tier["bandwidth"])
        time_s = max(compute_s, memory_s)
        rows.append({
            "tier": tier["name"],
            "time_s": time_s,
            "bound": "compute" if compute_s >= memory_s else "memory",
            "achieved_flops": flops / time_s,
        })
    return {"rows": rows}


# ---------------------------------------------------------------- float twins (tests only)


def matmul_intensity_fraction_float(shapes, bytes_per_value, peak_flops, hbm_bandwidth, mistake=None):
    """Against the critical intensity: the fraction is intensity / critical, capped at 1."""
    known_mistake(mistake, "one_flop_per_multiply_add")
    per_fma = 1.0 if mistake == "one_flop_per_multiply_add" else 2.0
    critical = peak_flops / hbm_bandwidth
    out = []
    for m, k, n in shapes:
        intensity = per_fma * m / bytes_per_value * (k * n) / (m * k + k * n + m * n)
        compute = intensity >= critical
        out.append({"shape": [m, k, n], "intensity": intensity, "bound": "compute" if compute else "memory",
                    "fraction_of_peak": 1.0 if compute else intensity / critical})
    return {"rows": out}


def streamed_matmul_rate_float(batch, d_model, d_ff, bytes_per_value, peak_flops, tiers, mistake=None):
    """The sustained FLOP/s as min(peak, intensity * bandwidth), the time as FLOPs over it."""
    known_mistake(mistake, "weights_only_traffic")
    flops = 2.0 * d_model * d_ff * batch
    moved = d_model * d_ff + (0 if mistake == "weights_only_traffic" else batch * (d_model + d_ff))
    intensity = flops / (moved * bytes_per_value)
    out = []
    for tier in tiers:
        rate = min(float(peak_flops), intensity * tier["bandwidth"])
        out.append({"tier": tier["name"], "time_s": flops / rate,
                    "bound": "compute" if intensity * tier["bandwidth"] >= peak_flops else "memory",
                    "achieved_flops": rate})
    return {"rows": out}


# ---------------------------------------------------------------- samplers and rules


def _least_compute_bound_batch(d_model: int, d_ff: int, bytes_per_value: int,
                               critical: Fraction) -> int | None:
    """The smallest batch whose intensity 2 b d f / (bytes (b d + d f + b f)) reaches the
    critical intensity, or None if no batch does (the intensity is capped below it)."""
    room = 2 * d_model * d_ff - critical * bytes_per_value * (d_model + d_ff)
    if room <= 0:
        return None
    least = critical * bytes_per_value * d_model * d_ff / room
    return max(1, -(-least.numerator // least.denominator))


_MAX_BATCH = 64 * 1024


def streaming_sample(level1_sample):
    """Level 1's draw with the batch redrawn between two consecutive tiers' least compute-bound
    batches (the faster tiers compute-bound, the slower memory-bound, the split drawn): level
    1's batches leave every tier memory-bound in most draws."""

    def sample(draw: Draw, level: int) -> dict:
        inputs = level1_sample(draw, level)
        d, f, b, peak = inputs["d_model"], inputs["d_ff"], inputs["bytes_per_value"], inputs["peak_flops"]
        least = [_least_compute_bound_batch(d, f, b, Fraction(peak, tier["bandwidth"]))
                 for tier in inputs["tiers"]]  # fastest tier first: non-decreasing, None = never
        splits = []
        for low, high in zip(least, least[1:], strict=False):
            top = _MAX_BATCH if high is None else min(high - 1, _MAX_BATCH)
            if low is not None and low <= top:
                splits.append((low, top))
        if not splits:
            raise Reject("no batch is compute-bound on a faster tier and memory-bound on a slower one")
        low, top = draw.choice(splits)
        return dict(inputs, batch=draw.integer(low, top))

    return sample


def _matmul_rules(task: Task) -> str | None:
    """No shape on the compute/memory tie, and at least two shapes on each side of it: L1's shapes
    are compute-bound 4 times in 5, and every compute-bound row's fraction of peak is 1."""
    i = task.inputs
    memory_bound = 0
    for m, k, n in i["shapes"]:
        compute = Fraction(2 * m * k * n, i["peak_flops"])
        memory = Fraction(i["bytes_per_value"] * (m * k + k * n + m * n), i["hbm_bandwidth"])
        problem = tie_edge(f"shape {[m, k, n]}: compute time against memory time", compute, memory)
        if problem:
            return problem
        memory_bound += memory > compute
    if min(memory_bound, len(i["shapes"]) - memory_bound) < 2:
        return f"{memory_bound} of {len(i['shapes'])} shapes memory-bound: fewer than two on one side"
    return None


# ---------------------------------------------------------------- levels

_FRACTION_L2 = """\
Each matmul A[m, k] @ B[k, n] in `shapes` (given as [m, k, n]) computes every entry of its product
as k fused multiply-adds into an accumulator that starts at zero, each fused multiply-add counting
as 2 FLOPs. The kernel reads A and B from HBM once and writes the product to HBM once,
`bytes_per_value` bytes per value, on a chip with `peak_flops` FLOP/s and `hbm_bandwidth` bytes/s;
it moves data and computes at the same time, so it takes as long as the slower of the two. For each
shape give its arithmetic intensity (FLOPs per byte of HBM traffic), which of the two sets its time
("compute" or "memory"; "compute" if they take equally long) and the fraction of the chip's peak
FLOP/s it sustains over its run."""

_STREAMING_L2 = """\
The matmul x[batch, d_model] @ W[d_model, d_ff] computes each of its outputs as d_model fused
multiply-adds into an accumulator that starts at zero, each fused multiply-add counting as 2 FLOPs,
on a chip of `peak_flops` FLOP/s. Its operands live in one memory tier of `tiers` (fastest first,
each with its bandwidth in bytes/s): the kernel reads x and W from that tier once and writes the product to it
once, `bytes_per_value` bytes per value, and moves data while it computes, so it takes as long as
the slower of the two. For each tier give the time in seconds, which of the two sets it ("compute"
or "memory"; "compute" if they take equally long) and the FLOP/s the matmul sustains over its run."""


def fraction_level(sample) -> Level:
    return Level(
        matmul_intensity_fraction,
        _FRACTION_L2,
        '{"rows": [{"shape": [<int>, <int>, <int>], "intensity": <number>, "bound": "compute" | "memory", '
        '"fraction_of_peak": <number>}, ...]}  # one row per shape, in order',
        matmul_intensity_fraction_float,
        "one_flop_per_multiply_add",
        sample=sample,
        reject=_matmul_rules,
        varying=("rows[].bound",),
    )


def streaming_level(level1_sample, reject) -> Level:
    return Level(
        streamed_matmul_rate,
        _STREAMING_L2,
        '{"rows": [{"tier": <str>, "time_s": <number>, "bound": "compute" | "memory", '
        '"achieved_flops": <number>}, ...]}  # one row per tier, in order',
        streamed_matmul_rate_float,
        "weights_only_traffic",
        sample=streaming_sample(level1_sample),
        reject=reject,
        varying=("rows[].bound",),
    )


__all__ = ["fraction_level", "matmul_intensity_fraction", "streamed_matmul_rate", "streaming_level"]
