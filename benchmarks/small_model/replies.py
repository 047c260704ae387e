"""Real small-model replies, kept as a regression table: picks replies from `calibrate` runs (a few
per domain, answer mode and failure kind), grades each again through the task's own reward with no
model (tests/one_turn.py), and writes those whose replayed (score, reason) equals the live rollout's.
tests/env/test_env_small_model_replies.py replays the table, so a change to the block reader, the
text reader or the graders that changes the verdict on a real model's reply fails a test.

    python benchmarks/small_model/replies.py OUT.jsonl RUN_DIR [RUN_DIR ...]

A reply whose live and replayed verdicts differ is printed and left out: that is a finding (the
reward is not a function of the reply), not a table entry.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[2] / "tests"))

from one_turn import graded, served  # noqa: E402
from summarise import kind  # noqa: E402

PER_KIND = 2
MACHINE_SPECIFIC = re.compile(r"/opt/|/tmp/|/root/|/usr/|site-packages| 0x[0-9a-f]+|seconds|timed out")
"""A reason naming a path, an address or a time would not replay on another machine."""
SLOWEST = 1.0
"""Most seconds of sandbox time a kept code reply took live: on a machine 3x slower it stays 10x under
the sandbox's 30 s call limit, so the replay test never races the clock."""


def replayed(task_id: str, mode: str, reply: str) -> tuple[float, str]:
    score, trace = asyncio.run(graded(served(task_id, mode), reply))
    return score, trace.info["reason"]


def rollouts(run: Path) -> list[dict[str, Any]]:
    found = []
    for traces in run.glob("*/traces.jsonl"):
        for line in traces.open():
            episode = json.loads(line)
            trace = (episode.get("traces") or [{}])[0]
            data, info = trace["task"]["data"], trace.get("info") or {}
            replies = [node["message"]["content"] for node in trace.get("nodes", [])
                       if node["message"]["role"] == "assistant"]
            if not episode["ok"] or data["answer_mode"] == "tools" or len(replies) != 1:
                continue
            if ((info.get("sandbox") or {}).get("sandbox_seconds") or 0) > SLOWEST:
                continue
            found.append({"id": data["id"], "mode": data["answer_mode"], "reply": replies[0],
                          "score": trace["rewards"]["correctness"]["score"], "reason": info["reason"]})
    return found


def main(out: Path, runs: list[Path]) -> None:
    taken: Counter = Counter()
    table = []
    for run in runs:
        for rollout in sorted(rollouts(run), key=lambda r: r["id"]):
            cell = (rollout["id"].split("-")[0], rollout["mode"], kind(rollout["reason"]))
            if taken[cell] >= PER_KIND or MACHINE_SPECIFIC.search(rollout["reason"]):
                continue
            again = replayed(rollout["id"], rollout["mode"], rollout["reply"])
            if again != (rollout["score"], rollout["reason"]):
                print(f"live and replayed verdicts differ on {rollout['id']} ({rollout['mode']}):\n"
                      f"  live   {rollout['score']} {rollout['reason']}\n  replay {again[0]} {again[1]}")
                continue
            taken[cell] += 1
            table.append(rollout)
    out.write_text("".join(json.dumps(row, sort_keys=True) + "\n" for row in table))
    print(f"{len(table)} replies written to {out}")
    for cell, count in sorted(taken.items()):
        print(f"  {' '.join(cell)}: {count}")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), [Path(arg) for arg in sys.argv[2:]])
