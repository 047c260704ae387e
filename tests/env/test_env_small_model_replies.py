"""Replies of a real small model (Qwen2.5-Coder-1.5B-Instruct, measured by `calibrate` in code and
text mode) keep the verdict and reason their live rollout got: the block reader, the sandbox's call
of `solve`, the text reader and the graders, on what a model people train actually writes. The table
is written by benchmarks/small_model/replies.py from calibrate runs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from one_turn import graded, served

TABLE = [json.loads(line) for line in (Path(__file__).parent / "small_model_replies.jsonl").open()]


def test_the_table_holds_passes_and_failures_of_both_one_turn_modes() -> None:
    for mode in ("code", "text"):
        scores = {row["score"] for row in TABLE if row["mode"] == mode}
        assert scores == {0.0, 1.0} if mode == "code" else 0.0 in scores, mode
    assert {row["id"][:2] for row in TABLE} == {"dl", "pt", "sc"}


@pytest.mark.parametrize("row", TABLE, ids=[f"{row['mode']}-{row['id']}" for row in TABLE])
def test_a_real_reply_keeps_its_live_verdict(row: dict) -> None:
    score, trace = asyncio.run(graded(served(row["id"], row["mode"]), row["reply"]))
    assert (score, trace.info["reason"]) == (row["score"], row["reason"])
    assert "scoring_error" not in trace.info
