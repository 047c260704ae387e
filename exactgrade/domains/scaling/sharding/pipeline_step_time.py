"""The pipeline_step_time family of sharding: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling._sample import (
    capacity_between,
    divisors_of,
    overlaps_capacities,
    peak_flops,
    peak_for_capacity,
    round_numbers,
    rows,
)
from exactgrade.domains.scaling._task import (
    known_mistake,
    near_integer,
    near_tie,
    rounding_edge,
    scaling_level,
)
from exactgrade.domains.scaling.hardware import ANY_LINK, require
from exactgrade.domains.scaling.sharding.shared import (
    ONE_F_ONE_B,
    SCHEDULE_P,
    _fewest,
    _limit,
    _min_microbatches_edges,
    _stage_time,
    min_microbatches_float,
    sample_min_microbatches,
)
from exactgrade.family import Branch, Draw, Reject, five_levels
from exactgrade.task import Task


def pipeline_step_time(stage_counts, max_bubble_fraction, microbatch_stage_time_s):
    """The fewest microbatches that keep the bubble under the limit, then the step they take."""
    import math

    rows = []
    for stages in stage_counts:
        microbatches = max(1, math.ceil((stages - 1) * (1 - max_bubble_fraction) / max_bubble_fraction))
        rows.append(
            {
                "stages": stages,
                "min_microbatches": microbatches,
                "step_time_s": (microbatches + stages - 1) * microbatch_stage_time_s,
            }
        )
    return {"rows": rows}


def pipeline_step_time_float(stage_counts, max_bubble_fraction, microbatch_stage_time_s, mistake=None):
    known_mistake(mistake, "bubble_over_microbatches")
    found = min_microbatches_float(stage_counts, max_bubble_fraction, mistake)["rows"]
    return {
        "rows": [
            {
                "stages": row["stages"],
                "min_microbatches": row["min_microbatches"],
                "step_time_s": microbatch_stage_time_s * row["min_microbatches"]
                + microbatch_stage_time_s * (row["stages"] - 1),
            }
            for row in found
        ]
    }


def sample_pipeline_step_time(draw: Draw, level: int) -> dict:
    return {**sample_min_microbatches(draw, level), "microbatch_stage_time_s": _stage_time(draw, level)}


_STEP_ROW = (
    '{"rows": [{"stages": <int>, "min_microbatches": <int>, "step_time_s": <number>}, ...]}'
    "  # one row per entry of `stage_counts`, in order"
)


LEVEL_1 = scaling_level(
    "sharding",
    pipeline_step_time,
    """\
In a GPipe-style pipeline of P stages, a step of M microbatches takes M + P - 1 time slots of
`microbatch_stage_time_s` seconds each, and the bubble fraction (idle share of each stage) is
(P - 1) / (M + P - 1). For each stage count P in `stage_counts`, give the smallest integer M >= 1
for which the bubble fraction is at most `max_bubble_fraction`, and the step time in seconds with
that many microbatches.""",
    _STEP_ROW,
    pipeline_step_time_float,
    "bubble_over_microbatches",
    sample=sample_pipeline_step_time,
    reject=_min_microbatches_edges,
)


STEP_L2 = (
    SCHEDULE_P
    + """
One slot lasts `microbatch_stage_time_s` seconds. The bubble fraction is the share of the step
during which a stage is idle (the same for every stage). For each stage count in `stage_counts`,
give the smallest integer M >= 1 for which the bubble fraction is at most `max_bubble_fraction`,
and the step time in seconds with that many microbatches."""
)


LEVEL_2 = scaling_level(
    "sharding",
    pipeline_step_time,
    STEP_L2,
    _STEP_ROW,
    pipeline_step_time_float,
    "bubble_over_microbatches",
    reject=_min_microbatches_edges,
    sample=sample_pipeline_step_time,
)


def bubble_limited_step(
    layers, params_per_layer, global_batch_tokens, stage_counts, max_bubble_fraction, peak_flops, mfu
):
    """Per stage count P: the fewest microbatches M whose bubble is at most the limit, then the
    step of M + P - 1 slots, a slot being one stage's training FLOPs on G / M tokens."""
    import math
    from fractions import Fraction

    f = max_bubble_fraction
    rows = []
    for stages in stage_counts:
        microbatches = max(1, math.ceil((stages - 1) * (1 - f) / f))
        slot = Fraction(layers, stages) * 6 * params_per_layer * Fraction(global_batch_tokens, microbatches)
        rows.append(
            {"stages": stages, "step_time_s": (microbatches + stages - 1) * slot / (peak_flops * mfu)}
        )
    return {"rows": rows}


