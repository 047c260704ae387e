"""The min_microbatches family of sharding: everything it needs, its five levels in level order."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling._sample import capacity_between, divisors_of, overlaps_capacities, rows
from exactgrade.domains.scaling._task import known_mistake, near_integer, scaling_level
from exactgrade.domains.scaling.sharding.shared import (
    SCHEDULE,
    SCHEDULE_P,
    _fewest,
    _limit,
    _min_microbatches_edges,
    min_microbatches_float,
    sample_min_microbatches,
)
from exactgrade.family import Branch, Draw, Reject, five_levels
from exactgrade.task import Task


def min_microbatches(stage_counts, max_bubble_fraction):
    """Smallest M with (P - 1) / (M + P - 1) <= f, i.e. M >= (P - 1)(1 - f) / f."""
    import math

    rows = []
    for stages in stage_counts:
        bound = (stages - 1) * (1 - max_bubble_fraction) / max_bubble_fraction
        rows.append({"stages": stages, "min_microbatches": max(1, math.ceil(bound))})
    return {"rows": rows}


_MIN_M_ROW = (
    '{"rows": [{"stages": <int>, "min_microbatches": <int>}, ...]}'
    "  # one row per entry of `stage_counts`, in order"
)


LEVEL_1 = scaling_level(
    "sharding",
    min_microbatches,
    """\
In a GPipe-style pipeline of P stages running M microbatches per step, the bubble fraction (idle
share of each stage) is (P - 1) / (M + P - 1). For each stage count P in `stage_counts`, give the
smallest integer M >= 1 for which the bubble fraction is at most `max_bubble_fraction`.""",
    _MIN_M_ROW,
    min_microbatches_float,
    "bubble_over_microbatches",
    sample=sample_min_microbatches,
    reject=_min_microbatches_edges,
)


MIN_M_L2 = (
    SCHEDULE_P
    + """
The bubble fraction is the share of the step during which a stage is idle (the same for every
stage). For each stage count in `stage_counts`, give the smallest integer M >= 1 for which the
bubble fraction is at most `max_bubble_fraction`."""
)


LEVEL_2 = scaling_level(
    "sharding",
    min_microbatches,
    MIN_M_L2,
    _MIN_M_ROW,
    min_microbatches_float,
    "bubble_over_microbatches",
    reject=_min_microbatches_edges,
    sample=sample_min_microbatches,
)


def memory_limited_microbatches(layers, bytes_per_layer, device_memories, max_bubble_fraction):
    """Per device memory: the fewest stages P (a divisor of the layers) whose layers fit, then
    the fewest microbatches whose bubble is at most the limit with P stages."""
    import math

    rows = []
    for memory in device_memories:
        fitting = (p for p in range(1, layers + 1) if layers % p == 0)
        stages = next(p for p in fitting if layers // p * bytes_per_layer <= memory)
        f = max_bubble_fraction
        rows.append({"hbm_bytes": memory, "min_microbatches": max(1, math.ceil((stages - 1) * (1 - f) / f))})
    return {"rows": rows}


def memory_limited_microbatches_float(
    layers, bytes_per_layer, device_memories, max_bubble_fraction, mistake=None
):
    known_mistake(mistake, "bubble_over_microbatches")
    out = []
    for memory in device_memories:
        p = min(p for p in range(1, layers + 1) if layers % p == 0 and layers / p * bytes_per_layer <= memory)
        out.append({"hbm_bytes": memory, "min_microbatches": _fewest(p, max_bubble_fraction, mistake)})
    return {"rows": out}


def sample_memory_limited(draw: Draw, level: int) -> dict:
    """One memory per row, each between the stage sizes of two neighbouring divisors (at least
    two stages), so the stage count, and with it the microbatch count, moves across rows."""
    layers = draw.choice((12, 16, 24, 32, 36, 40, 48, 60, 64, 72, 80, 96))
    per_layer = 10**6 * draw.integer(200, 20_000) - draw.integer(0, 999_999)
    divisors = divisors_of(layers)
    f = _limit(draw, level)
    memories = set()
    sizes = [layers // d * per_layer for d in divisors]
    # divisors[k] stages are the fewest that fit, for a k whose sizes leave a real HBM between them
    real = [k for k in range(1, len(divisors)) if overlaps_capacities(sizes[k], sizes[k - 1])]
    if not real:
        raise Reject("no two neighbouring stage sizes have a real HBM between them")
    for _ in range(rows(level, 2)):
        k = draw.choice(real)
        memories.add(capacity_between(draw, sizes[k], sizes[k - 1]))
    if len(memories) < 2 or any(near_integer((p - 1) * (1 - f) / f) for p in divisors[1:]):
        raise Reject("too few memories, or a stage count whose microbatch bound is a whole number")
    return {
        "layers": layers,
        "bytes_per_layer": per_layer,
        "device_memories": draw.shuffled(sorted(memories)),
        "max_bubble_fraction": f,
    }


def _memory_limited_edges(task: Task) -> str | None:
    if len({row["min_microbatches"] for row in task.expected["rows"]}) < 2:
        return "the same microbatch count for every memory"
    return None


LEVEL_3 = scaling_level(
    "sharding",
    memory_limited_microbatches,
    SCHEDULE_P
    + """
