"""Per-task pass rates of a model, written as a dataset column (the Hub's `avg@<k>_<model>`).

The Environments Hub labels each task with a small model's mean reward over k tries (e.g. a column
`avg@8_qwen3_4b_instruct_2507`), and trainers keep the tasks between two rates: a task every rollout
solves, or none does, teaches nothing. `python -m exactgrade calibrate ... --write-column DIR`
measures the rates and writes them here: into DIR/<domain>/train.jsonl, beside the rows already
there (a `build --generated` output: tasks not measured get null), or, when DIR holds no such file
yet, as a new dataset of the measured tasks (generated columns plus the rate). exactgrade's loader
(exactgrade.dataset.load_split) and environments read it back; a trainer filters with
`dataset.filter(lambda row: 0.1 <= row[column] <= 0.9)`.

A rate counts graded rollouts only: flagged ones (harness failures) are dropped, as trainers drop
them; a task whose every rollout was flagged gets null.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

from exactgrade.dataset import GENERATED_COLUMNS, RATE_COLUMN, jsonl_text, split_columns


def rate_column(k: int, model: str) -> str:
    """`avg@<k>_<model>`: the model's name after its last `/`, lowercased, every run of other
    characters than letters and digits one `_` (Qwen/Qwen3-4B-Instruct-2507 -> qwen3_4b_instruct_2507)."""
    name = re.sub(r"[^a-z0-9]+", "_", model.rsplit("/", 1)[-1].lower()).strip("_")
    column = f"avg@{k}_{name}"
    if not RATE_COLUMN.fullmatch(column):
        raise ValueError(f"model name {model!r} gives no column name (it needs a letter or a digit)")
    return column


def task_rates(traces_path: Path) -> dict[str, float | None]:
    """Task id -> mean reward of its graded rollouts in a vf-eval run (None: every one was flagged)."""
    from exactgrade.demo import classify, read_traces

    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # passed, graded
    for trace in read_traces(traces_path):
        outcome, _ = classify(trace)
        entry = counts[trace["task"]["data"]["id"]]
        if outcome != "flagged":
            entry[0] += outcome == "passed"
            entry[1] += 1
    return {task_id: passed / graded if graded else None for task_id, (passed, graded) in counts.items()}


def write_column(out: Path, domain: str, column: str, rates: dict[str, float | None]) -> Path:
    """Write `column` into out/<domain>/train.jsonl (added to the rows there, or with the measured
    generated tasks' rows when there is no such file); returns the file. ValueError when the file
    there is not an exactgrade dataset, or lacks a measured task's row (a rate is never dropped)."""
    from exactgrade.lookup import get_task

    path = out / domain / "train.jsonl"
    if path.exists():
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        layout = split_columns(rows[0]) if rows else None
        if layout is None:
            raise ValueError(f"{path} is not an exactgrade dataset (its columns are not a build's)")
        kept = tuple(c for c in rows[0] if c != column)
        missing = sorted(set(rates) - {row["task_id"] for row in rows})
        if missing:
            raise ValueError(f"{path} holds no row for {len(missing)} measured task(s), e.g. {missing[0]!r}: "
                             "measure that dataset's tasks, or write to a directory without one")
    else:
        from exactgrade.dataset_generated import generated_row

        tasks = sorted((get_task(task_id) for task_id in rates), key=lambda t: (t.family, t.level, t.index))
        rows, kept = [generated_row(task) for task in tasks], GENERATED_COLUMNS
    for row in rows:
        row[column] = rates.get(row["task_id"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(jsonl_text(rows, (*kept, column)), encoding="utf-8", newline="\n")
    return path
