"""Levels 2-5 of the pipeline families (pipeline_bubble, min_microbatches, pipeline_step_time).

Level 2 describes the schedule and leaves the bubble to be derived; level 3 derives the slot
time from the model and the chips; level 4 searches the microbatch count that minimises the
step once each slot carries a fixed overhead; level 5 chooses stages and microbatches together
under a memory limit. References are self-contained; the ``*_float`` twins search in floats in
another order and can reproduce one named mistake (tests only).
"""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling._sample import capacity_between
from exactgrade.domains.scaling._task import Level, known_mistake, near_tie, tie_edge
from exactgrade.family import Branch, Draw, Reject
from exactgrade.task import Task

SCHEDULE = """\
A pipeline splits a model into `stages` stages, each on its own device, and a training step runs
M microbatches through them as GPipe does: a microbatch's forward pass goes through stages 1, 2,
... in order, and its backward pass goes back through them in reverse order, from the last stage
to stage 1. A stage works on one microbatch at a time: it starts a microbatch's forward once the
previous stage has finished that forward, and its backward once the next stage has finished that
backward. Stage 1 starts the forwards back to back; the last stage runs every forward, then the
backwards back to back. One slot is the time a stage takes for one microbatch's forward and
backward together; a forward takes the same share of a slot on every stage, and so does a
backward. The step ends when stage 1 finishes the last backward."""

ONE_F_ONE_B = """
The stages run the 1F1B schedule instead of GPipe's order: stage s runs the forwards of its first
min(M, P - s) microbatches, then alternates one forward and one backward, then runs the backwards
left, each forward and backward still waiting for its input as above. This takes exactly as long
as GPipe's order but holds fewer microbatches in flight (a microbatch is in flight on a stage from
the start of its forward there to the end of its backward there): stage s holds at most
min(M, P - s + 1), so the first stage, which holds the most, has min(M, P) microbatches in flight
at its peak.
"""
"""1F1B (PipeDream-Flush, Megatron-LM): the same step time as GPipe, fewer activations held; for
the tasks whose memory limit counts the microbatches in flight."""

SCHEDULE_P = SCHEDULE.replace("into `stages` stages", "into P stages")
"""The schedule for a task whose stage count is not the input `stages` (a list of counts, or
chosen by the model)."""

# ---------------------------------------------------------------- reference solutions


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


def min_microbatches_dividing(stage_counts, max_bubble_fraction, global_batch):
    """Smallest divisor M of the batch whose bubble (P - 1) / (M + P - 1) is at most the limit."""
    from fractions import Fraction

    rows = []
    for stages in stage_counts:
        found = None
        for microbatches in range(1, global_batch + 1):
            bubble = Fraction(stages - 1, microbatches + stages - 1)
            if global_batch % microbatches == 0 and bubble <= max_bubble_fraction:
                found = microbatches
                break
        rows.append(
            {
                "stages": stages,
                "min_microbatches": found,
                "sequences_per_microbatch": None if found is None else global_batch // found,
            }
        )
    return {"rows": rows}


def step_time_closed_form(stages, slot_overhead_s, m, W):
    """The step time in m and W, the real m that minimises it and the minimal step (closed forms)."""
    import sympy

    p, o = sympy.Integer(stages), sympy.Rational(slot_overhead_s.numerator, slot_overhead_s.denominator)
    step = (m + p - 1) * (o + W / m)
    best = sympy.sqrt((p - 1) * W / o)  # d/dm: o - (p - 1) * W / m**2 = 0
    return {
        "rows": [
            {
                "step_time_s": step,
                "best_microbatches": best,
                "best_step_time_s": sympy.expand(step.subs(m, best)),
            }
        ]
    }


# ---------------------------------------------------------------- float twins (tests only)


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


def min_microbatches_dividing_float(stage_counts, max_bubble_fraction, global_batch, mistake=None):
    known_mistake(mistake, "bubble_over_microbatches")
    rows = []
    for p in stage_counts:
        # The bound M >= (P - 1)(1 - f) / f, then the first divisor at or above it.
        if mistake == "bubble_over_microbatches":
            bound = (p - 1) / max_bubble_fraction
        else:
            bound = (p - 1) * (1 - max_bubble_fraction) / max_bubble_fraction
        first = max(1, math.ceil(bound - 1e-9))
        m = next((d for d in range(first, global_batch + 1) if global_batch % d == 0), None)
        rows.append(
            {
                "stages": p,
                "min_microbatches": m,
                "sequences_per_microbatch": None if m is None else global_batch // m,
            }
        )
    return {"rows": rows}


