"""The matmul_roofline family of roofline: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling import _sample as sample
from exactgrade.domains.scaling._sample import chip_inputs, peak_and_bandwidth
from exactgrade.domains.scaling._task import known_mistake, near_integer, near_tie, scaling_level
from exactgrade.domains.scaling._text import BF16_MATMUL
from exactgrade.domains.scaling.roofline.shared import _ROOFLINE_ROW, _intensity_not_tied
from exactgrade.family import Branch, Draw, Reject, five_levels
from exactgrade.task import Task


def matmul_roofline(batches, d_model, d_ff, weight_bytes, activation_bytes, peak_flops, hbm_bandwidth):
    """x[batch, d_model] @ W[d_model, d_ff]: read x and W, write y, once each."""
    from fractions import Fraction

    rows = []
    for batch in batches:
        flops = 2 * batch * d_model * d_ff
        traffic = (
            activation_bytes * batch * d_model
            + weight_bytes * d_model * d_ff
            + activation_bytes * batch * d_ff
        )
        compute_s = Fraction(flops) / peak_flops
        memory_s = Fraction(traffic) / hbm_bandwidth
        rows.append(
            {
                "batch": batch,
                "intensity": Fraction(flops) / traffic,
                "time_s": max(compute_s, memory_s),
                "bound": "compute" if compute_s >= memory_s else "memory",
            }
        )
    return {"rows": rows}


def matmul_roofline_float(
    batches, d_model, d_ff, weight_bytes, activation_bytes, peak_flops, hbm_bandwidth, mistake=None
):
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


def sample_matmul_roofline(draw: Draw, level: int) -> dict:
    """Level 1: a canonical-sized layer on a round chip; each level adds batches (3 + level),
    widens the model (d_model up to 2048 * 2**level) and from level 3 on uses non-round chip
    numbers and int8 or fp32 operands."""
    d_model = 1024 * draw.integer(2, 2 * 2**level)
    d_ff = d_model * draw.choice((2, 3, 4, 8) if level >= 2 else (4,))
    batches = sorted(draw.sample(range(1, 2 ** (9 + level)), 2 + level))
    batches = sorted({1, *batches})
    peak, bandwidth = peak_and_bandwidth(draw, level)
    if level <= 2:
        weight_bytes = activation_bytes = 2
    else:
        weight_bytes, activation_bytes = draw.choice(((1, 2), (2, 2)))
    return {
        "batches": batches,
        "d_model": d_model,
        "d_ff": d_ff,
        "weight_bytes": weight_bytes,
        "activation_bytes": activation_bytes,
        "peak_flops": peak,
        "hbm_bandwidth": bandwidth,
    }


LEVEL_1 = scaling_level(
    "roofline",
    matmul_roofline,
    """\
