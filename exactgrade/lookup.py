"""get_task: any task by its id, canonical (exactgrade.task) or generated (exactgrade.family).

It sits above both so the layout reads top-down: task (the model and the canonical tasks) <-
family (generated instances of them) <- lookup.
"""

from __future__ import annotations

from exactgrade.family import get_generated
from exactgrade.task import Task, UnknownTask, canonical_task


def get_task(task_id: str) -> Task:
    """The task with this id: canonical (``dl-000``, ``sc-012``, ``pt-044`` ...) or generated
    (``sc-matmul_roofline-L3-s0-i17``, rebuilt from the id alone)."""
    if not isinstance(task_id, str):
        raise UnknownTask(f"a task id is a str, got {type(task_id).__name__}")
    try:
        generated = get_generated(task_id)
    except ValueError as error:
        raise UnknownTask(f"no task {task_id!r}: {error}") from None
    if generated is not None:
        return generated
    canonical = canonical_task(task_id)
    if canonical is not None:
        return canonical
    raise UnknownTask(f"no task {task_id!r}; ids look like dl-000, sc-000, pt-000 (canonical) "
                      "or sc-<family>-L<level>-s<seed>-i<index> (generated)")
