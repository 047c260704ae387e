"""The scaling domain's own verify checks.

Per task: RelTol(1e-9) policy, a `{"rows": [...]}` key, no exactly-zero number (zero is usually
a formula that cancelled), no non-finite float, every input named in the question text (the
generated input listing does not count) or the api_description, and each headline tag's
phenomenon visible in the task's own key. Per domain: every headline phenomenon of the issue is
covered by a tagged task.

An unexplained zero, a non-finite float and a headline the key does not show are ``Degenerate``
(a generated draw where they happen is redrawn); the rest (policy, shape of the key, inputs the
text never names, unknown tags) are defects of the family, on which generation fails closed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator
from fractions import Fraction
from functools import lru_cache
from typing import Any

from exactgrade.domains.scaling._task import POLICY, SYMBOLIC_POLICY
from exactgrade.domains.scaling._text import INPUT_LISTING
from exactgrade.family import Degenerate
from exactgrade.task import Task, TaskDef

Rows = list[dict[str, Any]]


def _has_both_bounds(rows: Rows) -> bool:
    return {row["bound"] for row in rows} == {"compute", "memory"}


def _attention_below_half(rows: Rows) -> bool:
    return all(row["attention_fraction"] < Fraction(1, 2) for row in rows)


def _optimizer_outweighs_weights(rows: Rows) -> bool:
    return all(row["optimizer_to_weights"] > 1 for row in rows) and any(row["min_chips"] > 1 for row in rows)


def _some_allreduce_exceeds_backward(rows: Rows) -> bool:
    return any(row["allreduce_exceeds_backward"] for row in rows)


def _decode_ignores_peak_flops(rows: Rows) -> bool:
    """All memory-bound, and some two chips share a throughput (same bandwidth, other peak)."""
    throughputs = [row["tokens_per_s"] for row in rows]
    return all(row["bound"] == "memory" for row in rows) and len(set(throughputs)) < len(throughputs)


def _kv_cache_dominates_somewhere(rows: Rows) -> bool:
    return any(row["kv_share"] > Fraction(1, 2) for row in rows) and any(row["kv_share"] < Fraction(1, 10)
                                                                         for row in rows)


def _bubble_shrinks_with_microbatches(rows: Rows) -> bool:
    bubbles = [row["bubble_fraction"] for row in rows]
    return all(a > b for a, b in zip(bubbles, bubbles[1:], strict=False))


def _utilization_below_one(rows: Rows) -> bool:
    return all(0 < row["mfu"] < 1 for row in rows)


def _positive_days(rows: Rows) -> bool:
    return all(row["time_days"] > 0 for row in rows)


# tag -> (the phenomenon, a test that the tagged task's key shows it)
HEADLINES: dict[str, tuple[str, Callable[[Rows], bool]]] = {
    "headline:matmul_roofline_crossover": (
        "the same matmul is memory-bound at batch 1 and compute-bound at a large batch", _has_both_bounds),
    "headline:attention_minority": (
        "attention is a minority of a layer's FLOPs even at long context", _attention_below_half),
    "headline:adam_state_multiple": (
        "Adam state is a multiple of the weights and needs several chips to hold",
        _optimizer_outweighs_weights),
    "headline:allreduce_exceeds_backward": (
        "a data-parallel gradient all-reduce outlasts the backward pass, the only compute it overlaps",
        _some_allreduce_exceeds_backward),
    "headline:decode_memory_bound": (
        "batch-1 decode throughput is set by HBM bandwidth; peak FLOPs play no part",
        _decode_ignores_peak_flops),
    "headline:kv_cache_share": (
        "the KV cache's share of the bytes a decode step reads", _kv_cache_dominates_somewhere),
    "headline:pipeline_bubble": (
        "pipeline bubbles shrink with more microbatches", _bubble_shrinks_with_microbatches),
    "headline:mfu": ("model FLOPs utilization of measured steps", _utilization_below_one),
    "headline:time_to_train": ("time-to-train estimates from 6ND", _positive_days),
}


def task_problems(task: Task) -> list[str]:
    """Everything wrong with one materialised task (empty list: it passes)."""
    problems: list[str] = []
    policy = SYMBOLIC_POLICY if task.meta.get("symbolic") else POLICY
    if task.policy != policy:
        problems.append(f"policy is {task.policy.describe()}, expected {policy.describe()}")
    expected = task.expected
    if not (isinstance(expected, dict) and set(expected) == {"rows"} and isinstance(expected["rows"], list)
            and expected["rows"] and all(isinstance(row, dict) for row in expected["rows"])):
        problems.append('the key is not {"rows": [<dict>, ...]} with at least one row')
        return problems
    for path, number in _numbers(expected, "result"):
        if number == 0 and task.zero_reason is None:
            problems.append(Degenerate(f"{path} is exactly zero (a cancelled formula?) and the task gives "
                                       "no zero_reason"))
        if isinstance(number, float) and not math.isfinite(number):
            problems.append(Degenerate(f"{path} is {number!r}, not finite"))
    question = task.prompt.split(INPUT_LISTING)[0]
    for name in _unexplained(question, task.api_description, tuple(task.inputs)):
        problems.append(f"input {name!r} is named neither in the question nor in the api_description")
    for tag in task.tags:
        if tag.startswith("headline:"):
            if tag not in HEADLINES:
                problems.append(f"unknown headline tag {tag!r}")
            elif not HEADLINES[tag][1](expected["rows"]):
                problems.append(Degenerate(f"tagged {tag} but its key does not show it: {HEADLINES[tag][0]}"))
    return problems


@lru_cache(maxsize=1024)
def _unexplained(question: str, api_description: str, names: tuple[str, ...]) -> tuple[str, ...]:
    """The input names neither text mentions as a whole word (cached: a family's generated
    tasks share one question text and one set of input names)."""
    explained = f"{question}\n{api_description}"
    return tuple(name for name in names if not re.search(rf"(?<!\w){re.escape(name)}(?!\w)", explained))


def missing_headlines(definitions: Iterable[TaskDef | Task]) -> list[str]:
    """The headline tags no task carries."""
    found = {tag for definition in definitions for tag in definition.tags}
    return [tag for tag in HEADLINES if tag not in found]


def headline_summary(definitions: Iterable[TaskDef | Task]) -> list[str]:
    """One line listing which task shows each headline phenomenon, and one per missing one."""
    definitions = list(definitions)
    owners = {tag: [d.id for d in definitions if tag in d.tags] for tag in HEADLINES}
    found = [f"{tag.removeprefix('headline:')} ({', '.join(ids)})" for tag, ids in owners.items() if ids]
    lines = [f"headline phenomena tagged: {len(found)}/{len(HEADLINES)}: " + "; ".join(found)]
    lines += [f"MISSING headline {tag}: {HEADLINES[tag][0]}" for tag in missing_headlines(definitions)]
    return lines


def _numbers(value: Any, path: str) -> Iterator[tuple[str, int | Fraction | float]]:
    """Every numeric leaf (bools excluded) with its path."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _numbers(item, f"{path}[{key!r}]")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _numbers(item, f"{path}[{index}]")
    elif type(value) in (int, float, Fraction):
        yield path, value
