"""The warmup_cosine family of optimisation: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction as F

import sympy

from exactgrade import rational
from exactgrade.domains.deeplearning._family import deeplearning_family, single_row
from exactgrade.domains.deeplearning.common import POLICY, api, prompt
from exactgrade.domains.deeplearning.optimisation.shared import (
    API,
    GIVEN,
    SCHEDULE_WORDS,
    a_row_is,
    agrees_to_50_digits,
    exact_rational,
    high_precision,
    mpmath_of,
    question_level,
)
from exactgrade.family import Branch, Degenerate, Draw, Level
from exactgrade.task import TaskDef, uses


@uses(exact_rational)
def warmup_cosine_rows(peak_lr, min_lr, warmup_steps, decay_steps, steps):
    from fractions import Fraction

    import sympy

    peak, low = Fraction(peak_lr), Fraction(min_lr)
    rows = []
    for s in steps:
        if s < warmup_steps:
            lr = exact_rational(peak * Fraction(s, warmup_steps))
        elif s <= warmup_steps + decay_steps:
            # low + (peak - low) * (1 + cos) / 2, with the rational parts summed before sympy sees them
            cosine = sympy.cos(sympy.pi * sympy.Rational(s - warmup_steps, decay_steps))
            lr = exact_rational((low + peak) / 2) + exact_rational((peak - low) / 2) * cosine
        else:
            lr = exact_rational(low)
        rows.append({"step": s, "lr": lr})
    return {"rows": rows}


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


def rate_in_mpmath(inputs, s: int, decay: int):
    """The schedule's rate at step s in mpmath (call it inside ``mpmath.workdps``)."""
    import mpmath

    peak, low, warmup = (high_precision(inputs["peak_lr"]), high_precision(inputs["min_lr"]),
                         inputs["warmup_steps"])
    if s < warmup:
        return peak * s / warmup
    if s <= warmup + decay:
        return low + (peak - low) * (1 + mpmath.cos(mpmath.pi * (s - warmup) / decay)) / 2
    return low


def _check_rates(task):
    """Every listed step's rate in 80-digit mpmath; the exact key must agree to 1e-50."""
    import mpmath

    inputs = task.inputs
    with mpmath.workdps(80):
        wanted = [[rate_in_mpmath(inputs, s, inputs["decay_steps"])] for s in inputs["steps"]]
        return agrees_to_50_digits(task.expected["rows"], "lr", wanted)


def build_schedule(task_id, inputs):
    return TaskDef(task_id, "optimisation", inputs, warmup_cosine_rows, _schedule_prompt, API, POLICY,
                   tags=("schedule", "cosine"), meta={"independent": _check_rates})


LEVEL_1 = Level(build_schedule, sample_schedule)


# L2 (derive): the same rates, from the schedule described in words
WORDS = ("Give the learning rate of the schedule in the conventions (with the given peak_lr, min_lr, "
         "warmup_steps and decay_steps) at each step listed in `steps`, exactly.")


def _words_prompt(inputs):
    variables = {k: (d, inputs[k]) for k, d in GIVEN.items() if k in inputs}
    return prompt(WORDS, variables, single_row('{"rows": [{"step": int, "lr": exact value}, ...]}  (one '
                                               "row per listed step, in order)"), "learning rate (per step)")


def build_schedule_in_words(task_id, inputs):
    return TaskDef(task_id, "optimisation", inputs, warmup_cosine_rows, _words_prompt, api(SCHEDULE_WORDS),
                   POLICY, tags=("schedule", "words"), meta={"independent": _check_rates})


def sample_schedule_in_words(draw: Draw, level: int) -> dict:
    return sample_schedule(draw, 3)


LEVEL_2 = Level(build_schedule_in_words, sample_schedule_in_words)


def scheduled_rate(s, peak, low, warmup, decay):
    """The schedule's exact rate at step s (a reference helper: self-contained)."""
    from fractions import Fraction

    import sympy

    def exact(q):
        q = Fraction(q)
        return sympy.Rational(q.numerator, q.denominator)

    peak, low = Fraction(peak), Fraction(low)
    if s < warmup:
        return exact(peak * s / warmup)
    if s <= warmup + decay:
        cosine = sympy.cos(sympy.pi * sympy.Rational(s - warmup, decay))
        return exact((low + peak) / 2) + exact((peak - low) / 2) * cosine
    return exact(low)


def _schedule(draw: Draw) -> dict:
    """The schedule of a level-3 draw (levels 3-5 start from one, so their streams stay what they were)."""
    base = sample_schedule(draw, 3)
    return {k: base[k] for k in ("peak_lr", "min_lr", "warmup_steps", "decay_steps")}


# L3 (compose): the sum of the rates over the first steps
@uses(scheduled_rate)
def schedule_total(peak_lr, min_lr, warmup_steps, decay_steps, last, question=None):
    import sympy

    rates = [scheduled_rate(s, peak_lr, min_lr, warmup_steps, decay_steps) for s in range(1, last + 1)]
    return {"rows": [{"total": sympy.Add(*rates)}]}