A feed-forward matmul y = x @ W multiplies activations x of shape [batch, d_model] by weights W of
shape [d_model, d_ff]. Each step reads x and W from HBM once and writes y once; weights take
`weight_bytes` bytes per value and activations (x and y) `activation_bytes`. The chip peaks at
`peak_flops` FLOP/s with `hbm_bandwidth` bytes/s of HBM bandwidth. For each batch size in
`batches`, give the arithmetic intensity (FLOPs per byte moved), the roofline time in seconds and
whether the matmul is compute- or memory-bound.""",
    _ROOFLINE_ROW,
    matmul_roofline_float,
    "weights_only_traffic",
    sample=sample_matmul_roofline,
    reject=_intensity_not_tied,
    varying=("rows[].bound",),
    tags=("headline:matmul_roofline_crossover",),
)


MATMUL = """\
The matmul y = x @ W multiplies activations x of shape [batch, d_model] by weights W of shape
[d_model, d_ff]; a kernel reads each operand from HBM once and writes its result once. Weights
take `weight_bytes` bytes per value and activations `activation_bytes`. The chip peaks at
`peak_flops` FLOP/s with `hbm_bandwidth` bytes/s of HBM bandwidth.
""" + BF16_MATMUL


def matmul_backward(batches, d_model, d_ff, weight_bytes, activation_bytes, peak_flops, hbm_bandwidth):
    """dX = dY @ W^T and dW = X^T @ dY, two kernels; dW is written in fp32."""
    from fractions import Fraction

    rows = []
    for batch in batches:
        flops = 2 * batch * d_model * d_ff
        dx_bytes = (
            activation_bytes * batch * d_ff
            + weight_bytes * d_model * d_ff
            + activation_bytes * batch * d_model
        )
        dw_bytes = activation_bytes * batch * d_model + activation_bytes * batch * d_ff + 4 * d_model * d_ff
        times, bounds = [], []
        for traffic in (dx_bytes, dw_bytes):
            compute_s, memory_s = Fraction(flops, peak_flops), Fraction(traffic, hbm_bandwidth)
            times.append(max(compute_s, memory_s))
            bounds.append("compute" if compute_s >= memory_s else "memory")
        rows.append(
            {"batch": batch, "backward_s": times[0] + times[1], "dx_bound": bounds[0], "dw_bound": bounds[1]}
        )
    return {"rows": rows}


def matmul_backward_float(
    batches, d_model, d_ff, weight_bytes, activation_bytes, peak_flops, hbm_bandwidth, mistake=None
):
    known_mistake(mistake, "one_backward_matmul")
    rows = []
    for b in batches:
        compute = 2.0 * b * d_ff * d_model / peak_flops
        dx = ((b * d_model + b * d_ff) * activation_bytes + d_model * d_ff * weight_bytes) / hbm_bandwidth
        dw = (activation_bytes * b * (d_ff + d_model) + 4.0 * d_ff * d_model) / hbm_bandwidth
        total = max(compute, dx) + (0.0 if mistake == "one_backward_matmul" else max(compute, dw))
        rows.append(
            {
                "batch": b,
                "backward_s": total,
                "dx_bound": "compute" if compute >= dx else "memory",
                "dw_bound": "compute" if compute >= dw else "memory",
            }
        )
    return {"rows": rows}


def _matmul_inputs(draw: Draw, level: int) -> dict:
    d_model = 1024 * draw.integer(2, 16)
    return {
        "d_model": d_model,
        "d_ff": d_model * draw.choice((2, 3, 4, 8)),
        "weight_bytes": draw.choice((1, 2)),
        "activation_bytes": 2,
    }


def sample_backward(draw: Draw, level: int) -> dict:
    inputs = _matmul_inputs(draw, level)
    batches = sorted({1, *draw.sample(range(2, 2**13), 3 + level)})
    return {
        "batches": batches,
        **inputs,
        **chip_inputs(draw, level),
    }


def _backward_not_tied(task: Task) -> str | None:
    i = task.inputs
    for b in i["batches"]:
        flops = Fraction(2 * b * i["d_model"] * i["d_ff"], i["peak_flops"])
        for traffic in (
            i["activation_bytes"] * b * (i["d_model"] + i["d_ff"])
            + i["weight_bytes"] * i["d_model"] * i["d_ff"],
            i["activation_bytes"] * b * (i["d_model"] + i["d_ff"]) + 4 * i["d_model"] * i["d_ff"],
        ):
            if near_tie(flops, Fraction(traffic, i["hbm_bandwidth"])):
                return f"batch {b}: compute time sits on memory time"
    return None


_MATMUL_L2 = (
    MATMUL
    + """
The backward pass of this matmul, given the gradient dy of y (shape [batch, d_ff], activation
bytes), runs two kernels: one computes the gradient of x (activation bytes) and the other the
gradient of W, which is written in fp32 (4 bytes per value); each kernel reads its two operands
once and writes its result once. For each batch size in `batches`, give the backward time in
seconds (the two kernels one after the other, each on the roofline) and the bound of each kernel."""
)


LEVEL_2 = scaling_level(
    "roofline",
    matmul_backward,
    _MATMUL_L2,
    '{"rows": [{"batch": <int>, "backward_s": <number>, "dx_bound": "compute" | "memory", '
    '"dw_bound": "compute" | "memory"}, ...]}  # one row per entry of `batches`, in order',
    matmul_backward_float,
    "one_backward_matmul",
    sample=sample_backward,
    reject=_backward_not_tied,
    varying=("rows[].dx_bound",),
)


def mlp_time(
    batches, d_model, d_ff, weight_bytes, activation_bytes, gelu_flops_per_element, peak_flops, hbm_bandwidth
):
    """Up-projection, GeLU and down-projection as three kernels, each on the roofline."""
    from fractions import Fraction

    def roofline(flops, traffic):
        return max(Fraction(flops, peak_flops), Fraction(traffic, hbm_bandwidth))

    rows = []
    for batch in batches:
        matmul = roofline(
            2 * batch * d_model * d_ff,
            activation_bytes * batch * (d_model + d_ff) + weight_bytes * d_model * d_ff,
        )
        gelu = roofline(gelu_flops_per_element * batch * d_ff, 2 * activation_bytes * batch * d_ff)
        total = 2 * matmul + gelu
        rows.append({"batch": batch, "mlp_time_s": total, "tokens_per_s": batch / total})
    return {"rows": rows}


def mlp_time_float(
    batches,
    d_model,
    d_ff,
    weight_bytes,
    activation_bytes,
    gelu_flops_per_element,
    peak_flops,
    hbm_bandwidth,
    mistake=None,
):
    known_mistake(mistake, "fused_activation")
    rows = []
    for b in batches:
        matmul = max(
            b * d_model * (2.0 * d_ff) / peak_flops,
            (d_model * (weight_bytes * d_ff + activation_bytes * b) + activation_bytes * b * d_ff)
            / hbm_bandwidth,
        )
        gelu = (
            0.0
            if mistake == "fused_activation"
            else max(
                b * d_ff * gelu_flops_per_element / peak_flops,
                b * d_ff * 2.0 * activation_bytes / hbm_bandwidth,
            )
        )
        total = gelu + matmul + matmul
        rows.append({"batch": b, "mlp_time_s": total, "tokens_per_s": b / total})
    return {"rows": rows}


def sample_mlp(draw: Draw, level: int) -> dict:
    inputs = sample_backward(draw, level)
    order = ("batches", "d_model", "d_ff", "weight_bytes", "activation_bytes")
    return {
        **{k: inputs[k] for k in order},
        "gelu_flops_per_element": draw.integer(4, 40),
        "peak_flops": inputs["peak_flops"],
        "hbm_bandwidth": inputs["hbm_bandwidth"],
    }


_MATMUL_L3 = (
    MATMUL
    + """
