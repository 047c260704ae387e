"""The small-model difficulty table of BENCHMARKS.md from `calibrate` output folders: pass rate by
domain, level and answer mode with a 95% Wilson interval, and every rollout classified from the
grader's reason (format, misread, runtime error, wrong value, flagged).

    python benchmarks/small_model/summarise.py DIR [DIR ...] [--out OUT]

Each DIR is searched for calibrate runs (their calibration.json); runs of the same cell at other
seeds add up. With --out: families.csv (every family's count per level and mode) and a heatmap per
domain, a column per (level, mode).
"""

from __future__ import annotations

import argparse
import glob
import json
import re
from collections import Counter, defaultdict
from pathlib import Path

from exactgrade.calibrate import heatmap
from exactgrade.env.calibration import Cell, wilson
from exactgrade.task import domain_module

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


def main(folders: list[Path], out: Path | None) -> None:
    cells: dict[tuple[str, int, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    families: dict[tuple[str, str, int, str], list[int]] = defaultdict(lambda: [0, 0])
    names: dict[str, tuple[str, ...]] = {}
    kinds: dict[tuple[str, str], Counter] = defaultdict(Counter)
    samples: dict[tuple[str, str, str], list[tuple[str, str]]] = defaultdict(list)
    model = ""
    found = (glob.glob(str(folder / "**" / "calibration.json"), recursive=True) for folder in folders)
    for calibration in sorted(Path(path) for paths in found for path in paths):  # symlinks followed
        run = json.loads(calibration.read_text())
        mode, domain, model = run["answer_mode"], run["domain"], run["model"]
        names.setdefault(domain, tuple(f.name for f in domain_module(domain).FAMILIES))
        for cell in run["cells"]:
            counts = cells[(domain, cell["level"], mode)]
            counts[0], counts[1] = counts[0] + cell["passed"], counts[1] + cell["count"]
            counts[2] += cell["flagged"]
            family = families[(domain, cell["family"], cell["level"], mode)]
            family[0], family[1] = family[0] + cell["passed"], family[1] + cell["count"]
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
    print("| domain | level | mode | passed / rollouts | rate | 95% interval | flagged | "
          "families passed once |")
    print("|---|---|---|---|---|---|---|---|")
    for (domain, level, mode), (passed, count, flagged) in sorted(cells.items()):
        low, high = wilson(passed, count)
        measured = [f for (d, f, lv, m), (_, n) in families.items()
                    if (d, lv, m) == (domain, level, mode) and n]
        ever = sum(families[(domain, f, level, mode)][0] > 0 for f in measured)
        print(f"| {domain} | L{level} | {mode} | {passed} / {count} | {passed / count:.2f} | "
              f"{low:.2f}-{high:.2f} | {flagged} | {ever} of {len(measured)} |")
    print("\n| domain | mode | " + " | ".join(KINDS) + " |")
    print("|---|---|" + "---|" * len(KINDS))
    for (domain, mode), counter in sorted(kinds.items()):
        print(f"| {domain} | {mode} | " + " | ".join(str(counter[k]) for k in KINDS) + " |")
    print()
    for (domain, mode, found), items in sorted(samples.items()):
        for task_id, reason in items:
            print(f"- {domain} {mode} [{found}] `{task_id}`: {reason}")
    if out is not None:
        write_families(out, model, names, families)


def write_families(out: Path, model: str, names: dict[str, tuple[str, ...]],
                   families: dict[tuple[str, str, int, str], list[int]]) -> None:
    """Per family: `families.csv` (domain, family, level, mode, passed, rollouts) and one heatmap
    per domain, a column per measured (mode, level)."""
    out.mkdir(parents=True, exist_ok=True)
    rows = ["domain,family,level,mode,passed,rollouts"]
    rows += [f"{d},{f},{lv},{m},{p},{n}" for (d, f, lv, m), (p, n) in sorted(families.items())]
    (out / "families.csv").write_text("\n".join(rows) + "\n")
    for domain, family_names in names.items():
        columns = sorted({(m, lv) for (d, _, lv, m) in families if d == domain})
        cells = []
        for column, (mode, level) in enumerate(columns):
            for family in family_names:
                passed, count = families.get((domain, family, level, mode), (0, 0))
                if count:
                    rate = passed / count
                    cells.append(Cell(family, column, passed, count, 0, rate, *wilson(passed, count)))
        figure = heatmap(f"{domain}-env", model, cells, family_names, tuple(range(len(columns))),
                         labels=tuple(f"L{level} {mode}" for mode, level in columns))
        figure.savefig(out / f"{domain}.png", dpi=110)
        print(f"wrote {out / f'{domain}.png'}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path,
                        help="folders holding calibrate runs (searched deeply)")
    parser.add_argument("--out", type=Path, help="also write families.csv and a heatmap per domain here")
    args = parser.parse_args()
    main(args.folders, args.out)
