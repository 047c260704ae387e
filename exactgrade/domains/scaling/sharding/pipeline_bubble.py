"""The pipeline_bubble family of sharding: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction

from exactgrade.domains.scaling._sample import capacity_between, divisors_of, rows, sorted_sample
from exactgrade.domains.scaling._task import known_mistake, near_tie, scaling_level, tie_edge
from exactgrade.domains.scaling.sharding.shared import ONE_F_ONE_B, SCHEDULE, SCHEDULE_P, _stage_time
from exactgrade.family import Branch, Draw, Reject, five_levels
from exactgrade.task import Task


def pipeline_bubble(stages, microbatch_counts, microbatch_stage_time_s):
    """GPipe-style schedule: M microbatches through P stages take M + P - 1 slots."""
    from fractions import Fraction

    rows = []
    for microbatches in microbatch_counts:
        slots = microbatches + stages - 1
        rows.append(
            {
                "microbatches": microbatches,
                "step_time_s": slots * microbatch_stage_time_s,
                "bubble_fraction": Fraction(stages - 1, slots),
            }
        )
    return {"rows": rows}


def pipeline_bubble_float(stages, microbatch_counts, microbatch_stage_time_s, mistake=None):
    known_mistake(mistake, "bubble_over_microbatches")
    rows = []
    for m in microbatch_counts:
        idle = stages - 1.0
        bubble = idle / m if mistake == "bubble_over_microbatches" else 1.0 - m / (m + idle)
        step = microbatch_stage_time_s * m + microbatch_stage_time_s * idle
        rows.append({"microbatches": m, "step_time_s": step, "bubble_fraction": bubble})
    return {"rows": rows}


def sample_pipeline_bubble(draw: Draw, level: int) -> dict:
    return {
        "stages": draw.integer(2, 8 * level),
        "microbatch_counts": sorted_sample(draw, 1, 64 * 2**level, rows(level, 4)),
        "microbatch_stage_time_s": _stage_time(draw, level),
    }


_BUBBLE_ROW = (
    '{"rows": [{"microbatches": <int>, "step_time_s": <number>, "bubble_fraction": <number>}, '
    "...]}  # one row per entry of `microbatch_counts`, in order"
)


LEVEL_1 = scaling_level(
    "sharding",
    pipeline_bubble,
    """\
A GPipe-style pipeline has `stages` stages. One microbatch occupies one stage for
`microbatch_stage_time_s` seconds (forward and backward together), and a step of M microbatches
takes M + stages - 1 such time slots; the bubble fraction is the share of a stage's slots spent
idle, (stages - 1) / (M + stages - 1). For each M in `microbatch_counts`, give the step time in
seconds and the bubble fraction.""",
    _BUBBLE_ROW,
    pipeline_bubble_float,
    "bubble_over_microbatches",
    sample=sample_pipeline_bubble,
    tags=("headline:pipeline_bubble",),
)


BUBBLE_L2 = (
    SCHEDULE
    + """
One slot lasts `microbatch_stage_time_s` seconds. The bubble fraction is the
share of the step during which a stage is idle (the same for every stage). For each M in
`microbatch_counts`, give the step time in seconds and the bubble fraction."""
)


LEVEL_2 = scaling_level(
    "sharding",
    pipeline_bubble,
    BUBBLE_L2,
    _BUBBLE_ROW,
    pipeline_bubble_float,
    "bubble_over_microbatches",
    sample=sample_pipeline_bubble,
)


def pipeline_throughput(
    stages, layers, params_per_layer, global_batch_tokens, microbatch_counts, peak_flops, mfu
):
    """Slots of (layers/stages) layers' training FLOPs on global/M tokens; M + P - 1 slots."""
    from fractions import Fraction

    rows = []
    for microbatches in microbatch_counts:
        tokens = Fraction(global_batch_tokens, microbatches)
        slot_s = Fraction(layers, stages) * 6 * params_per_layer * tokens / (peak_flops * mfu)
        step_s = (microbatches + stages - 1) * slot_s
        rows.append(
            {
                "microbatches": microbatches,
                "step_time_s": step_s,
                "tokens_per_s": global_batch_tokens / step_s,
            }
        )
    return {"rows": rows}