A feed-forward block applies three kernels to a batch, one after the other: the up-projection
y = x @ W1 (W1 of shape [d_model, d_ff]), a GeLU on every element of y (`gelu_flops_per_element`
FLOPs per element, reading y and writing its result once, activation bytes) and the
down-projection z = g @ W2 (W2 of shape [d_ff, d_model]). Each kernel reads its operands once and
writes its result once; W1 and W2 take weight bytes. For each batch size in `batches`, give the
block's time in seconds (each kernel on the roofline) and its throughput in rows (tokens) of the
batch per second."""
)


LEVEL_3 = scaling_level(
    "roofline",
    mlp_time,
    _MATMUL_L3,
    '{"rows": [{"batch": <int>, "mlp_time_s": <number>, "tokens_per_s": <number>}, ...]}'
    "  # one row per entry of `batches`, in order",
    mlp_time_float,
    "fused_activation",
    sample=sample_mlp,
)


def max_batch_within_latency(
    d_model, d_ff, weight_bytes, activation_bytes, peak_flops, hbm_bandwidth, latency_budgets_s
):
    """Largest batch whose roofline time is at most each budget (None if not even batch 1)."""
    import math
    from fractions import Fraction

    rows = []
    for budget in latency_budgets_s:
        by_compute = Fraction(budget * peak_flops, 2 * d_model * d_ff)
        by_memory = (budget * hbm_bandwidth - weight_bytes * d_model * d_ff) / Fraction(
            activation_bytes * (d_model + d_ff)
        )
        batch = math.floor(min(by_compute, by_memory))
        rows.append({"latency_budget_s": budget, "max_batch": batch if batch >= 1 else None})
    return {"rows": rows}


def _largest(ok):
    if not ok(1):
        return None
    low, high = 1, 2
    while ok(high):
        low, high = high, 2 * high
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if ok(middle) else (low, middle)
    return low


def max_batch_within_latency_float(
    d_model, d_ff, weight_bytes, activation_bytes, peak_flops, hbm_bandwidth, latency_budgets_s, mistake=None
):
    known_mistake(mistake, "compute_only")

    def time(b):
        compute = 2.0 * b * d_model * d_ff / peak_flops
        if mistake == "compute_only":
            return compute
        return max(
            compute, (weight_bytes * d_model * d_ff + activation_bytes * b * (d_model + d_ff)) / hbm_bandwidth
        )

    return {
        "rows": [
            {"latency_budget_s": t, "max_batch": _largest(lambda b, t=t: time(b) <= t)}
            for t in latency_budgets_s
        ]
    }


def _budget_batches(i: dict, budget: Fraction, peak: int, bandwidth: int) -> tuple[Fraction, Fraction]:
    by_compute = Fraction(budget * peak, 2 * i["d_model"] * i["d_ff"])
    by_memory = (budget * bandwidth - i["weight_bytes"] * i["d_model"] * i["d_ff"]) / Fraction(
        i["activation_bytes"] * (i["d_model"] + i["d_ff"])
    )
    return by_compute, by_memory


def sample_latency(draw: Draw, level: int) -> dict:
    """Budgets around the batch-1 time: a third of them below it (None)."""
    inputs = _matmul_inputs(draw, level)
    peak, bandwidth = peak_and_bandwidth(draw, level)
    d, f = inputs["d_model"], inputs["d_ff"]
    batch_one = max(
        Fraction(2 * d * f, peak),
        Fraction(inputs["activation_bytes"] * (d + f) + inputs["weight_bytes"] * d * f, bandwidth),
    )
    budgets = sorted(
        {
            Fraction(math.ceil(batch_one * Fraction(draw.integer(30, 3000), 100) * 10**7), 10**7)
            for _ in range(2 + level)
        }
    )
    return {**inputs, "peak_flops": peak, "hbm_bandwidth": bandwidth, "latency_budgets_s": budgets}


def _latency_edges(task: Task) -> str | None:
    i = task.inputs
    for budget in i["latency_budgets_s"]:
        for bound in _budget_batches(i, budget, i["peak_flops"], i["hbm_bandwidth"]):
            if near_integer(bound):
                return f"budget {budget}: a batch bound sits on an integer"
    return None


_MATMUL_L4 = (
    MATMUL
    + """
