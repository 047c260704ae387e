"""The warmup_cosine family of optimisation: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade.domains.deeplearning.common import POLICY, prompt
from exactgrade.domains.deeplearning.optimisation.shared import API, a_row_is, opt_family, warmup_cosine_rows
from exactgrade.family import Branch, Draw
from exactgrade.task import TaskDef


def _schedule_prompt(inputs):
    return prompt(
        "A learning-rate schedule warms up linearly from 0 to peak_lr over warmup_steps steps, then decays "
        "with a half cosine from peak_lr to min_lr over decay_steps steps, then stays at min_lr (exact "
        "formula in the conventions). Give the learning rate at each step listed in `steps`, exactly.",
        {"peak_lr": ("peak learning rate", inputs["peak_lr"]),
         "min_lr": ("final learning rate", inputs["min_lr"]),
         "warmup_steps": ("warmup length in steps", inputs["warmup_steps"]),
         "decay_steps": ("cosine decay length in steps", inputs["decay_steps"]),
         "steps": ("the steps to report", inputs["steps"])},
        '{"rows": [{"step": int, "lr": exact value}, ...]}  (one row per listed step, in that order)',
        "learning rate (per step)",
    )


_DECAYS = {1: (4, 6, 8, 12), 2: (3, 4, 5, 6, 8, 10, 12), 3: (3, 4, 5, 6, 8, 10, 12, 20, 24),
           4: (5, 6, 8, 10, 12, 15, 20, 24, 30), 5: (8, 10, 12, 15, 20, 24, 30)}


def sample_schedule(draw: Draw, level: int) -> dict:
    """Warmup 1..2+2*level steps, a decay length from _DECAYS (cosines in radicals), 6 + 2*level
    listed steps; from level 3 some steps lie after the decay (lr = min_lr)."""
    peak = F(draw.integer(1, 9), 10 ** draw.integer(3, 4))
    low = peak * draw.choice((F(1, 10), F(1, 20), F(1, 4), F(1, 100)))
    warmup, decay = draw.integer(1, 2 + 2 * level), draw.choice(_DECAYS[level])
    last = warmup + decay + (decay // 2 if level >= 3 else 0)
    count = min(last, 6 + 2 * level)
    return {"peak_lr": peak, "min_lr": low, "warmup_steps": warmup, "decay_steps": decay,
            "steps": sorted(draw.sample(range(1, last + 1), count))}


def build_schedule(task_id, inputs):
    return TaskDef(task_id, "optimisation", inputs, warmup_cosine_rows, _schedule_prompt, API, POLICY,
                   tags=("schedule", "cosine"), meta={"optimiser": "schedule"})


def sample_schedule_upper(draw: Draw, level: int) -> dict:
    base = sample_schedule(draw, 3)
    schedule = {k: base[k] for k in ("peak_lr", "min_lr", "warmup_steps", "decay_steps")}
    if level == 2:
        return {**base}
    if level == 3:
        end = schedule["warmup_steps"] + schedule["decay_steps"]
        return {"question": "total", **schedule, "last": draw.integer(schedule["warmup_steps"] + 1, end + 3)}
    import mpmath

    def value(s, decay):
        peak, low, warmup = (mpmath.mpf(F(schedule[k]).numerator) / F(schedule[k]).denominator
                             for k in ("peak_lr", "min_lr", "warmup_steps"))
        if s < schedule["warmup_steps"]:
            return peak * s / warmup
        if s <= schedule["warmup_steps"] + decay:
            phase = mpmath.pi * (s - schedule["warmup_steps"]) / decay
            return low + (peak - low) * (1 + mpmath.cos(phase)) / 2
        return low

    def between(x, y):
        """A rational strictly between two distinct values, far from both (12 significant digits)."""
        return F(mpmath.nstr((x + y) / 2, 12))

    if level == 4:  # three targets, each between two consecutive rates (the later one's step answers it)
        warmup, decay = schedule["warmup_steps"], schedule["decay_steps"]
        values = [value(s, decay) for s in range(warmup, warmup + decay + 1)]
        unreachable = draw.chance(1, 6)  # one target below min_lr: its row is None
        targets = [between(values[k - 1], values[k]) for k in draw.sample(range(1, len(values)), 3)]
        if unreachable:
            targets[draw.below(3)] = F(schedule["min_lr"]) / 2
        return {"question": "first_at_most", **schedule, "targets": targets}
    import sympy

    W, D, T = sympy.symbols("W D T", positive=True, integer=True)
    return {"question": "closed_schedule", "peak_lr": schedule["peak_lr"], "min_lr": schedule["min_lr"],
            "W": W, "D": D, "T": T}


WARMUP_COSINE = opt_family(
    "warmup_cosine", build_schedule, sample_schedule,
    "L1: the learning rate at listed steps, formula stated. L2 (derive): the same from the schedule "
    "described "
    "in words. L3 (compose): the sum of the learning rates over the first steps (exact radicals; a whole "
    "decay sums to a rational). L4 (inverse): for each of three targets (in random order), the first step "
    "at which the rate is at most it, a None row in about a sixth. L5 (closed form in the symbols W, D, "
    "T): the sum of the learning rates and of their "
    "squares over T steps (the warmup's W - 1 steps, the cosine's D + 1 steps whose cosines sum to 0 and "
    "whose squared cosines sum to (D + 2)/2, then the floor), derived, never summed numerically.",
    sample_schedule_upper,
    branches=(Branch("no step reaches a target", a_row_is("step", None, (4,)), F(1, 20), (4,)),))
