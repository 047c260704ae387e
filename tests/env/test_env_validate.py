"""Real `vf-validate` (subprocess runtime) on a few tasks of each environment: the gold check
runs the reference program through the sandbox tool server's `execute_code` and grades it with
the environment's reward (valid), and the untouched task scores 0 (noop valid)."""

from __future__ import annotations

import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

Run = subprocess.CompletedProcess
ENVS = [("scaling-env", "0,7", "tools"), ("pytorch-env", "3", "tools"), ("deeplearning-env", "0,5", "tools"),
        ("pytorch-env", "0", "code"), ("deeplearning-env", "5", "text")]  # fmt: skip
"""(env, task positions, answer mode): the gold answer is given as the mode takes it."""


@pytest.fixture(scope="module")
def validated(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], tuple[Path, Run]]:
    """Every row of ENVS validated once, all at once (each run is mostly one process's start-up)."""
    def run(env: str, idx: str, mode: str) -> tuple[Path, Run]:
        out = tmp_path_factory.mktemp(env)
        command = ["vf-validate", env, "--runtime.type", "subprocess", "--select.include.idx", idx,
                   "--taskset.answer-mode", mode, "--no-rich", "-o", str(out), "--run.dir", "run"]
        return out, subprocess.run(command, capture_output=True, text=True, timeout=600, env=os.environ)

    with ThreadPoolExecutor(max_workers=3) as pool:
        done = pool.map(lambda row: run(*row), ENVS)
        return dict(zip(((env, mode) for env, _, mode in ENVS), done, strict=True))


@pytest.mark.parametrize(("env", "idx", "mode"), ENVS)
def test_vf_validate_finds_every_gold_valid_and_every_noop_valid(validated, env: str, idx: str,
                                                                 mode: str) -> None:
    out, done = validated[(env, mode)]
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    summary = json.loads((out / "run" / "summary.json").read_text())
    count = len(idx.split(","))
    assert summary["total"] == count
    for check in ("gold", "noop"):
        assert summary["checks"][check]["valid"] == count, summary["checks"]
    rows = [json.loads(line) for line in (out / "run" / "results.jsonl").read_text().splitlines()]
    for row in rows:
        assert row["gold"]["reason"] == "valid" and row["gold"]["error"] is None
        assert row["noop"]["rewards"] == {"correctness": 0.0}
