"""The small-model difficulty table of BENCHMARKS.md from `calibrate` output folders: pass rate by
domain, level and answer mode with a 95% Wilson interval, and every rollout classified from the
grader's reason (format, misread, runtime error, wrong value, flagged).

    python benchmarks/small_model/summarise.py DIR   # DIR holds one folder per calibrate run
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

from exactgrade.env.calibration import wilson

FORMAT = r"python block|no function|SyntaxError|unreadable|no answer|boxed|never set"
KINDS = ("passed", "format", "misread (shape or kind)", "runtime error", "wrong value", "grader (flagged)",
         "other")
NUMBERS = {"int", "Fraction", "float", "sympy"}


def kind(reason: str) -> str:
    """One of KINDS for a grader's reason (a heuristic on its wording: read the samples it prints)."""
    if reason in ("passed", "flagged"):
        return "passed" if reason == "passed" else "grader (flagged)"
    if re.search(FORMAT, reason):
        return "format"
    if "raised" in reason:
        return "runtime error"
    kinds = re.search(r"expected (\w+) .*?got (\w+)", reason)
    other_kind = kinds and kinds.group(1) != kinds.group(2) and {kinds.group(1), kinds.group(2)} - NUMBERS
    if other_kind or "not a gradeable value" in reason or re.search(
            r"only equals|list of length|shape differs|keys|a float was given|dtype", reason):
        return "misread (shape or kind)"
    if re.search(r"not close|values differ|elements differ|not equal", reason) or kinds:
        return "wrong value"
    return "other"


def main(folder: Path) -> None:
    cells: dict[tuple[str, int, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    kinds: dict[tuple[str, str], Counter] = defaultdict(Counter)
    samples: dict[tuple[str, str, str], list[tuple[str, str]]] = defaultdict(list)
    for calibration in sorted(folder.glob("*/calibration.json")):
        run = json.loads(calibration.read_text())
        mode, domain = run["answer_mode"], run["domain"]
        for cell in run["cells"]:
            counts = cells[(domain, cell["level"], mode)]
            counts[0], counts[1] = counts[0] + cell["passed"], counts[1] + cell["count"]
            counts[2] += cell["flagged"]
        for traces in calibration.parent.glob("*/traces.jsonl"):
            for line in traces.open():
                episode = json.loads(line)
                trace = (episode.get("traces") or [{}])[0]
                info = trace.get("info") or {}
                reason = str(info.get("reason") or ("flagged" if not episode["ok"] else "?"))
                found = kind(reason)
                kinds[(domain, mode)][found] += 1
                if found != "passed" and len(samples[(domain, mode, found)]) < 2:
                    samples[(domain, mode, found)].append((episode["task"]["data"]["id"], reason[:160]))
    print("| domain | level | mode | passed / rollouts | rate | 95% interval | flagged |")
    print("|---|---|---|---|---|---|---|")
    for (domain, level, mode), (passed, count, flagged) in sorted(cells.items()):
        low, high = wilson(passed, count)
        print(f"| {domain} | L{level} | {mode} | {passed} / {count} | {passed / count:.2f} | "
              f"{low:.2f}-{high:.2f} | {flagged} |")
    print("\n| domain | mode | " + " | ".join(KINDS) + " |")
    print("|---|---|" + "---|" * len(KINDS))
    for (domain, mode), counter in sorted(kinds.items()):
        print(f"| {domain} | {mode} | " + " | ".join(str(counter[k]) for k in KINDS) + " |")
    print()
    for (domain, mode, found), items in sorted(samples.items()):
        for task_id, reason in items:
            print(f"- {domain} {mode} [{found}] `{task_id}`: {reason}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "."))