def pipeline_throughput_float(
    stages, layers, params_per_layer, global_batch_tokens, microbatch_counts, peak_flops, mfu, mistake=None
):
    known_mistake(mistake, "no_bubble")
    rows = []
    for m in microbatch_counts:
        ideal = 6.0 * params_per_layer * layers * global_batch_tokens / (mfu * peak_flops * stages)
        slots = m if mistake == "no_bubble" else m + stages - 1
        step = ideal * (slots / m)
        rows.append({"microbatches": m, "step_time_s": step, "tokens_per_s": global_batch_tokens / step})
    return {"rows": rows}


def sample_throughput(draw: Draw, level: int) -> dict:
    batch = 2 ** draw.integer(4, 8) * draw.choice((1, 3, 5))
    counts = sorted(draw.sample(divisors_of(batch), min(len(divisors_of(batch)), 2 + level)))
    stages = draw.integer(2, 8 * level)
    return {
        "stages": stages,
        "layers": stages * draw.integer(1, 8),
        "params_per_layer": 10**6 * draw.integer(10, 2000),
        "global_batch_tokens": batch * 1024,
        "microbatch_counts": counts,
        "peak_flops": 10**12 * draw.integer(100, 2000),
        "mfu": Fraction(draw.integer(20, 60), 100),
    }


_THROUGHPUT = (
    SCHEDULE
    + """
The model has `layers` layers of `params_per_layer` parameters each, split
evenly: each stage holds layers / stages consecutive layers. A step trains on
`global_batch_tokens` tokens, split into M equal microbatches; training costs 6 FLOPs per
parameter per token (forward and backward), and a stage's slot for one microbatch lasts its
FLOPs / (peak_flops * mfu) seconds, with `peak_flops` FLOP/s per device and utilization `mfu`.
For each M in `microbatch_counts`, give the step time in seconds and the training throughput in
tokens per second."""
)


LEVEL_3 = scaling_level(
    "sharding",
    pipeline_throughput,
    _THROUGHPUT,
    '{"rows": [{"microbatches": <int>, "step_time_s": <number>, "tokens_per_s": <number>}, ...]}'
    "  # one row per entry of `microbatch_counts`, in order",
    pipeline_throughput_float,
    "no_bubble",
    sample=sample_throughput,
)


def best_microbatch_count(stages, global_batch, stage_work_s, slot_overhead_s):
    """The divisor M of the batch minimising (M + P - 1) * (overhead + work / M); ties: smaller M."""
    best = None
    for microbatches in range(1, global_batch + 1):
        if global_batch % microbatches:
            continue
        step_s = (microbatches + stages - 1) * (slot_overhead_s + stage_work_s / microbatches)
        if best is None or step_s < best[1]:
            best = (microbatches, step_s)
    return {"rows": [{"microbatches": best[0], "step_time_s": best[1]}]}


def _argmin(candidates):
    """(key, value) with the smallest value; values within 1e-12 of it count as equal, and the
    first such candidate in the given order wins (the stated tie rule)."""
    low = min(value for _, value in candidates)
    return next((key, value) for key, value in candidates if value <= low * (1 + 1e-12))


def best_microbatch_count_float(stages, global_batch, stage_work_s, slot_overhead_s, mistake=None):
    known_mistake(mistake, "no_bubble")
    idle = 0 if mistake == "no_bubble" else stages - 1
    divisors = [m for m in range(1, global_batch + 1) if global_batch % m == 0]
    m, step = _argmin([(m, slot_overhead_s * (m + idle) + stage_work_s * (1 + idle / m)) for m in divisors])
    return {"rows": [{"microbatches": m, "step_time_s": step}]}


def sample_best_microbatches(draw: Draw, level: int) -> dict:
    """A third of the instances put an exact tie between two divisors (work set so their product
    is (P - 1) * work / overhead): the tie rule decides them."""
    batch = 2 ** draw.integer(3, 7) * draw.choice((1, 3, 5, 9))
    stages = draw.integer(2, 16)
    overhead = Fraction(draw.integer(1, 50), 1000)
    divisors = divisors_of(batch)
    if draw.chance(1, 3):
        i = draw.integer(0, len(divisors) - 2)
        work = overhead * divisors[i] * divisors[i + 1] / (stages - 1)
    else:
        work = Fraction(draw.integer(1, 5000), 100)
    return {"stages": stages, "global_batch": batch, "stage_work_s": work, "slot_overhead_s": overhead}


def _step(stages: int, m: int, work: Fraction, overhead: Fraction) -> Fraction:
    return (m + stages - 1) * (overhead + work / m)


def _steps(task: Task) -> list[Fraction]:
    i = task.inputs
    return sorted(
        _step(i["stages"], m, i["stage_work_s"], i["slot_overhead_s"]) for m in divisors_of(i["global_batch"])
    )


