"""The min_compute_bound_batch family of roofline: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling._sample import (
    chip_at_ridge,
    chip_inputs,
    letters,
    sample_min_compute_bound_batch,
)
from exactgrade.domains.scaling._task import (
    known_mistake,
    near_integer,
    near_tie,
    rounding_edge,
    scaling_level,
    tie_edge,
)
from exactgrade.domains.scaling._text import BF16_MATMUL, DEQUANT_AT_PEAK
from exactgrade.domains.scaling.hardware import RIDGE
from exactgrade.family import Branch, Draw, five_levels
from exactgrade.task import Task


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


def _min_batch_edges(task: Task) -> str | None:
    """The exact batch bound B* = c*bytes*D*F / (2*D*F - c*bytes*(D + F)) must not sit on an
    integer (ceil could go either way), nor the denominator on zero (None or a huge batch)."""
    d, f, w = task.inputs["d_model"], task.inputs["d_ff"], task.inputs["bytes_per_value"]
    for chip in task.inputs["chips"]:
        critical = Fraction(chip["peak_flops"], chip["hbm_bandwidth"])
        problem = tie_edge(
            f"{chip['name']}: the largest intensity against the critical one",
            Fraction(2 * d * f, w * (d + f)),
            critical,
        )
        slope = 2 * d * f - critical * w * (d + f)
        if problem is None and slope > 0:
            problem = rounding_edge(f"{chip['name']}: the batch bound", critical * w * d * f / slope)
        if problem:
            return problem
    return None


_MIN_BATCH_ROW = (
    '{"rows": [{"chip": <str>, "critical_intensity": <number>, "min_batch": <int> | None}, '
    "...]}  # one row per chip, in order"
)


LEVEL_1 = scaling_level(
    "roofline",
    min_compute_bound_batch,
    """\
