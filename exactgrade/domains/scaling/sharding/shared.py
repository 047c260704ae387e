"""Helpers that several sharding families use."""

from __future__ import annotations

import math
from fractions import Fraction

from exactgrade.domains.scaling._sample import round_numbers, rows
from exactgrade.domains.scaling._task import known_mistake, near_integer, rounding_edge
from exactgrade.family import Draw, Reject
from exactgrade.task import Task


def min_microbatches_float(stage_counts, max_bubble_fraction, mistake=None):
    known_mistake(mistake, "bubble_over_microbatches")
    rows = []
    for p in stage_counts:
        if mistake == "bubble_over_microbatches":
            m = math.ceil((p - 1) / max_bubble_fraction)
        else:  # search the falling bubble fraction instead of solving for M

            def too_idle(m, p=p):
                return (p - 1) / (m + p - 1) > max_bubble_fraction

            low, m = 0, 1
            while too_idle(m):
                low, m = m, 2 * m
            while m - low > 1:
                middle = (low + m) // 2
                low, m = (middle, m) if too_idle(middle) else (low, middle)
        rows.append({"stages": p, "min_microbatches": m})
    return {"rows": rows}


def _device_count(draw: Draw, level: int) -> int:
    if round_numbers(level):
        return 2 ** draw.integer(1, 8 + level)
    return draw.integer(2, 2 ** (8 + level))


def _stage_time(draw: Draw, level: int) -> Fraction:
    if round_numbers(level):
        return Fraction(draw.integer(1, 100), 100)
    denominator = draw.choice((1000, 300, 700, 900, 1100, 30_000))
    return Fraction(draw.integer(1, denominator), denominator)  # at most a second


def sample_min_microbatches(draw: Draw, level: int) -> dict:
    if round_numbers(level):
        limit = Fraction(draw.integer(1, 30), 100)
    else:
        limit = Fraction(draw.integer(1, 300), draw.choice((1000, 999, 997, 700, 360)))
    # Stage counts whose bound (P - 1)(1 - f)/f is a whole number are dropped here (cheaper than
    # refusing the built instance); _min_microbatches_edges still checks every posed one.
    over, under = limit.denominator - limit.numerator, limit.numerator  # (1 - f) / f
    candidates = [
        p
        for p in draw.sample(range(2, 16 * 2**level + 1), 3 * rows(level, 5))
        if not near_integer(Fraction((p - 1) * over, under))
    ]
    if len(candidates) < rows(level, 5):
        raise Reject("too few stage counts off an integer bound")
    return {"stage_counts": sorted(candidates[: rows(level, 5)]), "max_bubble_fraction": limit}


def _min_microbatches_edges(task: Task) -> str | None:
    f = task.inputs["max_bubble_fraction"]
    for stages in task.inputs["stage_counts"]:
        problem = rounding_edge(f"{stages} stages: the microbatch bound", (stages - 1) * (1 - f) / f)
        if problem:
            return problem
    return None


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


SCHEDULE_P = SCHEDULE.replace("into `stages` stages", "into P stages")

"""The schedule for a task whose stage count is not the input `stages` (a list of counts, or
chosen by the model)."""


def _fewest(p, f, mistake):
    """The fewest microbatches by search (the bubble falls as M grows)."""
    m = 1
    while True:
        bubble = (p - 1) / m if mistake == "bubble_over_microbatches" else (p - 1) / (m + p - 1)
        if bubble <= f * (1 + 1e-12):
            return m
        m += 1


def _limit(draw: Draw, level: int) -> Fraction:
    if round_numbers(level):
        return Fraction(draw.integer(1, 30), 100)
    return Fraction(draw.integer(1, 300), draw.choice((1000, 999, 997, 700, 360)))


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