def _best_not_near_tied(task: Task) -> str | None:
    steps = _steps(task)
    if len(steps) < 2:
        return "a single microbatch count"
    if steps[0] != steps[1]:
        return tie_edge("the two fastest microbatch counts", steps[0], steps[1])
    return None


_BEST = (
    SCHEDULE
    + """
A step trains on `global_batch` sequences split into M equal microbatches (M must
divide `global_batch`). A stage needs `stage_work_s` seconds of compute for the whole batch, so
a microbatch's slot lasts `slot_overhead_s` (a fixed cost per microbatch per stage) plus
stage_work_s / M seconds. Find the M that makes the step shortest (if two are equally fast, the
smaller M) and give it with its step time in seconds."""
)


LEVEL_4 = scaling_level(
    "sharding",
    best_microbatch_count,
    _BEST,
    '{"rows": [{"microbatches": <int>, "step_time_s": <number>}]}',
    best_microbatch_count_float,
    "no_bubble",
    sample=sample_best_microbatches,
    reject=_best_not_near_tied,
)


def pipeline_design(
    layers,
    global_batch,
    layer_work_s,
    slot_overhead_s,
    weight_bytes_per_layer,
    act_bytes_per_seq_layer,
    hbm_bytes,
):
    """Stages P (dividing layers) and microbatches M (dividing the batch) of the fastest step whose
    stage memory fits: weights of L/P layers plus min(M, P) microbatches of activations."""
    from fractions import Fraction

    best = None
    for stages in range(1, layers + 1):
        if layers % stages:
            continue
        per_stage = Fraction(layers, stages)
        for microbatches in range(1, global_batch + 1):
            if global_batch % microbatches:
                continue
            in_flight = min(microbatches, stages) * Fraction(global_batch, microbatches)
            memory = per_stage * (weight_bytes_per_layer + in_flight * act_bytes_per_seq_layer)
            if memory > hbm_bytes:
                continue
            step_s = (microbatches + stages - 1) * (slot_overhead_s + per_stage * layer_work_s / microbatches)
            if best is None or step_s < best[2]:
                best = (stages, microbatches, step_s)
    if best is None:
        return {"rows": [{"stages": None, "microbatches": None, "step_time_s": None}]}
    return {"rows": [{"stages": best[0], "microbatches": best[1], "step_time_s": best[2]}]}


def pipeline_design_float(
    layers,
    global_batch,
    layer_work_s,
    slot_overhead_s,
    weight_bytes_per_layer,
    act_bytes_per_seq_layer,
    hbm_bytes,
    mistake=None,
):
    known_mistake(mistake, "weights_only_memory")
    activations = 0 if mistake == "weights_only_memory" else act_bytes_per_seq_layer
    found = []
    for p in (p for p in range(1, layers + 1) if layers % p == 0):
        for m in (m for m in range(1, global_batch + 1) if global_batch % m == 0):
            held = global_batch / m * min(m, p)
            if layers / p * (activations * held + weight_bytes_per_layer) > hbm_bytes:
                continue
            idle = p - 1
            found.append(((p, m), slot_overhead_s * (m + idle) + layers * layer_work_s / p * (1 + idle / m)))
    if not found:
        return {"rows": [{"stages": None, "microbatches": None, "step_time_s": None}]}
    (p, m), step = _argmin(found)
    return {"rows": [{"stages": p, "microbatches": m, "step_time_s": step}]}


def sample_design(draw: Draw, level: int) -> dict:
    """About one instance in ten fits no layout (the None branch: a whole answer of None, so it is
    kept rare); in the rest the memory limit lies below the stage memory of the fastest layout, so the
    limit decides the answer (above it, ignoring the activations gives the key), and at or above
    the smallest stage memory of the candidates."""
    layers = draw.choice((12, 16, 24, 32, 40, 48))
    batch = 2 ** draw.integer(2, 5) * draw.choice((1, 3))
    inputs = {
        "layers": layers,
        "global_batch": batch,
        "layer_work_s": Fraction(draw.integer(1, 2000), 1000),
        "weight_bytes_per_layer": 10**6 * draw.integer(100, 4000),
        "act_bytes_per_seq_layer": 10**6 * draw.integer(10, 2000),
    }
    # The overhead of a slot against a layer's work per sequence: large enough that the fastest
    # layout is not simply the most stages and microbatches (which also hold the least memory).
    inputs["slot_overhead_s"] = inputs["layer_work_s"] / batch * Fraction(draw.integer(20, 800), 100)
    layouts = sorted(_layouts(inputs))  # the first is the fastest by the tie rule
    low, fastest = min(layout[3] for layout in layouts), layouts[0][3]
    weights = min(Fraction(layers, p) * inputs["weight_bytes_per_layer"] for p in divisors_of(layers))
    if fastest == low:  # refused on both branches, so the None branch keeps its share of 1 in 10
        raise Reject("the fastest layout also holds the least memory: the limit cannot bind")
    # the weights alone would fit, only the activations rule every layout out; drawn one time in
    # five, as a real HBM between the weights and the least memory is rarer than above it
    if draw.chance(1, 5):
        inputs["hbm_bytes"] = capacity_between(draw, weights, low)
    else:
        inputs["hbm_bytes"] = capacity_between(draw, low, fastest)
    return inputs