def _check_schedule_total(task):
    """The total in 80-digit mpmath; the exact key must agree to 1e-50."""
    import mpmath

    inputs = task.inputs
    with mpmath.workdps(80):
        total = mpmath.fsum(rate_in_mpmath(inputs, s, inputs["decay_steps"])
                            for s in range(1, inputs["last"] + 1))
        got = mpmath_of(task.expected["rows"][0]["total"])
        return [] if abs(got - total) < mpmath.mpf(10) ** -50 else [
            f"the total is {mpmath.nstr(got, 20)} but 80-digit mpmath gives {mpmath.nstr(total, 20)}"]


def sample_schedule_total(draw: Draw, level: int) -> dict:
    schedule = _schedule(draw)
    end = schedule["warmup_steps"] + schedule["decay_steps"]
    return {"question": "total", **schedule, "last": draw.integer(schedule["warmup_steps"] + 1, end + 3)}


LEVEL_3 = Level(question_level(
    "total", "schedule", schedule_total, _check_schedule_total, SCHEDULE_WORDS,
    "Training uses the schedule in the conventions for steps 1 to `last`. Give the sum of the learning rates "
    "of those steps, exactly.",
    '{"total": exact sympy value}', "learning rate summed over steps"), sample_schedule_total)


# L4 (inverse): the first step at which the rate is at most each target
@uses(scheduled_rate)
def first_steps_at_most(peak_lr, min_lr, warmup_steps, decay_steps, targets, question=None):
    from fractions import Fraction

    import sympy

    def at_least(x, y):
        """x >= y for exact sympy numbers (decided to 60 digits; the samplers keep away from ties)."""
        return sympy.N(x - y, 60) >= 0

    rows = []
    for target in targets:
        q = Fraction(target)
        steps = range(warmup_steps, warmup_steps + decay_steps + 1)
        hit = [s for s in steps if at_least(sympy.Rational(q.numerator, q.denominator),
                                            scheduled_rate(s, peak_lr, min_lr, warmup_steps, decay_steps))]
        rows.append({"step": hit[0] if hit else None})
    return {"rows": rows}


def _check_first_steps_at_most(task):
    """The search in 80-digit mpmath; a decision closer than 1e-40 is refused."""
    import mpmath

    inputs = task.inputs
    warmup, decay = inputs["warmup_steps"], inputs["decay_steps"]
    with mpmath.workdps(80):
        def at_least(x, y) -> bool:
            if abs(x - y) < mpmath.mpf(10) ** -40:
                raise ValueError("a near tie")
            return bool(x > y)

        try:
            want = {"rows": [{"step": next((s for s in range(warmup, warmup + decay + 1)
                                            if at_least(high_precision(target),
                                                        rate_in_mpmath(inputs, s, decay))), None)}
                             for target in inputs["targets"]]}
        except ValueError as error:
            return [Degenerate(f"the schedule search has {error} between a learning rate and the target")]
    if task.expected != want:
        return [f"the key {task.expected} differs from 80-digit mpmath, which gives {want}"]
    return []


def sample_first_at_most(draw: Draw, level: int) -> dict:
    schedule = _schedule(draw)
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

    # three targets, each between two consecutive rates (the later one's step answers it)
    warmup, decay = schedule["warmup_steps"], schedule["decay_steps"]
    values = [value(s, decay) for s in range(warmup, warmup + decay + 1)]
    unreachable = draw.chance(1, 6)  # one target below min_lr: its row is None
    targets = [between(values[k - 1], values[k]) for k in draw.sample(range(1, len(values)), 3)]
    if unreachable:
        targets[draw.below(3)] = F(schedule["min_lr"]) / 2
    return {"question": "first_at_most", **schedule, "targets": targets}


LEVEL_4 = Level(question_level(
    "first_at_most", "schedule", first_steps_at_most, _check_first_steps_at_most, SCHEDULE_WORDS,
    "With the schedule in the conventions, for each target in `targets`, give the first step s >= "
    "warmup_steps at which the learning rate is at most that target, or None if no step up to warmup_steps + "
    "decay_steps has one.",
    '{"rows": [{"step": int or None}, ...]}  (one row per target, in the order of `targets`)', "steps"),
    sample_first_at_most)


# L5 (closed form in the symbols W, D, T): the sum of the rates and of their squares over T steps
@uses(exact_rational)
def schedule_closed_forms(peak_lr, min_lr, W, D, T, question=None):
    """Warmup 1..W-1; the cosine's D + 1 steps sum to the midpoint (a cosine over the half period
    sums to 0, its square to (D + 2) / 2)."""
    import sympy

    peak, low = exact_rational(peak_lr), exact_rational(min_lr)
    mid, half = (peak + low) / 2, (peak - low) / 2
    total = peak * (W - 1) / 2 + (D + 1) * mid + low * (T - W - D)
    squares = (peak**2 * (W - 1) * (2 * W - 1) / (6 * W) + (D + 1) * mid**2 + half**2 * (D + 2) / 2
               + low**2 * (T - W - D))
    return {"rows": [{"total": sympy.factor(total), "total_squares": sympy.together(squares)}]}


