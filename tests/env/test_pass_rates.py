"""Per-task pass-rate columns (exactgrade.pass_rates, the Hub's avg@<k>_<model>): their names, how
they are added to a dataset's rows, and what the loader accepts or refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from exactgrade.dataset import DatasetRowError, load_split, row_to_task_fields, split_file
from exactgrade.pass_rates import rate_column, write_column


@pytest.mark.parametrize(("k", "model", "column"), [
    (8, "Qwen/Qwen3-4B-Instruct-2507", "avg@8_qwen3_4b_instruct_2507"),
    (2, "qwen2.5-coder-1.5b-instruct", "avg@2_qwen2_5_coder_1_5b_instruct"),
    (4, "partial", "avg@4_partial"),
])  # fmt: skip
def test_the_column_name_follows_the_hub(k: int, model: str, column: str) -> None:
    assert rate_column(k, model) == column


def test_a_model_name_without_letters_or_digits_gives_no_column() -> None:
    with pytest.raises(ValueError, match="gives no column name"):
        rate_column(2, "org/--")


def test_a_column_is_added_to_the_rows_of_a_build_and_replaced_when_measured_again(tmp_path: Path) -> None:
    """Onto the shipped canonical scaling rows: measured tasks get their rate, others null."""
    (tmp_path / "scaling").mkdir()
    (tmp_path / "scaling" / "train.jsonl").write_text(split_file("scaling").read_text())
    write_column(tmp_path, "scaling", "avg@2_m", {"sc-000": 0.5, "sc-001": None})
    write_column(tmp_path, "scaling", "avg@4_n", {"sc-000": 1.0})
    write_column(tmp_path, "scaling", "avg@2_m", {"sc-000": 0.0})
    rows = load_split("scaling", dataset_name=str(tmp_path))
    assert rows.column_names[-2:] == ["avg@4_n", "avg@2_m"]
    assert (rows[0]["avg@2_m"], rows[0]["avg@4_n"], rows[1]["avg@2_m"]) == (0.0, 1.0, None)
    assert row_to_task_fields(rows[0]).task_id == "sc-000"


def test_a_file_that_is_not_a_dataset_is_not_written(tmp_path: Path) -> None:
    (tmp_path / "scaling").mkdir()
    (tmp_path / "scaling" / "train.jsonl").write_text('{"question": "?"}\n')
    with pytest.raises(ValueError, match="is not an exactgrade dataset"):
        write_column(tmp_path, "scaling", "avg@2_m", {})


def test_a_measured_task_the_file_lacks_is_refused_not_dropped(tmp_path: Path) -> None:
    (tmp_path / "scaling").mkdir()
    (tmp_path / "scaling" / "train.jsonl").write_text(split_file("scaling").read_text())
    before = (tmp_path / "scaling" / "train.jsonl").read_text()
    with pytest.raises(ValueError, match="holds no row for 1 measured task.*'sc-entropy-L1-s0-i0'"):
        write_column(tmp_path, "scaling", "avg@2_m", {"sc-000": 0.5, "sc-entropy-L1-s0-i0": 1.0})
    assert (tmp_path / "scaling" / "train.jsonl").read_text() == before


def canonical_row() -> dict:
    return json.loads(split_file("scaling").read_text().splitlines()[0])


@pytest.mark.parametrize(("extra", "reason"), [
    ({"avg@2_m": 1.5}, "pass-rate column 'avg@2_m' must be a float in [0, 1] or null, got 1.5"),
    ({"avg@2_m": "0.5"}, "must be a float in [0, 1] or null, got '0.5'"),
    ({"avg@2_m": 1}, "must be a float in [0, 1] or null, got 1"),
    ({"difficulty": 0.5}, "a row needs exactly the columns"),
    ({"avg@0_m": 0.5}, "a row needs exactly the columns"),
])  # fmt: skip
def test_a_row_with_a_bad_rate_column_is_refused_with_the_reason(extra: dict, reason: str) -> None:
    with pytest.raises(DatasetRowError, match=reason.replace("[", r"\[").replace("]", r"\]")):
        row_to_task_fields({**canonical_row(), **extra})
