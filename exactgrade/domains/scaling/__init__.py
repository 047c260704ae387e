"""scaling-env: the arithmetic of scaling a model (roofline, FLOPs, memory, sharding, inference).

35 original tasks, ids sc-000..sc-034 in category order, every hardware number an input stated in
the prompt, every answer key the executed output of an exact (Fraction) reference solution,
graded under RelTol(1e-9).
"""

from __future__ import annotations

from exactgrade.domains.scaling import flops, inference, memory, roofline, sharding
from exactgrade.domains.scaling.checks import headline_summary, missing_headlines, task_problems
from exactgrade.task import Task, TaskDef

CATEGORIES = ("roofline", "flops", "memory", "sharding", "inference")
"""The category packages, each <category>/<family>.py per family, in task-id order."""

FAMILIES = roofline.FAMILIES + flops.FAMILIES + memory.FAMILIES + sharding.FAMILIES + inference.FAMILIES

TASKS: tuple[TaskDef, ...] = (
    roofline.TASKS + flops.TASKS + memory.TASKS + sharding.TASKS + inference.TASKS
)
PROFILE = "python"


def check(task: Task) -> list[str]:
    """The domain's checks for one task; the first task also carries the domain-level check that
    every headline phenomenon is covered (so a missing one fails verify)."""
    problems = task_problems(task)
    if task.id == TASKS[0].id:
        problems += [f"no task is tagged {tag}" for tag in missing_headlines(TASKS)]
    return problems


def summary(tasks: list[Task]) -> list[str]:
    """Lines verify prints after the domain: the headline phenomena and the tasks showing them."""
    return headline_summary(tasks)


__all__ = ["CATEGORIES", "FAMILIES", "PROFILE", "TASKS", "check", "summary"]