def step_time_closed_form_twin(stages, slot_overhead_s, m, W, mistake=None):
    """A second derivation (expanded step, AM-GM optimum) on the exact inputs: not floats, which
    would make a closed form inexact."""
    import sympy

    known_mistake(mistake, "stages_not_minus_one")
    idle = stages if mistake == "stages_not_minus_one" else stages - 1
    o = sympy.Rational(slot_overhead_s.numerator, slot_overhead_s.denominator)
    step = m * o + W + idle * o + idle * W / m
    # m*o + idle*W/m >= 2*sqrt(idle*o*W), equal at m = sqrt(idle*W/o)
    return {
        "rows": [
            {
                "step_time_s": step,
                "best_microbatches": sympy.sqrt(idle * W) / sympy.sqrt(o),
                "best_step_time_s": W + idle * o + 2 * sympy.sqrt(idle * o * W),
            }
        ]
    }


# ---------------------------------------------------------------- samplers and rules


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _time(draw: Draw, level: int, denominators: tuple[int, ...]) -> Fraction:
    denominator = draw.choice(denominators)
    return Fraction(draw.integer(1, denominator), denominator)


def sample_throughput(draw: Draw, level: int) -> dict:
    batch = 2 ** draw.integer(4, 8) * draw.choice((1, 3, 5))
    counts = sorted(draw.sample(_divisors(batch), min(len(_divisors(batch)), 2 + level)))
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


def sample_best_microbatches(draw: Draw, level: int) -> dict:
    """A third of the instances put an exact tie between two divisors (work set so their product
    is (P - 1) * work / overhead): the tie rule decides them."""
    batch = 2 ** draw.integer(3, 7) * draw.choice((1, 3, 5, 9))
    stages = draw.integer(2, 16)
    overhead = Fraction(draw.integer(1, 50), 1000)
    divisors = _divisors(batch)
    if draw.chance(1, 3):
        i = draw.integer(0, len(divisors) - 2)
        work = overhead * divisors[i] * divisors[i + 1] / (stages - 1)
    else:
        work = Fraction(draw.integer(1, 5000), 100)
    return {"stages": stages, "global_batch": batch, "stage_work_s": work, "slot_overhead_s": overhead}


_COMPOSITE = (12, 24, 36, 48, 60, 72, 96, 120, 144, 180, 240, 360, 480, 720, 1440)


def with_global_batch(sample):
    """A min_microbatches sample plus a batch size with many divisors; half the instances take
    one below the largest stage count's bound (some stage count then has no divisor: None)."""

    def sample_level(draw: Draw, level: int) -> dict:
        inputs = dict(sample(draw, level))
        f = inputs["max_bubble_fraction"]
        bounds = [(p - 1) * (1 - f) / f for p in inputs["stage_counts"]]
        short = draw.chance(1, 2)
        pool = (
            [g for g in _COMPOSITE if (bounds[0] < g < bounds[-1]) if short]
            if short
            else [g for g in _COMPOSITE if g > bounds[-1]]
        )
        if not pool:
            raise Reject("no batch size on the chosen side of the bounds")
        inputs["global_batch"] = draw.choice(pool)
        return inputs

    return sample_level


def _no_divisor(task: Task) -> bool:
    return any(row["min_microbatches"] is None for row in task.expected["rows"])


def sample_closed_form(draw: Draw, level: int) -> dict:
    import sympy

    m, work = sympy.symbols("m W", positive=True)
    return {
        "stages": draw.integer(2, 64),
        "slot_overhead_s": Fraction(draw.integer(1, 999), draw.choice((1000, 997, 720))),
        "m": m,
        "W": work,
    }


def _step(stages: int, m: int, work: Fraction, overhead: Fraction) -> Fraction:
    return (m + stages - 1) * (overhead + work / m)


def _steps(task: Task) -> list[Fraction]:
    i = task.inputs
    return sorted(
        _step(i["stages"], m, i["stage_work_s"], i["slot_overhead_s"]) for m in _divisors(i["global_batch"])
    )


def _best_not_near_tied(task: Task) -> str | None:
    steps = _steps(task)
    if len(steps) < 2:
        return "a single microbatch count"
    if steps[0] != steps[1]:
        return tie_edge("the two fastest microbatch counts", steps[0], steps[1])
    return None


def _tied(task: Task) -> bool:
    steps = _steps(task)
    return len(steps) > 1 and steps[0] == steps[1]


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
    weights = min(Fraction(layers, p) * inputs["weight_bytes_per_layer"] for p in _divisors(layers))
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
    for p in _divisors(i["layers"]):
        for m in _divisors(i["global_batch"]):
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


def _no_layout(task: Task) -> bool:
    return task.expected["rows"][0]["stages"] is None


# ---------------------------------------------------------------- levels

BUBBLE_L2 = (
    SCHEDULE
    + """
One slot lasts `microbatch_stage_time_s` seconds. The bubble fraction is the
share of the step during which a stage is idle (the same for every stage). For each M in
`microbatch_counts`, give the step time in seconds and the bubble fraction."""
)

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