def bubble_limited_step_float(
    layers,
    params_per_layer,
    global_batch_tokens,
    stage_counts,
    max_bubble_fraction,
    peak_flops,
    mfu,
    mistake=None,
):
    known_mistake(mistake, "bubble_over_microbatches")
    ideal = 6.0 * params_per_layer * layers * global_batch_tokens / (peak_flops * mfu)
    rows = []
    for p in stage_counts:
        m = _fewest(p, max_bubble_fraction, mistake)
        rows.append({"stages": p, "step_time_s": ideal / p * (1 + (p - 1) / m)})
    return {"rows": rows}


def _bound_edge(stages: int, f: Fraction) -> str | None:
    return rounding_edge(f"{stages} stages: the microbatch bound", (stages - 1) * (1 - f) / f)


def _model(draw: Draw, level: int) -> dict:
    layers = draw.choice((12, 16, 24, 32, 40, 48, 60, 64, 72, 80, 96))
    return {
        "layers": layers,
        "params_per_layer": 10**6 * draw.integer(10, 3000)
        - (0 if round_numbers(level) else draw.integer(1, 999_999)),
    }


def sample_bubble_step(draw: Draw, level: int) -> dict:
    inputs = _model(draw, level)
    layers = inputs["layers"]
    counts = sorted(draw.sample(divisors_of(layers)[1:], min(rows(level, 2), len(divisors_of(layers)) - 1)))
    f = _limit(draw, level)
    if any(near_integer((p - 1) * (1 - f) / f) for p in counts):
        raise Reject("a stage count whose microbatch bound is a whole number")
    return {
        **inputs,
        "global_batch_tokens": 1024 * draw.integer(64, 4096),
        "stage_counts": counts,
        "max_bubble_fraction": f,
        "peak_flops": peak_flops(draw, level),
        "mfu": Fraction(draw.integer(2000, 6000), 10_000),
    }


def _bubble_step_edges(task: Task) -> str | None:
    i = task.inputs
    return next((e for p in i["stage_counts"] if (e := _bound_edge(p, i["max_bubble_fraction"]))), None)


_L3 = (
    SCHEDULE_P
    + """
The model has `layers` layers of `params_per_layer` parameters each, split evenly over P stages
(layers / P consecutive layers per stage). A step trains on `global_batch_tokens` tokens split into M
equal microbatches (a microbatch need not hold whole sequences); training costs 6 FLOPs per
parameter per token (forward and backward together), and a stage's slot for one microbatch lasts
its FLOPs / (peak_flops * mfu) seconds, with `peak_flops` FLOP/s per device and utilization `mfu`.
The bubble fraction is the share of the step during which a stage is idle (the same for every
stage). For each stage count P in `stage_counts`, take the smallest integer M >= 1 whose bubble
fraction is at most `max_bubble_fraction`, and give the step time in seconds."""
)


LEVEL_3 = scaling_level(
    "sharding",
    bubble_limited_step,
    _L3,
    '{"rows": [{"stages": <int>, "step_time_s": <number>}, ...]}  # one row per entry of `stage_counts`',
    bubble_limited_step_float,
    "bubble_over_microbatches",
    sample=sample_bubble_step,
    reject=_bubble_step_edges,
)


