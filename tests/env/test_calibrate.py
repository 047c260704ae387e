"""`python -m exactgrade calibrate` end to end: real vf-eval against the scripted policy server
playing `partial`, whose pass rate per family and level is known by construction; calibrate
must reproduce every cell exactly and within its Wilson interval, write calibration.json, a table
and a heatmap, and a generated pool must keep only the cells inside a pass-rate band of that file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest
from scaling_env import ScalingTaskset

from exactgrade.env.calibration import cell, parse_band, wilson
from exactgrade.env.taskset import ExactgradeTasksetConfig
from exactgrade.family import families
from exactgrade.scripted.policies import partial_pass_rate, partial_solves
from exactgrade.scripted.server import serve

NAMES = families("scaling")[:2]
LEVELS = (1, 2)
TASKS, ROLLOUTS = 2, 2


@pytest.mark.parametrize(("passed", "count", "low", "high"), [
    (5, 10, 0.2366, 0.7634),
    (0, 10, 0.0, 0.2775),
    (10, 10, 0.7225, 1.0),
    (1, 4, 0.0456, 0.6994),
    (0, 0, 0.0, 1.0),  # nothing measured: nothing known
])  # fmt: skip
def test_the_wilson_interval(passed, count, low, high):
    assert wilson(passed, count) == pytest.approx((low, high), abs=5e-5)


@pytest.mark.parametrize(("text", "band"), [
    ("0.1-0.9", (0.1, 0.9)), ("0-1", (0.0, 1.0)), (" .25 - .75 ", (0.25, 0.75))])
def test_a_band_is_parsed(text, band):
    assert parse_band(text) == band


@pytest.mark.parametrize("text", ["0.9-0.1", "0.1-1.5", "0.5", "-0.1-0.5", "low-high", ""])
def test_a_bad_band_is_refused_with_the_rule(text):
    with pytest.raises(ValueError, match=r"band must be LOW-HIGH with 0 <= LOW <= HIGH <= 1"):
        parse_band(text)


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    out = tmp_path_factory.mktemp("calibrate")
    httpd = serve("partial")
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    try:
        done = subprocess.run(
            [sys.executable, "-m", "exactgrade", "calibrate", "--env", "scaling-env", "--model", "partial",
             "--base-url", url, "--families", ",".join(NAMES), "--levels", "1-2", "--tasks-per-cell",
             str(TASKS), "--rollouts", str(ROLLOUTS), "--show-task-id", "--out", str(out), "--concurrency",
             "16", "--write-column", str(out / "rated")],
            capture_output=True, text=True, timeout=900, env=os.environ.copy())
        unknown = httpd.model.stats()["unknown_prompts"]
    finally:
        httpd.shutdown()
        httpd.server_close()
    return out, done, unknown


def test_calibrate_reproduces_the_known_pass_rates_within_its_intervals(calibrated):
    out, done, unknown = calibrated
    assert done.returncode == 0, done.stderr[-3000:]
    assert unknown == 0
    document = json.loads((out / "calibration.json").read_text())
    assert (document["env"], document["domain"], document["rollouts"]) == ("scaling-env", "scaling", ROLLOUTS)
    cells = {(c["family"], c["level"]): c for c in document["cells"]}
    assert set(cells) == {(f, lv) for f in NAMES for lv in LEVELS}
    for (family, level), measured in cells.items():
        known = partial_pass_rate("scaling", family, level, TASKS)
        assert measured["count"] == TASKS * ROLLOUTS and measured["flagged"] == 0
        assert measured["rate"] == known, (family, level)
        assert measured["low"] <= known <= measured["high"]
        assert f"{measured['passed']}/{measured['count']}" in done.stdout
    assert {c["rate"] for c in cells.values()} == {0.0, 0.5, 1.0}  # the policy really is partial
    assert (out / "heatmap.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_pool_keeps_only_the_cells_inside_the_band(calibrated):
    out = calibrated[0]
    path = str(out / "calibration.json")
    config = ExactgradeTasksetConfig(source="generated", size=8, levels="1-2", families=",".join(NAMES),
                                     calibration=path, band="0.1-0.9")
    kept = {(t.data.family, t.data.level) for t in ScalingTaskset(config)}
    inside = {(f, lv) for f in NAMES for lv in LEVELS
              if 0.1 <= partial_pass_rate("scaling", f, lv, TASKS) <= 0.9}
    assert kept == inside == {(NAMES[0], 2)}
    assert len(list(ScalingTaskset(config))) == 8  # the pool's size, all from the kept cell
    with pytest.raises(ValueError, match="no cell of the pool has a pass rate within 0.6-0.9"):
        ScalingTaskset(config.model_copy(update={"band": "0.6-0.9"}))
    with pytest.raises(ValueError, match="measured the scaling domain, not pytorch"):
        from pytorch_env import PytorchTaskset

        PytorchTaskset(ExactgradeTasksetConfig(source="generated", calibration=path))


def test_a_cell_without_graded_rollouts_has_no_rate():
    empty = cell("f", 1, 0, 0, flagged=3)
    assert empty.count == 0 and empty.rate != empty.rate and (empty.low, empty.high) == (0.0, 1.0)


def test_per_task_pass_rates_are_written_as_a_column_the_loader_and_the_env_read(calibrated):
    """--write-column writes the measured tasks with avg@<k>_<model>: the partial policy's rate of each
    task is known (1.0 where it solves it, else 0.0)."""
    from exactgrade.dataset import load_split

    out, done, _ = calibrated
    rows = load_split("scaling", dataset_name=str(out / "rated"))
    column = f"avg@{ROLLOUTS}_partial"
    assert rows.column_names[-1] == column and f"column {column}" in done.stdout
    assert len(rows) == len(NAMES) * len(LEVELS) * TASKS
    assert {row["task_id"]: row[column] for row in rows} == {
        row["task_id"]: float(partial_solves(row["task_id"])) for row in rows}
    tasks = list(ScalingTaskset(ExactgradeTasksetConfig(dataset_name=str(out / "rated"))))
    assert sorted(t.data.id for t in tasks) == sorted(rows["task_id"])
