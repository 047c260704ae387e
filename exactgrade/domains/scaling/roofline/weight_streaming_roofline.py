"""The weight_streaming_roofline family of roofline: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling import _sample as sample
from exactgrade.domains.scaling._sample import (
    hbm_bandwidth,
    host_link,
    peak_and_bandwidth,
    peak_flops,
    round_numbers,
    rows,
    value_bytes,
)
from exactgrade.domains.scaling._task import known_mistake, near_integer, near_tie, scaling_level, tie_edge
from exactgrade.domains.scaling.hardware import TIERS, draw_in
from exactgrade.family import Branch, Draw, Level, Reject, five_levels
from exactgrade.task import Task


def weight_streaming_roofline(batch, d_model, d_ff, bytes_per_value, peak_flops, tiers):
    """The same matmul with its operands streamed from memories of different bandwidth."""
    from fractions import Fraction

    flops = 2 * batch * d_model * d_ff
    traffic = bytes_per_value * (batch * d_model + d_model * d_ff + batch * d_ff)
    rows = []
    for tier in tiers:
        compute_s = Fraction(flops) / peak_flops
        memory_s = Fraction(traffic) / tier["bandwidth"]
        rows.append(
            {
                "tier": tier["name"],
                "critical_intensity": Fraction(peak_flops) / tier["bandwidth"],
                "time_s": max(compute_s, memory_s),
                "bound": "compute" if compute_s >= memory_s else "memory",
            }
        )
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
        rows.append(
            {
                "tier": tier["name"],
                "critical_intensity": critical,
                "time_s": time,
                "bound": "compute" if compute_bound else "memory",
            }
        )
    return {"rows": rows}


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
    return {
        "batch": draw.integer(1, 256 * level),
        "d_model": d_model,
        "d_ff": d_model * draw.choice((2, 3, 4)),
        "bytes_per_value": value_bytes(draw, level),
        "peak_flops": peak,
        "tiers": tiers,
    }


def _tier_not_tied(task: Task) -> str | None:
    i = task.inputs
    flops = 2 * i["batch"] * i["d_model"] * i["d_ff"]
    batch, d_model, d_ff = i["batch"], i["d_model"], i["d_ff"]
    traffic = i["bytes_per_value"] * (batch * d_model + d_model * d_ff + batch * d_ff)
    for tier in i["tiers"]:
        problem = tie_edge(
            f"tier {tier['name']}: compute time against memory time",
            Fraction(flops, i["peak_flops"]),
            Fraction(traffic, tier["bandwidth"]),
        )
        if problem:
            return problem
    return None


LEVEL_1 = scaling_level(
    "roofline",
    weight_streaming_roofline,
    """\