def fewest_fitting_stages(
    layers,
    params_per_layer,
    state_bytes_per_param,
    act_bytes_per_token_layer,
    global_batch_tokens,
    hbm_bytes,
    bubble_limits,
    peak_flops,
    mfu,
):
    """Per bubble limit: the fewest stages P (a divisor of the layers) whose first stage holds its
    layers' state plus min(M, P) microbatches of activations, M the fewest microbatches the
    limit allows; with that P, the step time. None when no divisor fits."""
    import math
    from fractions import Fraction

    rows = []
    for f in bubble_limits:
        found = None
        for stages in range(1, layers + 1):
            if layers % stages:
                continue
            microbatches = max(1, math.ceil((stages - 1) * (1 - f) / f))
            tokens = Fraction(global_batch_tokens, microbatches)
            held = min(microbatches, stages) * tokens * act_bytes_per_token_layer
            if Fraction(layers, stages) * (params_per_layer * state_bytes_per_param + held) <= hbm_bytes:
                slot = Fraction(layers, stages) * 6 * params_per_layer * tokens / (peak_flops * mfu)
                found = (stages, (microbatches + stages - 1) * slot)
                break
        if found is None:
            rows.append({"max_bubble_fraction": f, "stages": None, "step_time_s": None})
        else:
            rows.append({"max_bubble_fraction": f, "stages": found[0], "step_time_s": found[1]})
    return {"rows": rows}


def fewest_fitting_stages_float(
    layers,
    params_per_layer,
    state_bytes_per_param,
    act_bytes_per_token_layer,
    global_batch_tokens,
    hbm_bytes,
    bubble_limits,
    peak_flops,
    mfu,
    mistake=None,
):
    known_mistake(mistake, "all_microbatches_in_flight")
    ideal = 6.0 * params_per_layer * layers * global_batch_tokens / (peak_flops * mfu)
    rows = []
    for f in bubble_limits:
        found = None
        for p in (p for p in range(1, layers + 1) if layers % p == 0):
            m = _fewest(p, f, None)
            flight = m if mistake == "all_microbatches_in_flight" else min(m, p)
            acts = act_bytes_per_token_layer * global_batch_tokens * flight / m
            if layers / p * acts + layers / p * params_per_layer * state_bytes_per_param <= hbm_bytes:
                found = (p, ideal / p * (m + p - 1) / m)
                break
        rows.append(
            {
                "max_bubble_fraction": f,
                "stages": None if found is None else found[0],
                "step_time_s": None if found is None else found[1],
            }
        )
    return {"rows": rows}


def _stage_memory(i: dict, stages: int, f: Fraction) -> Fraction:
    m = max(1, math.ceil((stages - 1) * (1 - f) / f))
    held = min(m, stages) * Fraction(i["global_batch_tokens"], m) * i["act_bytes_per_token_layer"]
    return Fraction(i["layers"], stages) * (i["params_per_layer"] * i["state_bytes_per_param"] + held)


