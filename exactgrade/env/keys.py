"""Host-side answer keys: task id -> (expected value, grading policy).

The key never enters TaskData, the prompt, the tool server or the sandbox. The Taskset
records the keys of the rows it loads here; a Task rebuilt from its TaskData alone (as
`vf serve` workers do) loads them from the same dataset source on first use.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from exactgrade.policy import Policy


@dataclass(frozen=True)
class AnswerKey:
    expected: Any
    policy: Policy


Source = tuple[str, str, str | None]
"""(domain, split, dataset_name): where a task's row comes from."""

_keys: dict[Source, dict[str, AnswerKey]] = {}
_lock = threading.Lock()


def key_from_row(row: Mapping[str, Any]) -> AnswerKey:
    """Decode a dataset row strictly (exactgrade.dataset.row_to_task_fields) into its AnswerKey."""
    from exactgrade.dataset import row_to_task_fields

    fields = row_to_task_fields(row)
    return AnswerKey(fields.expected, fields.policy)


def record(source: Source, keys: Mapping[str, AnswerKey]) -> None:
    with _lock:
        _keys.setdefault(source, {}).update(keys)


def lookup(source: Source, task_id: str) -> AnswerKey:
    """The key of `task_id` from `source`, loading the dataset if this process never did. A
    generated task's key is rebuilt from its id alone (exactgrade.get_task), whatever the source."""
    from exactgrade.family import parse_generated_id

    if parse_generated_id(task_id) is not None:
        from exactgrade.lookup import get_task

        task = get_task(task_id)
        return AnswerKey(task.expected, task.policy)
    with _lock:
        known = _keys.get(source, {}).get(task_id)
    if known is not None:
        return known
    from exactgrade.dataset import load_split

    domain, split, dataset_name = source
    rows = load_split(domain, split, dataset_name)
    record(source, {row["task_id"]: key_from_row(row) for row in rows})
    with _lock:
        found = _keys[source].get(task_id)
    if found is None:
        raise KeyError(f"no answer key for task {task_id!r} in {source}")
    return found
