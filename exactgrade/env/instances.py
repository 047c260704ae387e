"""A generated task's instance as its TaskData carries it: checked against its id, keyed by its reference.

Under a trainer the process that renders the prompt (the orchestrator, which loads the taskset)
and the process that grades (an env-server worker, maybe on another machine) are different. A
worker that rebuilt the task from its id by rejection sampling again could accept another draw
(acceptance runs the reference, and pytorch's results depend on the CPU), and would then grade a
correct answer against another instance's key. So the worker never re-samples: TaskData carries
the inputs the prompt was rendered from, the number of the draw they came from (`attempt`) and the
stream version; the worker checks that this draw of this id gives exactly these inputs (one
sampler call: pure SHA-256 arithmetic, no acceptance test, the same on every machine), then runs the
family's reference on them for the key. Anything else is refused with the reason (the rollout is
then flagged, never graded against a guess).
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache

from exactgrade import wire
from exactgrade.family import (
    MAX_ATTEMPTS,
    STREAM_VERSION,
    Draw,
    Reject,
    draw_key,
    family_of,
    parse_generated_id,
)
from exactgrade.task import Task, domain_module, materialise


class InstanceRefused(ValueError):
    """The TaskData does not carry the instance its id names: it cannot be keyed."""


def attempt_of(task: Task) -> int:
    """The number of the draw a generated task's inputs came from (sampler calls only: the
    accepted instance is not rebuilt)."""
    if task.family is None or task.level is None or task.seed is None or task.index is None:
        raise ValueError(f"{task.id} is not a generated task")
    family = family_of(task.domain, task.family)
    wanted = wire.encode(dict(task.inputs))
    for attempt in range(MAX_ATTEMPTS):
        draw = Draw(draw_key(task.domain, task.family, task.level, task.seed, task.index, attempt))
        try:
            inputs = family.sample(draw, task.level)
        except Reject:
            continue
        if wire.encode(dict(inputs)) == wanted:
            return attempt
    raise ValueError(f"no draw of {task.id} gives its inputs (the draw key differs from the generator's)")


@lru_cache(maxsize=4096)
def instance(task_id: str, domain: str, inputs_wire: str, attempt: int | None, stream: str | None) -> Task:
    """The task these TaskData fields describe, keyed by running its family's reference on the
    carried inputs, after checking that they are draw `attempt` of `task_id` under this
    process's stream version. Raises InstanceRefused with the reason."""
    parsed = parse_generated_id(task_id)
    if parsed is None:
        raise InstanceRefused(f"{task_id!r} is not a generated task id")
    id_domain, family_name, level, seed, index = parsed
    if id_domain != domain:
        raise InstanceRefused(f"{task_id} is a {id_domain} task, but its TaskData says {domain}")
    if stream != STREAM_VERSION:
        raise InstanceRefused(f"{task_id} was generated under stream {stream!r}; this server generates "
                              f"{STREAM_VERSION!r}, where the id may name another instance")
    if attempt is None or not 0 <= attempt < MAX_ATTEMPTS:
        raise InstanceRefused(f"{task_id}: TaskData names no draw (attempt {attempt!r})")
    try:
        family = family_of(domain, family_name)
    except ValueError as error:
        raise InstanceRefused(f"{task_id}: {error}") from None
    try:
        drawn = dict(family.sample(Draw(draw_key(domain, family_name, level, seed, index, attempt)), level))
    except Reject as reason:
        raise InstanceRefused(f"{task_id}: this server's sampler rejects draw {attempt} ({reason})") from None
    if wire.encode(drawn) != inputs_wire:
        raise InstanceRefused(f"{task_id}: the TaskData's inputs are not draw {attempt} of this id "
                              "(altered, or drawn by other code)")
    definition = dataclasses.replace(family.task(task_id, drawn, level), level=level, seed=seed, index=index)
    return materialise(definition, domain, domain_module(domain).PROFILE)