def _layouts(i: dict) -> list[tuple[Fraction, int, int, Fraction]]:
    """(step time, stages, microbatches, first-stage memory) of every candidate layout."""
    layouts = []
    for p in divisors_of(i["layers"]):
        for m in divisors_of(i["global_batch"]):
            held = min(m, p) * Fraction(i["global_batch"], m)
            per_layer = i["weight_bytes_per_layer"] + held * i["act_bytes_per_seq_layer"]
            memory = Fraction(i["layers"], p) * per_layer
            work = Fraction(i["layers"], p) * i["layer_work_s"]
            layouts.append((_step(p, m, work, i["slot_overhead_s"]), p, m, memory))
    return layouts


def _design_rules(task: Task) -> str | None:
    i = task.inputs
    layouts = []
    for step, p, m, memory in _layouts(i):
        if near_tie(memory, i["hbm_bytes"]):
            return f"stages {p}, microbatches {m}: the stage memory sits on the HBM limit"
        if memory <= i["hbm_bytes"]:
            layouts.append(step)
    layouts.sort()
    if len(layouts) >= 2 and layouts[0] != layouts[1]:
        return tie_edge("the two fastest layouts", layouts[0], layouts[1])
    if task.expected["rows"][0]["stages"] == 1:
        return "the fastest layout is no pipeline at all"
    return None


_DESIGN = (
    SCHEDULE_P
    + """
You choose the number of stages P and of microbatches M. The model has `layers`
identical layers, split evenly (P must divide `layers`); a step trains on `global_batch`
sequences split into M equal microbatches (M must divide `global_batch`). One layer needs
`layer_work_s` seconds of compute for the whole batch, so a slot lasts `slot_overhead_s` (fixed,
per microbatch per stage) plus (layers / P) * layer_work_s / M seconds. Memory per device: the
weights of its layers (`weight_bytes_per_layer` each) plus the activations it holds, which are
`act_bytes_per_seq_layer` bytes per sequence per layer for every microbatch in
flight."""
    + ONE_F_ONE_B
    + """\
A layout is allowed only when the first stage's peak memory (its weights plus min(M, P)
microbatches of activations for its layers) is at most `hbm_bytes`. Give the allowed (P, M) with
the shortest step and that step time in seconds; on a tie the fewer stages, then the fewer
microbatches. If no layout is allowed, give None for all three."""
)


LEVEL_5 = scaling_level(
    "sharding",
    pipeline_design,
    _DESIGN,
    '{"rows": [{"stages": <int> | None, "microbatches": <int> | None, "step_time_s": <number> | None}]}',
    pipeline_design_float,
    "weights_only_memory",
    sample=sample_design,
    reject=_design_rules,
)


def _tied(task: Task) -> bool:
    steps = _steps(task)
    return len(steps) > 1 and steps[0] == steps[1]


def _no_layout(task: Task) -> bool:
    return task.expected["rows"][0]["stages"] is None


BUBBLE_BRANCHES = (
    Branch("tie", _tied, Fraction(1, 5), (4,)),
    Branch("none", _no_layout, Fraction(1, 25), (5,)),
)


PIPELINE_BUBBLE = five_levels(
    "pipeline_bubble",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L2: the schedule described, the bubble derived; L3: the slot time derived from the layers, "
    "FLOPs and chips, the throughput per microbatch count; L4: the microbatch count (a divisor "
    "of the batch) that minimises the step when each slot has a fixed overhead, ties to the "
    "smaller; L5: stages and microbatches chosen together under a per-device memory limit "
    "(1F1B in-flight activations), or None",
    branches=BUBBLE_BRANCHES,
)