def sample_fitting(draw: Draw, level: int) -> dict:
    """Bubble limits from 1 % to 40 %; the HBM is drawn between the stage memories of two
    neighbouring divisors at a middle limit, so the answer moves with the limit; one instance in
    eight has a limit for which no divisor fits (None)."""
    inputs = _model(draw, level)
    # weights, gradients and optimizer state: Adam's 14 bytes plus bf16 or fp32 gradients, or more
    inputs.update(
        {
            "state_bytes_per_param": draw.choice((16, 18, 20)),
            "act_bytes_per_token_layer": 1024 * draw.integer(4, 64),
            "global_batch_tokens": 1024 * draw.integer(64, 2048),
            "hbm_bytes": 0,
            "bubble_limits": sorted({_limit(draw, level) for _ in range(rows(level, 1))}),
            "peak_flops": 0,
            "mfu": Fraction(draw.integer(2000, 6000), 10_000),
        }
    )
    limits = inputs["bubble_limits"]
    if len(limits) < 3:
        raise Reject("too few distinct bubble limits")
    middle = limits[len(limits) // 2]
    divisors = divisors_of(inputs["layers"])
    memories = sorted({_stage_memory(inputs, p, middle) for p in divisors}, reverse=True)
    real = [k for k in range(1, len(memories)) if overlaps_capacities(memories[k], memories[k - 1])]
    if not real:
        raise Reject("no two neighbouring stage memories have a real HBM between them")
    k = draw.choice(real)
    low, high = memories[k], memories[k - 1]
    if draw.chance(1, 8):  # below what the largest limit's best stage count needs
        high = min(_stage_memory(inputs, p, limits[-1]) for p in divisors)
        low = high * Fraction(draw.integer(70, 99), 100)
    inputs["hbm_bytes"] = capacity_between(draw, low, high)
    # the chip of that HBM: its peak drawn for it (a peak drawn apart posed 148 GB at 283 TFLOP/s)
    inputs["peak_flops"] = peak_for_capacity(draw, level, inputs["hbm_bytes"])
    return inputs


def _fitting_edges(task: Task) -> str | None:
    i = task.inputs
    for f in i["bubble_limits"]:
        for p in divisors_of(i["layers"]):
            problem = _bound_edge(p, f) if p > 1 else None
            if problem:
                return problem
            if near_tie(_stage_memory(i, p, f), i["hbm_bytes"]):
                return f"limit {f}, {p} stages: the stage memory sits on the HBM"
    found = task.expected["rows"]
    if 2 * sum(row["stages"] is None for row in found) > len(found):
        return "more than half of the rows are None"
    if len({row["stages"] for row in found}) < 2:
        return "the same stage count for every limit"
    return None


_L4 = (
    SCHEDULE_P
    + """
The model has `layers` layers of `params_per_layer` parameters each, split evenly over P stages (P
must divide `layers`). A step trains on `global_batch_tokens` tokens split into M equal
microbatches (a microbatch need not hold whole sequences); training costs 6 FLOPs per parameter
per token, and a stage's slot for one microbatch lasts its FLOPs / (peak_flops * mfu) seconds.
The bubble fraction is the share of the step during which a stage is idle; for a bubble limit,
M is the smallest integer >= 1 whose bubble fraction is at most that limit. Each device holds
`state_bytes_per_param` bytes per parameter of its layers (weights, gradients, optimizer state)
and `act_bytes_per_token_layer` bytes per token per layer for every microbatch in flight."""
    + ONE_F_ONE_B
    + """A stage count is allowed only when the first stage's peak memory (the state of its
layers plus the activations of min(M, P) microbatches for its layers) is at most `hbm_bytes`. For
each limit in `bubble_limits`, give the fewest stages allowed and the step time in seconds with
them; None for both if no divisor of `layers` is allowed."""
)


LEVEL_4 = scaling_level(
    "sharding",
    fewest_fitting_stages,
    _L4,
    '{"rows": [{"max_bubble_fraction": <number>, "stages": <int> | None, '
    '"step_time_s": <number> | None}, ...]}  # one row per entry of `bubble_limits`, in order',
    fewest_fitting_stages_float,
    "all_microbatches_in_flight",
    sample=sample_fitting,
    reject=_fitting_edges,
)


def pipeline_data_design(
    layers,
    params_per_layer,
    state_bytes_per_param,
    grad_bytes,
    act_bytes_per_token_layer,
    devices,
    global_batches,
    hbm_bytes,
    peak_flops,
    mfu,
    slot_overhead_s,
    link_bandwidth,
):
    """Per global batch G: stages P (dividing layers and devices), D = devices / P replicas and
    microbatches M >= 1 of the shortest step that fits; ties: fewer stages, then fewer
    microbatches. For a P the step (M + P - 1)(o + W/M) + allreduce is convex in M and the
    memory falls with M, so M is the larger of the fewest that fit and the better of the two
    integers around sqrt((P - 1) W / o)."""
    import math
    from fractions import Fraction

    rows = []
    for batch in global_batches:
        best = None
        for stages in range(1, layers + 1):
            if layers % stages or devices % stages:
                continue
            replicas = devices // stages
            per_stage = Fraction(layers, stages)
            tokens = Fraction(batch, replicas)
            state = per_stage * params_per_layer * state_bytes_per_param
            room = hbm_bytes - state
            acts = per_stage * tokens * act_bytes_per_token_layer  # one whole replica batch
            if room <= 0:
                continue
            if acts <= room:  # min(M, P) / M <= 1: every M fits
                fewest = 1
            else:  # need M > P with P / M * acts <= room
                fewest = math.ceil(stages * acts / room)
                if fewest <= stages:
                    continue
            work = per_stage * 6 * params_per_layer * tokens / (peak_flops * mfu)

            def step(m, stages=stages, work=work):
                return (m + stages - 1) * (slot_overhead_s + work / m)

            if stages == 1:
                free = 1
            else:
                root = math.isqrt(math.floor((stages - 1) * work / slot_overhead_s))
                free = min((max(1, root), root + 1), key=lambda m: (step(m), m))
            microbatches = max(fewest, free)
            grads = per_stage * params_per_layer * grad_bytes
            allreduce = 2 * grads * Fraction(replicas - 1, replicas) / link_bandwidth
            total = step(microbatches) + allreduce
            if best is None or total < best[2]:
                best = (stages, microbatches, total)
        if best is None:
            rows.append({"global_batch": batch, "stages": None, "microbatches": None, "step_time_s": None})
        else:
            rows.append(
                {"global_batch": batch, "stages": best[0], "microbatches": best[1], "step_time_s": best[2]}
            )
    return {"rows": rows}


def pipeline_data_design_float(
    layers,
    params_per_layer,
    state_bytes_per_param,
    grad_bytes,
    act_bytes_per_token_layer,
    devices,
    global_batches,
    hbm_bytes,
    peak_flops,
    mfu,
    slot_overhead_s,
    link_bandwidth,
    mistake=None,
):
    """Scans every microbatch count up to a bound for every stage count."""
    known_mistake(mistake, "weights_only_memory")
    rows = []
    for g in global_batches:
        found = []
        for p in (p for p in range(1, layers + 1) if layers % p == 0 and devices % p == 0):
            d = devices // p
            state = layers / p * params_per_layer * state_bytes_per_param
            work = 6.0 * params_per_layer * layers / p * (g / d) / (mfu * peak_flops)
            allreduce = 2.0 * (d - 1) / d * grad_bytes * params_per_layer * layers / p / link_bandwidth
            acts = 0.0 if mistake == "weights_only_memory" else act_bytes_per_token_layer * layers / p * g / d
            room = hbm_bytes - state
            if room <= 0:
                continue
            # M from 1 to 64, around the unconstrained optimum and around the memory's bound
            best_free = math.sqrt((p - 1) * work / slot_overhead_s)
            need = p * acts / room
            window = (
                set(range(1, 65))
                | {int(best_free) + k for k in range(-3, 4)}
                | {int(need) + k for k in range(-2, 4)}
            )
            for m in sorted(m for m in window if m >= 1):
                if acts * min(m, p) / m > room:
                    continue
                found.append(((p, m), slot_overhead_s * (m + p - 1) + work * (1 + (p - 1) / m) + allreduce))
        if not found:
            rows.append({"global_batch": g, "stages": None, "microbatches": None, "step_time_s": None})
            continue
        low = min(v for _, v in found)
        (p, m), step = next((k, v) for k, v in found if v <= low * (1 + 1e-12))
        rows.append({"global_batch": g, "stages": p, "microbatches": m, "step_time_s": step})
    return {"rows": rows}


def sample_design(draw: Draw, level: int) -> dict:
    """Global batches over a factor of 16 or more, so a small batch wants few stages (the
    gradient all-reduce is paid per replica) and a large one many; the HBM lies between the
    state of the largest and of the smallest stage count that divide both layers and devices."""
    inputs = _model(draw, max(level, 3))
    layers = inputs["layers"]
    devices = draw.choice((16, 24, 32, 48, 64, 96, 128, 192, 256))
    common = [p for p in divisors_of(layers) if devices % p == 0]
    if len(common) < 4:
        raise Reject("too few stage counts divide both the layers and the devices")
    exponents = sorted(draw.sample(range(8, 18), rows(level, 1)))
    if exponents[-1] - exponents[0] < 6:
        raise Reject("global batches too close together")
    per_device = [2**e * draw.choice((1, 3)) for e in exponents]
    grad_bytes = draw.choice((2, 4))  # the state holds them: Adam's 14 bytes plus the gradients
    inputs.update(
        {
            "state_bytes_per_param": 14 + grad_bytes,
            "grad_bytes": grad_bytes,
            "act_bytes_per_token_layer": 1024 * draw.integer(16, 512),
            "devices": devices,
            "global_batches": [devices * t for t in per_device],
            "hbm_bytes": 0,
            "peak_flops": 0,
            "mfu": Fraction(draw.integer(2000, 6000), 10_000),
            "slot_overhead_s": Fraction(draw.integer(1, 2000), 100_000),
            "link_bandwidth": 0,
        }
    )
    state = layers * inputs["params_per_layer"] * inputs["state_bytes_per_param"]
    inputs["hbm_bytes"] = capacity_between(
        draw, Fraction(state, common[-1]) * Fraction(21, 20), Fraction(state, common[1])
    )
    # the chip of that HBM: its peak drawn for it (a peak drawn apart posed 56.5 GB at 1.9 PFLOP/s)
    inputs["peak_flops"] = peak_for_capacity(draw, level, inputs["hbm_bytes"])
    # The link that balances the falling all-reduce against the growing bubble at a middle
    # stage count and the middle batch: A / P^2 = o + sqrt(o W / (P - 1)), A = 2 L params g / B.
    middle_p = draw.choice(common[1:-1])
    work = (
        6.0
        * layers
        * inputs["params_per_layer"]
        * per_device[len(per_device) // 2]
        / (float(inputs["peak_flops"]) * float(inputs["mfu"]))
    )
    o = float(inputs["slot_overhead_s"])
    link = (
        2.0
        * layers
        * inputs["params_per_layer"]
        * inputs["grad_bytes"]
        / (middle_p**2 * (o + math.sqrt(o * work / (middle_p - 1))))
    )
    inputs["link_bandwidth"] = require("link_bandwidth", 10**6 * max(1, round(link / 10**6)), ANY_LINK)
    return inputs


def _design_rules(task: Task) -> str | None:
    """Refuse an instance with a row no layout fits, whose best layout is within 1e-9 of the
    best of another stage count or of the next microbatch count, whose memory bound on M sits
    on an integer, or whose stage count is the same for every batch."""
    i = task.inputs
    for row in task.expected["rows"]:
        batch, best, p, m = row["global_batch"], row["step_time_s"], row["stages"], row["microbatches"]
        if p is None:
            return f"global batch {batch}: no layout fits"
        d = i["devices"] // p
        per_stage = Fraction(i["layers"], p)
        room = i["hbm_bytes"] - per_stage * i["params_per_layer"] * i["state_bytes_per_param"]
        acts = per_stage * Fraction(batch, d) * i["act_bytes_per_token_layer"]
        if near_tie(acts, room) or (acts > room and near_integer(p * acts / room)):
            return f"global batch {batch}: the fewest microbatches that fit sit on an integer bound"
        work = per_stage * 6 * i["params_per_layer"] * Fraction(batch, d) / (i["peak_flops"] * i["mfu"])
        allreduce = _allreduce(i, per_stage, d)
        for other in (m - 1, m + 1):
            fits = acts * min(other, p) <= room * other
            if other >= 1 and fits:
                value = (other + p - 1) * (i["slot_overhead_s"] + work / other) + allreduce
                if value != best and near_tie(value, best):
                    return f"global batch {batch}: {other} microbatches within 1e-9 of the best"
        for q in (q for q in divisors_of(i["layers"]) if i["devices"] % q == 0 and q != p):
            value = _best_for_stages(i, batch, q)
            if value is not None and near_tie(value, best):
                return f"global batch {batch}: {q} stages within 1e-9 of the best"
    if len({row["stages"] for row in task.expected["rows"]}) < 2:
        return "the same stage count for every global batch"
    return None


def _best_for_stages(i: dict, batch: int, stages: int) -> Fraction | None:
    """The reference's best step for one stage count (None: it does not fit)."""
    d = i["devices"] // stages
    per_stage = Fraction(i["layers"], stages)
    tokens = Fraction(batch, d)
    room = i["hbm_bytes"] - per_stage * i["params_per_layer"] * i["state_bytes_per_param"]
    acts = per_stage * tokens * i["act_bytes_per_token_layer"]
    if room <= 0:
        return None
    fewest = 1 if acts <= room else math.ceil(stages * acts / room)
    if acts > room and fewest <= stages:
        return None
    work = per_stage * 6 * i["params_per_layer"] * tokens / (i["peak_flops"] * i["mfu"])
    o = i["slot_overhead_s"]

    def step(m: int) -> Fraction:
        return (m + stages - 1) * (o + work / m)

    root = math.isqrt(math.floor((stages - 1) * work / o)) if stages > 1 else 0
    m = max(fewest, min((max(1, root), root + 1), key=lambda m: (step(m), m)))
    return step(m) + _allreduce(i, per_stage, d)


def _allreduce(i: dict, per_stage: Fraction, replicas: int) -> Fraction:
    grads = per_stage * i["params_per_layer"] * i["grad_bytes"]
    return 2 * grads * Fraction(replicas - 1, replicas) / i["link_bandwidth"]


_L5 = (
    SCHEDULE_P
    + """
You lay out the training of a model of `layers` layers of `params_per_layer` parameters each on
`devices` devices: P pipeline stages (P must divide both `layers` and `devices`, the layers
split evenly), replicated over D = devices / P data-parallel pipelines. A step's global batch of
tokens is split evenly over the D pipelines, and each pipeline splits its share into M equal
microbatches (M >= 1 any integer; a microbatch need not hold whole sequences). Training costs 6
FLOPs per parameter per token, at `peak_flops` FLOP/s with utilization `mfu` per device; a slot
lasts `slot_overhead_s` (a fixed cost per microbatch per stage) plus the stage's FLOPs for that
microbatch divided by (peak_flops * mfu). After the pipeline's last slot, every device
all-reduces the gradients of its layers (`grad_bytes` bytes per parameter) with the devices
holding the same stage in the other pipelines, a ring over links of `link_bandwidth` bytes/s per
device (nothing to do when D = 1); the step ends when that all-reduce does. Each device holds
`state_bytes_per_param` bytes per parameter of its layers (weights, gradients, optimizer state)
and `act_bytes_per_token_layer` bytes per token per layer for every microbatch in flight."""
    + ONE_F_ONE_B
    + """The first stage's peak memory (the state of its layers plus the activations of min(M, P)
microbatches for its layers) must be at most `hbm_bytes`. For each global batch (in tokens) in
`global_batches`, give the allowed (P, M) of the shortest step (on a tie, the fewer stages, then
the fewer microbatches) and that step time in seconds; None for all three if no layout is
allowed."""
)


LEVEL_5 = scaling_level(
    "sharding",
    pipeline_data_design,
    _L5,
    '{"rows": [{"global_batch": <int>, "stages": <int> | None, "microbatches": <int> | None, '
    '"step_time_s": <number> | None}, ...]}  # one row per entry of `global_batches`, in order',
    pipeline_data_design_float,
    "weights_only_memory",
    sample=sample_design,
    reject=_design_rules,
    varying=("rows[].stages",),
)


def _no_stages(task: Task) -> bool:
    return any(row["stages"] is None for row in task.expected["rows"])


BRANCHES = (Branch("none", _no_stages, Fraction(1, 16), (4,)),)


PIPELINE_STEP_TIME = five_levels(
    "pipeline_step_time",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="(no canonical task) min_microbatches chained into the step time; L2: the schedule "
    "described, the bubble derived; L3: the slot time derived from the layers and the chip, "
    "chained with the microbatches the bubble limit needs; L4: per bubble limit, the fewest "
    "stages whose first stage holds its state and the activations of the microbatches in "
    "flight (None); L5: stages, data-parallel replicas and microbatches chosen together per "
    "global batch under a per-slot overhead, each stage's gradient all-reduce and the "
    "memory of the microbatches in flight",
    branches=BRANCHES,
)