The model has `layers` layers of `bytes_per_layer` bytes each (weights and training state),
split evenly over P stages (P must divide `layers`); each stage's device must hold its layers. The
bubble fraction is the share of the step during which a stage is idle (the same for every
stage). For each device memory in `device_memories` (bytes per device), take the fewest stages
whose layers fit, and give the smallest integer M >= 1 whose bubble fraction is at most
`max_bubble_fraction` with that many stages.""",
    '{"rows": [{"hbm_bytes": <int>, "min_microbatches": <int>}, ...]}'
    "  # one row per entry of `device_memories`, in order",
    memory_limited_microbatches_float,
    "bubble_over_microbatches",
    sample=sample_memory_limited,
    reject=_memory_limited_edges,
)


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


MIN_M_L4 = (
    SCHEDULE_P
    + """
The bubble fraction is the share of the step during which a stage is idle (the same for every
stage). A step trains on `global_batch` sequences split into M equal microbatches, so M must
divide `global_batch`. For each stage count in `stage_counts`, give the smallest such M for which
the bubble fraction is at most `max_bubble_fraction` and the sequences per microbatch it gives;
None for both if no divisor of `global_batch` is enough."""
)


MIN_M_L4_SHAPE = (
    '{"rows": [{"stages": <int>, "min_microbatches": <int> | None, '
    '"sequences_per_microbatch": <int> | None}, ...]}'
    "  # one row per entry of `stage_counts`, in order"
)


LEVEL_4 = scaling_level(
    "sharding",
    min_microbatches_dividing,
    MIN_M_L4,
    MIN_M_L4_SHAPE,
    min_microbatches_dividing_float,
    "bubble_over_microbatches",
    sample=with_global_batch(sample_min_microbatches),
    reject=_min_microbatches_edges,
)


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


def sample_closed_form(draw: Draw, level: int) -> dict:
    import sympy

    m, work = sympy.symbols("m W", positive=True)
    return {
        "stages": draw.integer(2, 64),
        "slot_overhead_s": Fraction(draw.integer(1, 999), draw.choice((1000, 997, 720))),
        "m": m,
        "W": work,
    }


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


LEVEL_5 = scaling_level(
    "sharding",
    step_time_closed_form,
    MIN_M_L5,
    '{"rows": [{"step_time_s": <expression>, "best_microbatches": <expression>, '
    '"best_step_time_s": <expression>}]}',
    step_time_closed_form_twin,
    "stages_not_minus_one",
    sample=sample_closed_form,
    symbolic=True,
)


def _no_divisor(task: Task) -> bool:
    return any(row["min_microbatches"] is None for row in task.expected["rows"])


MIN_M_BRANCHES = (Branch("none", _no_divisor, Fraction(1, 4), (4,)),)


MIN_MICROBATCHES = five_levels(
    "min_microbatches",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L2: the schedule described, the bubble and the bound derived; L3: the stage count "
    "derived from the device memory first (the fewest stages whose layers fit), then the "
    "bound; L4: M must also divide the batch, None when no divisor is enough; L5: closed "
    "forms in symbols m and W: the step time with a per-slot overhead, the real m that "
    "minimises it and the minimal step",
    branches=MIN_M_BRANCHES,
)
