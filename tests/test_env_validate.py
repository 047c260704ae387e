"""Real `vf-validate` (subprocess runtime) on a few tasks of each environment: the gold check
runs the reference program through the sandbox tool server's `execute_code` and grades it with
the environment's reward (valid), and the untouched task scores 0 (noop valid)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

ENVS = [("scaling-env", "0,7"), ("pytorch-env", "3"), ("deeplearning-env", "0,5")]


@pytest.mark.parametrize(("env", "idx"), ENVS)
def test_vf_validate_finds_every_gold_valid_and_every_noop_valid(tmp_path: Path, env: str, idx: str) -> None:
    command = ["vf-validate", env, "--runtime.type", "subprocess", "--select.include.idx", idx, "--no-rich",
               "-o", str(tmp_path), "--run.dir", "run"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=os.environ)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    count = len(idx.split(","))
    assert summary["total"] == count
    for check in ("gold", "noop"):
        assert summary["checks"][check]["valid"] == count, summary["checks"]
    rows = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    for row in rows:
        assert row["gold"]["reason"] == "valid" and row["gold"]["error"] is None
        assert row["noop"]["rewards"] == {"correctness": 0.0}