The matmul x[batch, d_model] @ W[d_model, d_ff] reads x and W once and writes y[batch, d_ff] once,
every value taking `bytes_per_value` bytes. For each chip in `chips` (peak FLOP/s and HBM bytes/s
given), find the chip's critical intensity (peak_flops / hbm_bandwidth, FLOPs per byte) and the
smallest integer batch at which the matmul is compute-bound (its arithmetic intensity at least the
critical intensity); None if no batch size makes it compute-bound.""",
    _MIN_BATCH_ROW,
    min_compute_bound_batch_float,
    "batch_equals_critical_intensity",
    sample=sample_min_compute_bound_batch,
    reject=_min_batch_edges,
)


_MIN_BATCH_L2 = """\
The matmul x[batch, d_model] @ W[d_model, d_ff] reads x and W once and writes y[batch, d_ff] once,
every value taking `bytes_per_value` bytes. For each chip in `chips` (peak FLOP/s and HBM bytes/s
given), give the chip's critical intensity and the smallest integer batch at which the matmul is
compute-bound; None if no batch size makes it compute-bound."""


LEVEL_2 = scaling_level(
    "roofline",
    min_compute_bound_batch,
    _MIN_BATCH_L2,
    _MIN_BATCH_ROW,
    min_compute_bound_batch_float,
    "batch_equals_critical_intensity",
    reject=_min_batch_edges,
    sample=sample_min_compute_bound_batch,
)


# ================================================================ min_compute_bound_batch
def min_batch_and_time(chips, d_model, d_ff, weight_bytes, activation_bytes):
    """Per chip: the smallest compute-bound batch of the mixed-precision matmul, then its step time."""
    import math
    from fractions import Fraction

    rows = []
    for chip in chips:
        critical = Fraction(chip["peak_flops"], chip["hbm_bandwidth"])
        # 2*B*D*F >= c * (a*B*(D + F) + w*D*F)
        slope = 2 * d_model * d_ff - critical * activation_bytes * (d_model + d_ff)
        if slope <= 0:
            rows.append({"chip": chip["name"], "min_batch": None, "step_time_s": None})
            continue
        batch = max(1, math.ceil(critical * weight_bytes * d_model * d_ff / slope))
        rows.append(
            {
                "chip": chip["name"],
                "min_batch": batch,
                "step_time_s": Fraction(2 * batch * d_model * d_ff, chip["peak_flops"]),
            }
        )
    return {"rows": rows}


def min_batch_and_time_float(chips, d_model, d_ff, weight_bytes, activation_bytes, mistake=None):
    known_mistake(mistake, "weights_at_activation_bytes")
    weights = activation_bytes if mistake == "weights_at_activation_bytes" else weight_bytes
    rows = []
    for c in chips:

        def bound(b, c=c):
            return (
                2.0 * b * d_model * d_ff / c["peak_flops"]
                >= ((d_model + d_ff) * b * activation_bytes + weights * d_model * d_ff) / c["hbm_bandwidth"]
            )

        if (
            2.0 * d_model * d_ff / (activation_bytes * (d_model + d_ff))
            <= c["peak_flops"] / c["hbm_bandwidth"]
        ):
            rows.append({"chip": c["name"], "min_batch": None, "step_time_s": None})
            continue
        high = 1
        while not bound(high):
            high *= 2
        low = high // 2
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (low, middle) if bound(middle) else (middle, high)
        rows.append(
            {
                "chip": c["name"],
                "min_batch": high,
                "step_time_s": d_model * (2.0 * high * d_ff) / c["peak_flops"],
            }
        )
    return {"rows": rows}


def _mixed_bound(i: dict, chip: dict) -> Fraction | None:
    critical = Fraction(chip["peak_flops"], chip["hbm_bandwidth"])
    slope = 2 * i["d_model"] * i["d_ff"] - critical * i["activation_bytes"] * (i["d_model"] + i["d_ff"])
    return critical * i["weight_bytes"] * i["d_model"] * i["d_ff"] / slope if slope > 0 else None


def sample_min_batch_time(draw: Draw, level: int) -> dict:
    """As level 1's sampler (a narrow layer in some instances, for None), with int8 or int4-sized
    weights apart from the activations."""
    base = sample_min_compute_bound_batch(draw, level)
    weight_bytes, activation_bytes = draw.choice(((1, 2), (2, 2)))
    return {
        "chips": base["chips"],
        "d_model": base["d_model"],
        "d_ff": base["d_ff"],
        "weight_bytes": weight_bytes,
        "activation_bytes": activation_bytes,
    }


def _min_batch_time_edges(task: Task) -> str | None:
    i = task.inputs
    for chip in i["chips"]:
        critical = Fraction(chip["peak_flops"], chip["hbm_bandwidth"])
        if near_tie(
            Fraction(2 * i["d_model"] * i["d_ff"], i["activation_bytes"] * (i["d_model"] + i["d_ff"])),
            critical,
        ):
            return f"{chip['name']}: the intensity limit sits on the critical intensity"
        bound = _mixed_bound(i, chip)
        if bound is not None and near_integer(bound):
            return f"{chip['name']}: the batch bound sits on an integer"
    return None


_MIN_BATCH_L3 = """\
The matmul y = x @ W multiplies activations x[batch, d_model] by weights W[d_model, d_ff]; it reads
x and W from HBM once and writes y[batch, d_ff] once. Weights take `weight_bytes` bytes per value,
activations (x and y) `activation_bytes`. For each chip in `chips` (peak FLOP/s and HBM bytes/s
given; every kernel on the roofline), give the smallest integer batch at which the matmul is
compute-bound (compute time at least memory time) and the matmul's time in seconds at that batch;
None for both if no batch size makes it compute-bound.
""" + BF16_MATMUL


LEVEL_3 = scaling_level(
    "roofline",
    min_batch_and_time,
    _MIN_BATCH_L3,
    '{"rows": [{"chip": <str>, "min_batch": <int> | None, "step_time_s": <number> | None}, ...]}'
    "  # one row per chip, in order",
    min_batch_and_time_float,
    "weights_at_activation_bytes",
    sample=sample_min_batch_time,
    reject=_min_batch_time_edges,
)


def min_width_for_batch(chips, batch, ff_ratio, weight_bytes, activation_bytes, width_step):
    """Per chip: the narrowest layer (d_model a multiple of width_step, d_ff = ff_ratio * d_model)
    whose matmul is compute-bound at this batch; None if no width makes it so."""
    import math
    from fractions import Fraction

    rows = []
    for chip in chips:
        c = Fraction(chip["peak_flops"], chip["hbm_bandwidth"])
        # 2*B*r*D^2 >= c*(a*B*(1 + r)*D + w*r*D^2)  <=>  D*(2*B*r - c*w*r) >= c*a*B*(1 + r)
        gain = 2 * batch * ff_ratio - c * weight_bytes * ff_ratio
        if gain <= 0:
            rows.append({"chip": chip["name"], "min_d_model": None})
            continue
        width = c * activation_bytes * batch * (1 + ff_ratio) / gain
        rows.append({"chip": chip["name"], "min_d_model": width_step * max(1, math.ceil(width / width_step))})
    return {"rows": rows}


def min_width_for_batch_float(
    chips, batch, ff_ratio, weight_bytes, activation_bytes, width_step, mistake=None
):
    known_mistake(mistake, "activations_ignored")
    rows = []
    for c in chips:

        def bound(d, c=c):
            f = ff_ratio * d
            moved = (
                0.0 if mistake == "activations_ignored" else activation_bytes * batch * (d + f)
            ) + weight_bytes * d * f
            return 2.0 * batch * d * f * c["hbm_bandwidth"] >= moved * c["peak_flops"]

        if 2.0 * batch <= weight_bytes * c["peak_flops"] / c["hbm_bandwidth"]:
            rows.append({"chip": c["name"], "min_d_model": None})
            continue
        k = 1
        while not bound(k * width_step) and k < 10**7:
            k += 1 if k < 64 else k // 2
        low = max(1, k // 2 if k > 64 else k - 1)
        k = next(j for j in range(low, k + 1) if bound(j * width_step))
        rows.append({"chip": c["name"], "min_d_model": k * width_step})
    return {"rows": rows}


def sample_min_width(draw: Draw, level: int) -> dict:
    """A batch that some chips can make compute-bound with a wide enough layer and others cannot
    (the batch's own intensity limit 2*batch/weight_bytes sits below their critical intensity)."""
    chips = [{"name": name, **chip_inputs(draw, level)} for name in letters("chip", 3 + level // 2)]
    weight_bytes, activation_bytes = draw.choice(((1, 2), (2, 2)))
    criticals = sorted(Fraction(c["peak_flops"], c["hbm_bandwidth"]) for c in chips)
    middle = criticals[draw.below(len(criticals))]
    batch = max(1, math.floor(middle * weight_bytes / 2 * Fraction(draw.integer(80, 140), 100)))
    return {
        "chips": chips,
        "batch": batch,
        "ff_ratio": draw.choice((2, 3, 4)),
        "weight_bytes": weight_bytes,
        "activation_bytes": activation_bytes,
        "width_step": draw.choice((64, 128, 256)),
    }


def _min_width_edges(task: Task) -> str | None:
    i = task.inputs
    for chip in i["chips"]:
        c = Fraction(chip["peak_flops"], chip["hbm_bandwidth"])
        gain = 2 * i["batch"] * i["ff_ratio"] - c * i["weight_bytes"] * i["ff_ratio"]
        if near_tie(2 * i["batch"] * i["ff_ratio"], c * i["weight_bytes"] * i["ff_ratio"]):
            return f"{chip['name']}: the batch's intensity limit sits on the critical intensity"
        if gain > 0:
            width = c * i["activation_bytes"] * i["batch"] * (1 + i["ff_ratio"]) / gain
            if near_integer(width / i["width_step"]):
                return f"{chip['name']}: the width bound sits on a multiple of the step"
            if width > 2**20:
                return f"{chip['name']}: a layer wider than 2**20"
    if all(row["min_d_model"] is None for row in task.expected["rows"]):
        return "no chip can be made compute-bound"
    return None


_MIN_BATCH_L4 = """\
A layer's matmul y = x @ W multiplies activations x[batch, d_model] by weights W[d_model, d_ff],
with d_ff = ff_ratio * d_model (`ff_ratio` given); it reads x and W from HBM once and writes y once.
Weights take `weight_bytes` bytes per value, activations (x and y) `activation_bytes`. The batch is
`batch`. For each chip in `chips` (peak FLOP/s and HBM bytes/s given), give the smallest d_model, a
multiple of `width_step`, at which the matmul is compute-bound (compute time at least memory time),
or None if no width makes it compute-bound.
""" + BF16_MATMUL


LEVEL_4 = scaling_level(
    "roofline",
    min_width_for_batch,
    _MIN_BATCH_L4,
    '{"rows": [{"chip": <str>, "min_d_model": <int> | None}, ...]}  # one row per chip, in order',
    min_width_for_batch_float,
    "activations_ignored",
    sample=sample_min_width,
    reject=_min_width_edges,
)


def format_min_batch(chips, d_model, d_ff, activation_bytes, formats):
    """Per chip: the weight format whose matmul turns compute-bound at the smallest batch, and that
    batch; decoding a format's weights costs FLOPs once per weight per matmul."""
    import math
    from fractions import Fraction

    rows = []
    for chip in chips:
        best = None
        for fmt in formats:
            # B*(2*D*F/P - a*(D + F)/W) >= bits/8*D*F/W - q*D*F/P
            gain = Fraction(2 * d_model * d_ff, chip["peak_flops"]) - Fraction(
                activation_bytes * (d_model + d_ff), chip["hbm_bandwidth"]
            )
            need = Fraction(fmt["bits_per_weight"] * d_model * d_ff, 8 * chip["hbm_bandwidth"]) - Fraction(
                fmt["dequant_flops_per_weight"] * d_model * d_ff, chip["peak_flops"]
            )
            if gain > 0:
                batch = max(1, math.ceil(need / gain))
            else:
                batch = 1 if gain >= need else None  # a larger batch only moves it further away
            if batch is not None and (best is None or batch < best[1]):
                best = (fmt["name"], batch)
        name, batch = best if best is not None else (None, None)
        rows.append({"chip": chip["name"], "format": name, "min_batch": batch})
    return {"rows": rows}


def format_min_batch_float(chips, d_model, d_ff, activation_bytes, formats, mistake=None):
    """Every batch tried from 1 up, in floats."""
    known_mistake(mistake, "dequant_per_row")
    rows = []
    for c in chips:
        options = []
        for order, f in enumerate(formats):
            for b in range(1, 2**16):
                rows_decoded = b if mistake == "dequant_per_row" else 1
                flops = (
                    2.0 * b * d_model * d_ff + f["dequant_flops_per_weight"] * d_model * d_ff * rows_decoded
                )
                moved = activation_bytes * b * (d_model + d_ff) + f["bits_per_weight"] / 8 * d_model * d_ff
                if flops / c["peak_flops"] >= moved / c["hbm_bandwidth"]:
                    options.append((b, order, f["name"]))
                    break
        if options:
            b, _, name = min(options)
            rows.append({"chip": c["name"], "format": name, "min_batch": b})
        else:
            rows.append({"chip": c["name"], "format": None, "min_batch": None})
    return {"rows": rows}


_WEIGHT_FORMATS = (
    ("int8", 8, 1, 6),
    ("fp8", 8, 0, 3),
    ("int4", 4, 4, 24),
    ("nf4", 4, 8, 40),
    ("int2", 2, 10, 60),
)


def sample_format_batch(draw: Draw, level: int) -> dict:
    """Chips over the whole real range of critical intensity (hardware.RIDGE, 110 to 600 FLOPs
    per byte): the decode FLOPs of narrow formats weigh against the bytes they save differently on
    each, and a chip above the layer's intensity limit has no compute-bound batch (None), so the
    answer changes with the chip. The narrowest format wins most chips: layers from d_model 256
    (a low intensity limit) keep enough instances whose rows differ."""
    chips = []
    for name in letters("chip", 3 + level // 2):
        peak, bandwidth = chip_at_ridge(draw, level, RIDGE.low, RIDGE.high)
        chips.append({"name": name, "peak_flops": peak, "hbm_bandwidth": bandwidth})
    formats = [{"name": "bf16", "bits_per_weight": 16, "dequant_flops_per_weight": 0}] + [
        {"name": name, "bits_per_weight": bits, "dequant_flops_per_weight": draw.integer(low, high)}
        for name, bits, low, high in draw.sample(_WEIGHT_FORMATS, draw.integer(2, 4))
    ]
    d_model = 128 * draw.integer(2, 64)
    return {
        "chips": chips,
        "d_model": d_model,
        "d_ff": d_model * draw.choice((2, 3, 4)) + 64 * draw.integer(0, 7),
        "activation_bytes": 2,
        "formats": formats,
    }


def _format_batch_edges(task: Task) -> str | None:
    i = task.inputs
    for chip in i["chips"]:
        gain = Fraction(2 * i["d_model"] * i["d_ff"], chip["peak_flops"]) - Fraction(
            i["activation_bytes"] * (i["d_model"] + i["d_ff"]), chip["hbm_bandwidth"]
        )
        batches = []
        for fmt in i["formats"]:
            need = Fraction(
                fmt["bits_per_weight"] * i["d_model"] * i["d_ff"], 8 * chip["hbm_bandwidth"]
            ) - Fraction(fmt["dequant_flops_per_weight"] * i["d_model"] * i["d_ff"], chip["peak_flops"])
            if near_tie(gain, 0) or (gain > 0 and near_integer(need / gain)) or near_tie(gain, need):
                return f"{chip['name']} {fmt['name']}: the batch bound sits on an integer"
            if gain > 0:
                batches.append(max(1, math.ceil(need / gain)))
        if batches and min(batches) > 2**15:
            return f"{chip['name']}: the smallest batch is above 2**15"
    return None


_MIN_BATCH_L5 = """\
The matmul y = x @ W multiplies activations x[batch, d_model] by weights W[d_model, d_ff]; it reads
x and W from HBM once and writes y[batch, d_ff] once; x and y take `activation_bytes` bytes per
value. W may be stored in any format of `formats`: a weight takes `bits_per_weight` bits in HBM,
and the kernel decodes every weight once per matmul (whatever the batch), at
`dequant_flops_per_weight` FLOPs per weight, on top of the matmul's own FLOPs. The matmul's time
follows the roofline (all its FLOPs against all its HBM bytes). For each chip in `chips` (peak
FLOP/s and HBM bytes/s given), give the format whose matmul becomes compute-bound (compute time at
least memory time) at the smallest integer batch, and that batch; on a tie, the format listed
first; None for both if no format is compute-bound at any batch.
""" + DEQUANT_AT_PEAK


LEVEL_5 = scaling_level(
    "roofline",
    format_min_batch,
    _MIN_BATCH_L5,
    '{"rows": [{"chip": <str>, "format": <str> | None, "min_batch": <int> | None}, ...]}'
    "  # one row per chip, in order",
    format_min_batch_float,
    "dequant_per_row",
    sample=sample_format_batch,
    reject=_format_batch_edges,
    varying=("rows[].format",),
)


def _rows_none(field: str):
    return lambda task: any(row[field] is None for row in task.expected["rows"])


MIN_BATCH_BRANCHES = (
    Branch("none", _rows_none("min_batch"), Fraction(1, 5), (1, 2, 3)),
    Branch("none at L4", _rows_none("min_d_model"), Fraction(1, 5), (4,)),
)


MIN_COMPUTE_BOUND_BATCH = five_levels(
    "min_compute_bound_batch",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L2: the compute-bound condition derived; L3: with weights and activations of different "
    "widths, the smallest compute-bound batch and its step time (None); L4: the narrowest layer "
    "compute-bound at a given batch, per chip (None where the batch's own limit is below the "
    "critical intensity); L5: per chip, the weight format (narrower bits against decode FLOPs) "
    "compute-bound at the smallest batch, and that batch",
    branches=MIN_BATCH_BRANCHES,
)