SCHEDULE_POINTS = ((1, 2, 3), (1, 5, 9), (2, 3, 5), (3, 4, 11), (5, 7, 12), (8, 12, 25), (4, 16, 20))
"""(W, D, T) at which warmup_cosine L5's closed forms are summed step by step."""


def _check_schedule_closed_forms(task) -> list[str]:
    """Another way: the key, a rational function of W, D, T, must equal at every
    point of SCHEDULE_POINTS the step-by-step sum of the learning rates (and of their squares) of
    the schedule in 50-digit mpmath; the named mistakes (the cosine over D steps, not D + 1; the
    squared cosines summed to (D + 1)/2; step W counted in the warmup too) must not."""
    import mpmath

    mp = high_precision
    inputs, row = task.inputs, task.expected["rows"][0]
    W, D, T = (inputs[k] for k in ("W", "D", "T"))
    peak, low = (rational.as_fraction(inputs[k]) for k in ("peak_lr", "min_lr"))
    for name in ("total", "total_squares"):
        value = row[name]
        if not (isinstance(value, sympy.Expr) and value.free_symbols <= {W, D, T}
                and value.is_rational_function(W, D, T)):
            return [f"{name} {value} is not a rational function of W, D and T"]
    half = rational.to_sympy((peak - low) / 2)
    mistakes = {"the cosine over D steps": (row["total"] - rational.to_sympy((peak + low) / 2), "total"),
                "squared cosines summing to (D + 1)/2": (row["total_squares"] - half**2 / 2, "total_squares"),
                "step W in the warmup too": (row["total"] + rational.to_sympy(peak), "total")}
    problems, differs = [], dict.fromkeys(mistakes, False)
    with mpmath.workdps(50):
        for w, d, t in SCHEDULE_POINTS:
            rates = [mp(peak) * s / w if s < w else
                     mp(low) + (mp(peak) - mp(low)) * (1 + mpmath.cos(mpmath.pi * (s - w) / d)) / 2
                     if s <= w + d else mp(low) for s in range(1, t + 1)]
            point = {W: w, D: d, T: t}
            for name, want in (("total", sum(rates)), ("total_squares", sum(r**2 for r in rates))):
                got = mp(rational.from_sympy(row[name].subs(point)))
                if abs(got - want) > mpmath.mpf(10) ** -40:
                    problems.append(f"at W = {w}, D = {d}, T = {t} the key's {name} is "
                                    f"{mpmath.nstr(got, 20)} but summing the steps gives "
                                    f"{mpmath.nstr(want, 20)}")
                for mistake, (wrong, field) in mistakes.items():
                    if field == name and abs(mp(rational.from_sympy(wrong.subs(point))) - want) > 10**-30:
                        differs[mistake] = True
    problems += [Degenerate(f"the named mistake ({m}) gives the key") for m, ok in differs.items() if not ok]
    return problems


def sample_schedule_closed_forms(draw: Draw, level: int) -> dict:
    schedule = _schedule(draw)
    W, D, T = sympy.symbols("W D T", positive=True, integer=True)
    return {"question": "closed_schedule", "peak_lr": schedule["peak_lr"], "min_lr": schedule["min_lr"],
            "W": W, "D": D, "T": T}


LEVEL_5 = Level(question_level(
    "closed_schedule", "schedule", schedule_closed_forms, _check_schedule_closed_forms, SCHEDULE_WORDS,
    "The schedule in the conventions has the given peak_lr and min_lr; its warmup length, its decay length "
    "and the number of training steps are left free: they are the symbols `W` (warmup_steps), `D` "
    "(decay_steps) and `T`, preloaded as sympy Symbols (positive integers; sympy.symbols('W D T', "
    "positive=True, integer=True) makes the same ones), with W >= 1, D >= 2 and T >= W + D. Training runs "
    "steps 1 to T. Give, as exact sympy expressions in W, D and T (valid for every such W, D, T): the sum of "
    "the learning rates of those T steps, and the sum of their squares. Any algebraically equal form passes; "
    "no cos, sum, floats, Abs, floor or Piecewise in the answer.",
    '{"total": <expression in W, D, T>, "total_squares": <expression in W, D, T>}',
    "learning rate summed over steps; its square summed over steps"), sample_schedule_closed_forms)


WARMUP_COSINE = deeplearning_family(
    "warmup_cosine", (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about=(
    "L1: the learning rate at listed steps, formula stated. L2 (derive): the same from the schedule "
    "described "
    "in words. L3 (compose): the sum of the learning rates over the first steps (exact radicals; a whole "
    "decay sums to a rational). L4 (inverse): for each of three targets (in random order), the first step "
    "at which the rate is at most it, a None row in about a sixth. L5 (closed form in the symbols W, D, "
    "T): the sum of the learning rates and of their "
    "squares over T steps (the warmup's W - 1 steps, the cosine's D + 1 steps whose cosines sum to 0 and "
    "whose squared cosines sum to (D + 2)/2, then the floor), derived, never summed numerically."),
    branches=(Branch("no step reaches a target", a_row_is("step", None, (4,)), F(1, 20), (4,)),))