The matmul x[batch, d_model] @ W[d_model, d_ff] (read x and W once, write y once, `bytes_per_value`
bytes per value) runs at `peak_flops` FLOP/s, but its operands are streamed from one of several
memory tiers in `tiers` (fastest first), each with its bandwidth in bytes/s. For each tier give the critical
intensity (peak_flops / bandwidth, FLOPs per byte), the roofline time in seconds and the bound.""",
    '{"rows": [{"tier": <str>, "critical_intensity": <number>, "time_s": <number>, '
    '"bound": "compute" | "memory"}, ...]}  # one row per tier, in order',
    weight_streaming_roofline_float,
    "weights_only_traffic",
    sample=sample_weight_streaming_roofline,
    reject=_tier_not_tied,
    varying=("rows[].bound",),
)


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
        rows.append(
            {
                "tier": tier["name"],
                "time_s": time_s,
                "bound": "compute" if compute_s >= memory_s else "memory",
                "achieved_flops": flops / time_s,
            }
        )
    return {"rows": rows}


def streamed_matmul_rate_float(batch, d_model, d_ff, bytes_per_value, peak_flops, tiers, mistake=None):
    """The sustained FLOP/s as min(peak, intensity * bandwidth), the time as FLOPs over it."""
    known_mistake(mistake, "weights_only_traffic")
    flops = 2.0 * d_model * d_ff * batch
    moved = d_model * d_ff + (0 if mistake == "weights_only_traffic" else batch * (d_model + d_ff))
    intensity = flops / (moved * bytes_per_value)
    out = []
    for tier in tiers:
        rate = min(float(peak_flops), intensity * tier["bandwidth"])
        out.append(
            {
                "tier": tier["name"],
                "time_s": flops / rate,
                "bound": "compute" if intensity * tier["bandwidth"] >= peak_flops else "memory",
                "achieved_flops": rate,
            }
        )
    return {"rows": out}


def _least_compute_bound_batch(
    d_model: int, d_ff: int, bytes_per_value: int, critical: Fraction
) -> int | None:
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
        least = [
            _least_compute_bound_batch(d, f, b, Fraction(peak, tier["bandwidth"])) for tier in inputs["tiers"]
        ]  # fastest tier first: non-decreasing, None = never
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


_STREAMING_L2 = """\
The matmul x[batch, d_model] @ W[d_model, d_ff] computes each of its outputs as d_model fused
multiply-adds into an accumulator that starts at zero, each fused multiply-add counting as 2 FLOPs,
on a chip of `peak_flops` FLOP/s. Its operands live in one memory tier of `tiers` (fastest first,
each with its bandwidth in bytes/s): the kernel reads x and W from that tier once and writes the product to it
once, `bytes_per_value` bytes per value, and moves data while it computes, so it takes as long as
the slower of the two. For each tier give the time in seconds, which of the two sets it ("compute"
or "memory"; "compute" if they take equally long) and the FLOP/s the matmul sustains over its run."""


def streaming_level(level1_sample, reject) -> Level:
    return scaling_level(
        "roofline",
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


LEVEL_2 = streaming_level(sample_weight_streaming_roofline, _tier_not_tied)


# ================================================================ weight_streaming_roofline
def split_weights(
    batch, d_model, d_ff, bytes_per_value, peak_flops, hbm_bandwidth, host_bandwidth, hbm_fractions
):
    """The matmul with a share of W resident in HBM and the rest streamed from host memory at the
    same time: the step takes the longest of compute, the HBM reads and the host stream."""
    from fractions import Fraction

    rows = []
    weights = bytes_per_value * d_model * d_ff
    activations = bytes_per_value * (batch * d_model + batch * d_ff)
    for share in hbm_fractions:
        times = {
            "compute": Fraction(2 * batch * d_model * d_ff, peak_flops),
            "hbm": (activations + share * weights) / hbm_bandwidth,
            "host": (1 - share) * weights / host_bandwidth,
        }
        bound = max(times, key=lambda name: times[name])
        rows.append({"hbm_fraction": share, "time_s": times[bound], "bound": bound})
    return {"rows": rows}


def split_weights_float(
    batch,
    d_model,
    d_ff,
    bytes_per_value,
    peak_flops,
    hbm_bandwidth,
    host_bandwidth,
    hbm_fractions,
    mistake=None,
):
    known_mistake(mistake, "streams_serialised")
    rows = []
    w = float(bytes_per_value) * d_model * d_ff
    for f in hbm_fractions:
        compute = 2.0 * d_model * d_ff * batch / peak_flops
        hbm = (bytes_per_value * batch * (d_model + d_ff) + f * w) / hbm_bandwidth
        host = (1 - f) * w / host_bandwidth
        options = [(compute, "compute"), (hbm, "hbm"), (host, "host")]
        if mistake == "streams_serialised":
            options = [(compute, "compute"), (hbm + host, "hbm" if hbm >= host else "host")]
        t, name = max(options)
        rows.append({"hbm_fraction": f, "time_s": t, "bound": name})
    return {"rows": rows}


def sample_split_weights(draw: Draw, level: int) -> dict:
    """Shares across the point where the HBM and host streams balance; a batch where compute
    binds between them."""
    d_model = 1024 * draw.integer(2, 16)
    d_ff = d_model * draw.choice((2, 3, 4))
    width = draw.choice((1, 2))
    peak, bandwidth = peak_and_bandwidth(draw, level)
    host = host_link(draw, bandwidth, 4, 40)
    w = width * d_model * d_ff
    # compute time set near the balanced stream time w / (bandwidth + host)
    balanced = Fraction(w, bandwidth + host)
    batch = max(1, math.floor(balanced * peak / (2 * d_model * d_ff) * Fraction(draw.integer(60, 130), 100)))
    shares = sorted({Fraction(draw.integer(1, 99), 100) for _ in range(3 + level)})
    return {
        "batch": batch,
        "d_model": d_model,
        "d_ff": d_ff,
        "bytes_per_value": width,
        "peak_flops": peak,
        "hbm_bandwidth": bandwidth,
        "host_bandwidth": host,
        "hbm_fractions": shares,
    }


def _split_rules(task: Task) -> str | None:
    i = task.inputs
    w = i["bytes_per_value"] * i["d_model"] * i["d_ff"]
    for share in i["hbm_fractions"]:
        times = sorted(
            [
                Fraction(2 * i["batch"] * i["d_model"] * i["d_ff"], i["peak_flops"]),
                (i["bytes_per_value"] * i["batch"] * (i["d_model"] + i["d_ff"]) + share * w)
                / i["hbm_bandwidth"],
                (1 - share) * w / i["host_bandwidth"],
            ]
        )
        if near_tie(times[-1], times[-2]):
            return f"share {share}: the two longest times tie"
    return None


_SPLIT_L3 = """\
The matmul y = x @ W multiplies x of shape [batch, d_model] by W of shape [d_model, d_ff],
`bytes_per_value` bytes per value, on a chip of `peak_flops` FLOP/s. A share of W (the fraction
hbm_fraction of its values) is resident in HBM and read from there at `hbm_bandwidth` bytes/s,
together with x and y (read x once, write y once, both in HBM); the rest of W is streamed from host
memory at `host_bandwidth` bytes/s. Compute, the HBM traffic and the host stream all run at the same
time, so the matmul takes as long as the slowest of the three. For each share in `hbm_fractions`,
give the time in seconds and which of the three sets it ("compute", "hbm" or "host")."""


LEVEL_3 = scaling_level(
    "roofline",
    split_weights,
    _SPLIT_L3,
    '{"rows": [{"hbm_fraction": <number>, "time_s": <number>, "bound": "compute" | "hbm" | "host"}, ...]}'
    "  # one row per share, in order",
    split_weights_float,
    "streams_serialised",
    sample=sample_split_weights,
    reject=_split_rules,
    varying=("rows[].bound",),
)


def min_bandwidth_for_compute_bound(batches, d_model, d_ff, bytes_per_value, peak_flops):
    """The least memory bandwidth at which the matmul is compute-bound, per batch."""
    from fractions import Fraction

    rows = []
    for batch in batches:
        flops = 2 * batch * d_model * d_ff
        traffic = bytes_per_value * (batch * d_model + d_model * d_ff + batch * d_ff)
        rows.append({"batch": batch, "min_bandwidth": Fraction(traffic * peak_flops, flops)})
    return {"rows": rows}


def min_bandwidth_for_compute_bound_float(batches, d_model, d_ff, bytes_per_value, peak_flops, mistake=None):
    known_mistake(mistake, "weights_only_traffic")
    rows = []
    for b in batches:
        if mistake == "weights_only_traffic":
            traffic = float(d_model * d_ff * bytes_per_value)
        else:
            traffic = ((b + d_ff) * d_model + b * d_ff) * float(bytes_per_value)
        rows.append({"batch": b, "min_bandwidth": peak_flops / (2.0 * b * d_model * d_ff / traffic)})
    return {"rows": rows}


def sample_min_bandwidth(draw: Draw, level: int) -> dict:
    d_model = 1024 * draw.integer(2, 8 * level)
    return {
        "batches": sorted(draw.sample(range(1, 256 * level + 1), 2 + level)),
        "d_model": d_model,
        "d_ff": d_model * draw.choice((2, 3, 4)),
        "bytes_per_value": draw.choice((1, 2, 4)),
        "peak_flops": sample.peak_flops(draw, level),
    }


_BANDWIDTH = """\
The matmul x[batch, d_model] @ W[d_model, d_ff] (read x and W once, write y once, `bytes_per_value`
bytes per value) runs at `peak_flops` FLOP/s with its operands streamed from a memory tier. For
each batch size in `batches`, give the least tier bandwidth in bytes/s at which the matmul is
compute-bound (its compute time at least its memory time)."""


LEVEL_4 = scaling_level(
    "roofline",
    min_bandwidth_for_compute_bound,
    _BANDWIDTH,
    '{"rows": [{"batch": <int>, "min_bandwidth": <number>}, ...]}  # one row per batch, in order',
    min_bandwidth_for_compute_bound_float,
    "weights_only_traffic",
    sample=sample_min_bandwidth,
)


def resident_layers(
    layers,
    batches,
    d_model,
    d_ff,
    bytes_per_value,
    peak_flops,
    hbm_bandwidth,
    host_bandwidth,
    max_resident_layers,
):
    """Per batch: how many layers' weights to keep in HBM (the rest streamed from host, both streams
    concurrent with compute) for the fastest forward pass; on a tie the fewest resident layers."""
    from fractions import Fraction

    per_layer = bytes_per_value * 2 * d_model * d_ff  # up- and down-projection weights
    rows = []
    for batch in batches:
        compute = Fraction(layers * 2 * batch * 2 * d_model * d_ff, peak_flops)
        activations = layers * bytes_per_value * 2 * batch * (d_model + d_ff)
        best = None
        for resident in range(max_resident_layers + 1):
            time_s = max(
                compute,
                Fraction(activations + resident * per_layer, hbm_bandwidth),
                Fraction((layers - resident) * per_layer, host_bandwidth),
            )
            if best is None or time_s < best[1]:
                best = (resident, time_s)
        rows.append({"batch": batch, "resident_layers": best[0], "time_s": best[1]})
    return {"rows": rows}


def resident_layers_float(
    layers,
    batches,
    d_model,
    d_ff,
    bytes_per_value,
    peak_flops,
    hbm_bandwidth,
    host_bandwidth,
    max_resident_layers,
    mistake=None,
):
    """The balance point in closed form: the host stream falls and the HBM stream grows with the
    resident layers; the best count is where they cross, or the fewest at which both are under the
    compute time, capped by the HBM limit."""
    known_mistake(mistake, "compute_ignored")
    per_layer = 2.0 * bytes_per_value * d_model * d_ff
    rows = []
    for b in batches:
        compute = 0.0 if mistake == "compute_ignored" else 4.0 * layers * b * d_model * d_ff / peak_flops
        activations = 2.0 * layers * bytes_per_value * b * (d_model + d_ff)

        def time(r, b=b, compute=compute, activations=activations):
            return max(
                compute,
                (activations + r * per_layer) / hbm_bandwidth,
                (layers - r) * per_layer / host_bandwidth,
            )

        # the host stream is under the compute time from r_host on; the HBM stream up to r_hbm
        r_host = max(0, math.ceil(layers - compute * host_bandwidth / per_layer))
        cross = (layers * per_layer / host_bandwidth - activations / hbm_bandwidth) / (
            per_layer / hbm_bandwidth + per_layer / host_bandwidth
        )
        candidates = {
            min(max_resident_layers, max(0, r)) for r in (r_host, math.floor(cross), math.ceil(cross))
        }
        low = min(time(r) for r in candidates)
        r = min(r for r in candidates if time(r) <= low * (1 + 1e-12))
        rows.append({"batch": b, "resident_layers": r, "time_s": time(r)})
    return {"rows": rows}


def sample_resident(draw: Draw, level: int) -> dict:
    """Batches from stream-bound (the best count balances the two streams) to compute-bound (many
    counts tie at the compute time: the fewest wins), and an HBM limit that sometimes binds."""
    layers = draw.integer(8, 96)
    d_model = 1024 * draw.integer(2, 12)
    d_ff = d_model * draw.choice((2, 3, 4))
    width = draw.choice((1, 2))
    peak, bandwidth = peak_and_bandwidth(draw, level)
    host = host_link(draw, bandwidth, 3, 30)
    per_layer = width * 2 * d_model * d_ff
    balanced = Fraction(layers * per_layer, bandwidth + host)
    edge = balanced * peak / (layers * 4 * d_model * d_ff)  # the batch whose compute equals it
    batches = sorted(
        {max(1, math.floor(edge * Fraction(draw.integer(20, 400), 100))) for _ in range(2 + level)}
    )
    return {
        "layers": layers,
        "batches": batches,
        "d_model": d_model,
        "d_ff": d_ff,
        "bytes_per_value": width,
        "peak_flops": peak,
        "hbm_bandwidth": bandwidth,
        "host_bandwidth": host,
        "max_resident_layers": draw.integer(layers // 3, layers),
    }


def _resident_rules(task: Task) -> str | None:
    i = task.inputs
    per_layer = i["bytes_per_value"] * 2 * i["d_model"] * i["d_ff"]
    for b in i["batches"]:
        compute = Fraction(i["layers"] * 4 * b * i["d_model"] * i["d_ff"], i["peak_flops"])
        activations = i["layers"] * i["bytes_per_value"] * 2 * b * (i["d_model"] + i["d_ff"])
        times = sorted(
            {
                max(
                    compute,
                    Fraction(activations + r * per_layer, i["hbm_bandwidth"]),
                    Fraction((i["layers"] - r) * per_layer, i["host_bandwidth"]),
                )
                for r in range(i["max_resident_layers"] + 1)
            }
        )
        if len(times) > 1 and near_tie(times[0], times[1]):
            return f"batch {b}: two resident counts sit within 1e-9"
        if near_integer(i["layers"] - compute * i["host_bandwidth"] / per_layer):
            return f"batch {b}: the host stream meets the compute time at a whole layer"
    return None


_RESIDENT_L5 = """\
A model's forward pass runs `layers` identical feed-forward layers, each two matmuls: x[batch,
d_model] @ W1[d_model, d_ff] and h[batch, d_ff] @ W2[d_ff, d_model], `bytes_per_value` bytes per
value, on a chip of `peak_flops` FLOP/s. A chosen number of the layers keep both their weight
matrices resident in HBM (at most `max_resident_layers` layers fit); the weights of the others are
streamed from host memory at `host_bandwidth` bytes/s. Every layer reads its input activation and
writes its output activation in HBM for each matmul (x and the first product, then h and the
second product), and resident weights are read from HBM, all at `hbm_bandwidth` bytes/s. Compute,
the HBM traffic and the host stream of the whole pass all run at the same time, so the pass takes
as long as the slowest of the three totals. For each batch size in `batches`, give the number of
resident layers that makes the pass fastest (on a tie, the fewest) and that time in seconds."""


LEVEL_5 = scaling_level(
    "roofline",
    resident_layers,
    _RESIDENT_L5,
    '{"rows": [{"batch": <int>, "resident_layers": <int>, "time_s": <number>}, ...]}'
    "  # one row per batch, in order",
    resident_layers_float,
    "compute_ignored",
    sample=sample_resident,
    reject=_resident_rules,
)


def _resident_compute_tie(task: Task) -> bool:
    """A batch where several resident counts tie at the compute time (the tie rule decides)."""
    i = task.inputs
    for b, row in zip(i["batches"], task.expected["rows"], strict=True):
        if row["time_s"] == Fraction(i["layers"] * 4 * b * i["d_model"] * i["d_ff"], i["peak_flops"]):
            return True
    return False


STREAMING_BRANCHES = (Branch("compute-bound tie", _resident_compute_tie, Fraction(1, 5), (5,)),)


WEIGHT_STREAMING_ROOFLINE = five_levels(
    "weight_streaming_roofline",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L2: the FLOPs (fused multiply-adds), the traffic and the roofline derived from the "
    "described kernel: per tier the time, the bound and the FLOP/s sustained, no formula "
    "given; L3: weights split between HBM and a concurrent "
    "host stream, and which of compute, HBM and host sets the time; L4: the least tier bandwidth "
    "at which the matmul is compute-bound, per batch; L5: per batch, how many layers to keep "
    "resident in HBM for the fastest pass (streams balanced, or tied at the compute time: the "
    "fewest)",
    branches=STREAMING_BRANCHES,
)