MIN_M_L2 = (
    SCHEDULE_P
    + """
The bubble fraction is the share of the step during which a stage is idle (the same for every
stage). For each stage count in `stage_counts`, give the smallest integer M >= 1 for which the
bubble fraction is at most `max_bubble_fraction`."""
)

MIN_M_L4 = (
    SCHEDULE_P
    + """
The bubble fraction is the share of the step during which a stage is idle (the same for every
stage). A step trains on `global_batch` sequences split into M equal microbatches, so M must
divide `global_batch`. For each stage count in `stage_counts`, give the smallest such M for which
the bubble fraction is at most `max_bubble_fraction` and the sequences per microbatch it gives;
None for both if no divisor of `global_batch` is enough."""
)

STEP_L2 = (
    SCHEDULE_P
    + """
One slot lasts `microbatch_stage_time_s` seconds. The bubble fraction is the share of the step
during which a stage is idle (the same for every stage). For each stage count in `stage_counts`,
give the smallest integer M >= 1 for which the bubble fraction is at most `max_bubble_fraction`,
and the step time in seconds with that many microbatches."""
)

_BEST = (
    SCHEDULE
    + """
A step trains on `global_batch` sequences split into M equal microbatches (M must
divide `global_batch`). A stage needs `stage_work_s` seconds of compute for the whole batch, so
a microbatch's slot lasts `slot_overhead_s` (a fixed cost per microbatch per stage) plus
stage_work_s / M seconds. Find the M that makes the step shortest (if two are equally fast, the
smaller M) and give it with its step time in seconds."""
)

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
flight.""" + ONE_F_ONE_B + """\
A layout is allowed only when the first stage's peak memory (its weights plus min(M, P)
microbatches of activations for its layers) is at most `hbm_bytes`. Give the allowed (P, M) with
the shortest step and that step time in seconds; on a tie the fewer stages, then the fewer
microbatches. If no layout is allowed, give None for all three."""
)

BUBBLE_LEVELS = {
    3: Level(
        pipeline_throughput,
        _THROUGHPUT,
        '{"rows": [{"microbatches": <int>, "step_time_s": <number>, "tokens_per_s": <number>}, ...]}'
        "  # one row per entry of `microbatch_counts`, in order",
        pipeline_throughput_float,
        "no_bubble",
        sample=sample_throughput,
    ),
    4: Level(
        best_microbatch_count,
        _BEST,
        '{"rows": [{"microbatches": <int>, "step_time_s": <number>}]}',
        best_microbatch_count_float,
        "no_bubble",
        sample=sample_best_microbatches,
        reject=_best_not_near_tied,
    ),
    5: Level(
        pipeline_design,
        _DESIGN,
        '{"rows": [{"stages": <int> | None, "microbatches": <int> | None, "step_time_s": <number> | None}]}',
        pipeline_design_float,
        "weights_only_memory",
        sample=sample_design,
        reject=_design_rules,
    ),
}
BUBBLE_BRANCHES = (
    Branch("tie", _tied, Fraction(1, 5), (4,)),
    Branch("none", _no_layout, Fraction(1, 25), (5,)),
)

MIN_M_L5 = (
    SCHEDULE
    + """
A step trains on a batch split into m equal microbatches; a stage
needs W seconds of compute for the whole batch, so a microbatch's slot lasts `slot_overhead_s` (a
fixed cost per microbatch per stage) plus W / m seconds. The symbols m and W are preloaded as
sympy Symbols (positive; sympy.symbols('m W', positive=True) makes the same ones). Give, as exact
sympy expressions: the step time in seconds as a function of m and W; treating m as a positive
real number, the m that minimises the step time, as a function of W; and that minimal step time,
as a function of W."""
)

MIN_M_L5_LEVEL = Level(
    step_time_closed_form,
    MIN_M_L5,
    '{"rows": [{"step_time_s": <expression>, "best_microbatches": <expression>, '
    '"best_step_time_s": <expression>}]}',
    step_time_closed_form_twin,
    "stages_not_minus_one",
    sample=sample_closed_form,
    symbolic=True,
)

MIN_M_L4_SHAPE = (
    '{"rows": [{"stages": <int>, "min_microbatches": <int> | None, '
    '"sequences_per_microbatch": <int> | None}, ...]}'
    "  # one row per entry of `stage_counts`, in order"
)
MIN_M_BRANCHES = (Branch("none", _no_divisor, Fraction(1, 4), (4,)),)

__all__ = [
    "BUBBLE_BRANCHES",
    "BUBBLE_L2",
    "BUBBLE_LEVELS",
    "MIN_M_BRANCHES",
    "MIN_M_L2",
    "MIN_M_L4",
    "MIN_M_L4_SHAPE",
    "MIN_M_L5_LEVEL",
    "ONE_F_ONE_B",
    "SCHEDULE",
    "SCHEDULE_P",
    "STEP_L2",
    "min_microbatches_dividing",
    "min_microbatches_dividing_float",
    "with_global_batch",
]