For each latency budget in `latency_budgets_s`, give the largest batch whose roofline time is at
most the budget, or None if not even batch 1 meets it."""
)


LEVEL_4 = scaling_level(
    "roofline",
    max_batch_within_latency,
    _MATMUL_L4,
    '{"rows": [{"latency_budget_s": <number>, "max_batch": <int> | None}, ...]}'
    "  # one row per budget, in order",
    max_batch_within_latency_float,
    "compute_only",
    sample=sample_latency,
    reject=_latency_edges,
)


def cheapest_chip(d_model, d_ff, weight_bytes, activation_bytes, chips, latency_budget_s):
    """The chip and batch of the fewest dollars per million rows under the latency budget."""
    import math
    from fractions import Fraction

    best = None
    for chip in chips:
        by_compute = Fraction(latency_budget_s * chip["peak_flops"], 2 * d_model * d_ff)
        by_memory = (latency_budget_s * chip["hbm_bandwidth"] - weight_bytes * d_model * d_ff) / Fraction(
            activation_bytes * (d_model + d_ff)
        )
        batch = math.floor(min(by_compute, by_memory))
        if batch < 1:
            continue
        time_s = max(
            Fraction(2 * batch * d_model * d_ff, chip["peak_flops"]),
            Fraction(
                activation_bytes * batch * (d_model + d_ff) + weight_bytes * d_model * d_ff,
                chip["hbm_bandwidth"],
            ),
        )
        cost = chip["dollars_per_hour"] * time_s / 3600 / batch * 10**6
        if best is None or cost < best[2]:
            best = (chip["name"], batch, cost)
    name, batch, cost = best if best is not None else (None, None, None)
    return {"rows": [{"chip": name, "batch": batch, "dollars_per_million_rows": cost}]}


def cheapest_chip_float(d_model, d_ff, weight_bytes, activation_bytes, chips, latency_budget_s, mistake=None):
    known_mistake(mistake, "compute_only")
    options = []
    for c in chips:

        def time(b, c=c):
            compute = 2.0 * b * d_model * d_ff / c["peak_flops"]
            if mistake == "compute_only":
                return compute
            traffic = weight_bytes * d_model * d_ff + activation_bytes * b * (d_model + d_ff)
            return max(compute, traffic / c["hbm_bandwidth"])

        b = _largest(lambda b, time=time: time(b) <= latency_budget_s)
        if b is not None:
            options.append((c["dollars_per_hour"] / 3600 * 1e6 * time(b) / b, c["name"], b))
    if not options:
        return {"rows": [{"chip": None, "batch": None, "dollars_per_million_rows": None}]}
    low = min(o[0] for o in options)
    cost, name, b = next(o for o in options if o[0] <= low * (1 + 1e-12))
    return {"rows": [{"chip": name, "batch": b, "dollars_per_million_rows": cost}]}


def _roofline_times(i: dict, chip: dict, batch: int) -> tuple[Fraction, Fraction]:
    """(compute, memory) seconds of the matmul at `batch` on `chip`."""
    d, f = i["d_model"], i["d_ff"]
    traffic = i["activation_bytes"] * batch * (d + f) + i["weight_bytes"] * d * f
    return Fraction(2 * batch * d * f, chip["peak_flops"]), Fraction(traffic, chip["hbm_bandwidth"])


def sample_cheapest(draw: Draw, level: int) -> dict:
    inputs = _matmul_inputs(draw, level)
    chips = sample.chips(draw, level, 2 + level)
    for chip in chips:
        chip["dollars_per_hour"] = Fraction(draw.integer(50, 1500), 100)
    d, f = inputs["d_model"], inputs["d_ff"]
    weight_read = min(Fraction(inputs["weight_bytes"] * d * f, c["hbm_bandwidth"]) for c in chips)
    # Just above the fastest weight read: the regime where the memory traffic limits the batch (at
    # budgets a few times the weight read, every chip's largest batch is compute-bound).
    budget = Fraction(math.ceil(weight_read * Fraction(1000 + draw.integer(2, 150), 1000) * 10**7), 10**7)
    drawn = {**inputs, "chips": chips, "latency_budget_s": budget}
    winner = cheapest_chip(**drawn)["rows"][0]
    if winner["chip"] is None:  # possible just above the weight read when d_model and d_ff are small
        raise Reject("no chip meets the drawn budget even at batch 1")
    chip = next(c for c in chips if c["name"] == winner["chip"])
    compute_s, memory_s = _roofline_times(drawn, chip, winner["batch"])
    if compute_s >= memory_s:
        # Compute-bound at its largest batch: ignoring the memory traffic would give the key. Refused
        # before the None branch is drawn, so that branch keeps its share of 1 in 8.
        raise Reject("the cheapest chip is compute-bound at its largest batch")
    if draw.chance(1, 8):
        budget = Fraction(math.ceil(weight_read * Fraction(draw.integer(50, 99), 100) * 10**7), 10**7)
    return {**drawn, "latency_budget_s": budget}


def _cheapest_rules(task: Task) -> str | None:
    i = task.inputs
    costs = []
    for c in i["chips"]:
        bounds = _budget_batches(i, i["latency_budget_s"], c["peak_flops"], c["hbm_bandwidth"])
        if any(near_integer(b) for b in bounds):
            return f"{c['name']}: a batch bound sits on an integer"
        b = math.floor(min(bounds))
        if b >= 1:
            costs.append(c["dollars_per_hour"] * max(_roofline_times(i, c, b)) / b)
    costs.sort()
    if len(costs) >= 2 and costs[0] != costs[1] and near_tie(costs[0], costs[1]):
        return "the two cheapest chips sit within 1e-9"
    return None


_MATMUL_L5 = """\
The matmul y = x @ W multiplies activations x of shape [batch, d_model] by weights W of shape
[d_model, d_ff]; a kernel reads each operand from HBM once and writes its result once. Weights
take `weight_bytes` bytes per value and activations `activation_bytes`. You may run it on any
chip in `chips` (peak FLOP/s, HBM bytes/s and dollars per hour of each given) at any batch size
whose roofline time is at most `latency_budget_s`. Give the chip and batch that compute rows of y
at the fewest dollars per million rows (dollars per hour * time / 3600 / batch * 10**6), with that
cost; on a tie, the earlier chip, then the larger batch (a chip that is compute-bound costs the same
per row at every compute-bound batch). None for all three if no chip meets the budget even at batch 1.
""" + BF16_MATMUL


LEVEL_5 = scaling_level(
    "roofline",
    cheapest_chip,
    _MATMUL_L5,
    '{"rows": [{"chip": <str> | None, "batch": <int> | None, "dollars_per_million_rows": <number> | None}]}',
    cheapest_chip_float,
    "compute_only",
    sample=sample_cheapest,
    reject=_cheapest_rules,
)


def _latency_none(task: Task) -> bool:
    return any(row["max_batch"] is None for row in task.expected["rows"])


def _cheapest_none(task: Task) -> bool:
    return task.expected["rows"][0]["chip"] is None


MATMUL_BRANCHES = (
    Branch("none", _latency_none, Fraction(1, 5), (4,)),
    Branch("none at L5", _cheapest_none, Fraction(1, 40), (5,)),
)


MATMUL_ROOFLINE = five_levels(
    "matmul_roofline",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L2: the backward pass (two kernels, fp32 weight gradient) derived; L3: an MLP of three "
    "kernels (up-projection, GeLU, down-projection) chained into a block time and throughput; "
    "L4: the largest batch under each latency budget (None below batch 1's time); L5: the chip "
    "and batch of the fewest dollars per million rows under a latency budget",
    branches=MATMUL_BRANCHES,
)
