"""`python -m exactgrade calibrate`: measure a model's pass rate per family and level.

A stratified sample, N tasks per (family, level) cell and k rollouts each, runs through real
`vf-eval` against any OpenAI-compatible endpoint: one run over a finite generated pool of
N x cells tasks (a pool cycles through the cells, so it holds exactly N of each). It writes
calibration.json (per cell: passed, count, flagged, pass rate and its 95% Wilson interval), prints
a table and draws a heatmap (family by level). A finite generated pool keeps only the cells inside
a pass-rate band of such a file: `--env.taskset.calibration calibration.json --env.taskset.band
0.1-0.9` (cells every rollout solves, or none does, teach a trainer nothing).

Flagged rollouts (harness failures) are not counted: trainers drop them too. The k rollouts of a
task are counted as k trials; a deterministic model answers them alike, so the interval is then
narrower than the task sample alone justifies.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from exactgrade.cli_args import (
    env_var_name,
    http_url,
    levels_range,
    non_empty,
    non_negative_float,
    non_negative_int,
    positive_int,
    writable_dir,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from exactgrade.env.calibration import Cell

HELP = "Measure a model's pass rate per family and level (calibration.json, a table, a heatmap)."
ENVS = {"scaling-env": "scaling", "pytorch-env": "pytorch", "deeplearning-env": "deeplearning"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = __doc__.split("\n\n", 1)[1]
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--env", choices=list(ENVS), required=True, help="the environment to calibrate")
    parser.add_argument("--model", type=non_empty, required=True, help="model name sent to --base-url")
    parser.add_argument("--base-url", type=http_url, required=True, help="OpenAI-compatible base URL")
    parser.add_argument("--api-key-var", type=env_var_name, default=None, metavar="NAME",
                        help="name of the environment variable holding the API key (none: no key)")
    parser.add_argument("--families", type=non_empty, default=None, metavar="A,B",
                        help="comma-separated families (default: all of the environment's)")
    parser.add_argument("--levels", type=levels_range, default=(1, 2, 3, 4, 5), metavar="L|A-B|L,M",
                        help="levels: one, a range or a comma-separated list, e.g. 1,5 (default 1-5)")
    parser.add_argument("--answer-mode", "--answer", choices=("tools", "code", "text"), default="tools",
                        help="how the model answers: tools (execute_code/bash, multi-turn; the default), "
                             "code (one python block defining solve, one turn) or text (the answer in the "
                             "reply, one turn, no sandbox)")
    parser.add_argument("--no-hidden-check", action="store_true",
                        help="code mode: call solve on the task's inputs only, not also on a hidden instance")
    parser.add_argument("--temperature", type=non_negative_float, default=None, metavar="T",
                        help="sampling temperature (default: the server's)")
    parser.add_argument("--max-tokens", type=positive_int, default=None, metavar="N",
                        help="most tokens per model reply (default: the server's)")
    parser.add_argument("--tasks-per-cell", type=positive_int, default=4, metavar="N",
                        help="generated tasks per (family, level) cell (default 4)")
    parser.add_argument("--rollouts", type=positive_int, default=2, metavar="K",
                        help="rollouts per task (default 2)")
    parser.add_argument("--seed", type=non_negative_int, default=0, metavar="S",
                        help="the generated pool's seed (default 0)")
    parser.add_argument("--concurrency", type=positive_int, default=8, metavar="C",
                        help="rollouts in flight (default 8)")
    parser.add_argument("--max-turns", type=positive_int, default=None, metavar="N",
                        help="model turns per rollout (env default 5)")
    parser.add_argument("--show-task-id", action="store_true",
                        help="end each prompt with its `Task id:` line (the scripted policies need it)")
    parser.add_argument("--out", type=writable_dir, default="outputs/exactgrade-calibrate", metavar="DIR",
                        help="output directory: calibration.json, heatmap.png and the vf-eval run")
    parser.add_argument("--write-column", type=writable_dir, default=None, metavar="DIR",
                        help="also write each task's pass rate as the column avg@<rollouts>_<model> into "
                             "DIR/<domain>/train.jsonl: added to the rows there (a `build --generated` "
                             "output), or with the measured tasks' rows (exactgrade.pass_rates)")


def run(args: argparse.Namespace) -> int:
    domain = ENVS[args.env]
    try:
        names = _families(domain, args.families)
    except ValueError as error:
        print(f"python -m exactgrade calibrate: error: argument --families: {error} (see --help)",
              file=sys.stderr)
        return 2
    try:  # before the run: a name that gives no column must not cost hours of rollouts
        column = _rate_column(args)
    except ValueError as error:
        print(f"python -m exactgrade calibrate: error: argument --model: {error} (see --help)",
              file=sys.stderr)
        return 2
    if shutil.which("vf-eval") is None:
        print("python -m exactgrade calibrate: error: vf-eval is not on PATH (pip install verifiers) "
              "(see --help)", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    levels = args.levels
    total = len(names) * len(levels) * args.tasks_per_cell * args.rollouts
    run_dir = args.out / args.env
    try:
        _vf_eval(args, names, levels, run_dir, total)
    except RuntimeError as error:
        print(f"python -m exactgrade calibrate: error: {error}", file=sys.stderr)
        return 1
    from exactgrade.env import calibration

    cells = tally(run_dir / "traces.jsonl", names, levels)
    meta = {"model": args.model, "base_url": args.base_url, "seed": args.seed, "levels": list(levels),
            "tasks_per_cell": args.tasks_per_cell, "rollouts": args.rollouts, "answer_mode": args.answer_mode,
            "hidden_check": args.answer_mode == "code" and not args.no_hidden_check,
            "sampling": {"temperature": args.temperature, "max_tokens": args.max_tokens},
            "run_dir": str(run_dir)}
    calibration.write(args.out / "calibration.json", args.env, domain, cells, meta)
    print_table(args.env, cells)
    heatmap(args.env, args.model, cells, names, levels, args.answer_mode).savefig(args.out / "heatmap.png",
                                                                                    dpi=100)
    print(f"\ncalibration: {args.out / 'calibration.json'}\nheatmap: {args.out / 'heatmap.png'}")
    if args.write_column is not None:
        from exactgrade import pass_rates

        try:
            path = pass_rates.write_column(args.write_column, domain, column,
                                           pass_rates.task_rates(run_dir / "traces.jsonl"))
        except ValueError as error:
            print(f"python -m exactgrade calibrate: error: --write-column: {error}", file=sys.stderr)
            return 1
        print(f"pass rates: column {column} in {path}")
    return 0


def _rate_column(args: argparse.Namespace) -> str | None:
    """The pass-rate column --write-column writes (None without it)."""
    from exactgrade.pass_rates import rate_column

    return rate_column(args.rollouts, args.model) if args.write_column is not None else None


def _families(domain: str, text: str | None) -> tuple[str, ...]:
    from exactgrade.family import parse_families  # not the taskset: a bad argument costs no verifiers import

    return parse_families(domain, text)


def _vf_eval(args: argparse.Namespace, names: tuple[str, ...], levels: tuple[int, ...], run_dir: Path,
             total: int) -> None:
    """One vf-eval run over the pool of tasks-per-cell x cells generated tasks, with a progress bar."""
    from exactgrade.console import Progress
    from exactgrade.demo import _count_lines, vf_eval_command

    if run_dir.exists():
        shutil.rmtree(run_dir)  # this command's own previous run
    size = len(names) * len(levels) * args.tasks_per_cell
    extra = ("--env.taskset.source", "generated", "--env.taskset.size", str(size),
             "--env.taskset.seed", str(args.seed), "--env.taskset.levels", ",".join(map(str, levels)),
             "--env.taskset.families", ",".join(names), "--env.taskset.answer-mode", args.answer_mode,
             *(("--env.taskset.hidden-check", "False") if args.no_hidden_check else ()),
             *(("--sampling.temperature", str(args.temperature)) if args.temperature is not None else ()),
             *(("--sampling.max-tokens", str(args.max_tokens)) if args.max_tokens is not None else ()),
             *(("--env.taskset.show-task-id", "True") if args.show_task_id else ()))
    command = vf_eval_command(args.env, args.model, args.base_url, run_dir.parent, run_dir.name,
                              concurrency=args.concurrency, api_key_var=args.api_key_var,
                              max_turns=args.max_turns, extra=extra, rollouts=args.rollouts)
    log_path = run_dir.parent / f"{args.env}.vf-eval.log"
    with log_path.open("w") as log, Progress(f"calibrate {args.env} ({args.model})", total) as progress:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=os.environ.copy())
        try:
            while process.poll() is None:
                progress.update(_count_lines(run_dir / "traces.jsonl"))
                time.sleep(0.5)
        except KeyboardInterrupt:
            process.terminate()
            process.wait(30)
            raise
        done = _count_lines(run_dir / "traces.jsonl")
        progress.update(done)
    if process.returncode != 0 or done == 0:
        raise RuntimeError(f"vf-eval exited {process.returncode} with {done} of {total} rollouts; "
                           f"see {log_path}")


def tally(traces_path: Path, names: tuple[str, ...], levels: tuple[int, ...]) -> list[Cell]:
    """One Cell per (family, level), family-major, from a vf-eval run's traces.jsonl."""
    from exactgrade.demo import classify, read_traces
    from exactgrade.env.calibration import cell

    counts: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0, 0])  # passed, graded, flagged
    for trace in read_traces(traces_path):
        data = trace["task"]["data"]
        outcome, _ = classify(trace)
        entry = counts[(data["family"], data["level"])]
        if outcome == "flagged":
            entry[2] += 1
        else:
            entry[0] += outcome == "passed"
            entry[1] += 1
    return [cell(family, level, *counts[(family, level)]) for family in names for level in levels]


def print_table(env: str, cells: list[Cell]) -> None:
    from exactgrade import console

    numeric = ("level", "passed", "rate", "interval", "flagged")
    grid = console.table(("family", *numeric), numeric=numeric,
                         title=f"{env}: pass rate per family and level (95% Wilson interval)")
    for c in cells:
        rate = f"{c.rate:.2f}" if c.count else "-"
        grid.add_row(c.family, str(c.level), f"{c.passed}/{c.count}", rate, f"{c.low:.2f}-{c.high:.2f}",
                     str(c.flagged))
    console.print_table(grid)


MIN_WIDTH = 4.0
"""Inches: a heatmap of one level is still wide enough for its labels and colour bar."""
TITLE_POINTS = 9


def fit_title(text: str, width: float, points: float) -> str:
    """`text` wrapped into lines that fit a figure `width` inches wide at `points` (a model name
    has no spaces: it is broken where it must be)."""
    import textwrap

    per_line = max(12, int(width * 72 / (points * 0.62)))  # a sans-serif character is ~0.6 em wide
    return "\n".join(textwrap.wrap(text, per_line, break_long_words=True, break_on_hyphens=False))


def heatmap(env: str, model: str, cells: list[Cell], names: tuple[str, ...],
            levels: tuple[int, ...], mode: str | None = None, labels: tuple[str, ...] = ()) -> Figure:
    """Family (rows) by level (columns), coloured by pass rate, each cell labelled with its rate
    and count; an unmeasured cell (every rollout flagged, or none run) is grey. `labels` name the
    columns (default "L<level>"): a summary of several runs puts a mode and a level in each."""
    import math

    from matplotlib.figure import Figure

    rates: dict[tuple[str, int], Any] = {(c.family, c.level): c for c in cells}
    grid = [[rates[(f, lv)].rate if (f, lv) in rates and rates[(f, lv)].count else math.nan for lv in levels]
            for f in names]
    width = max(MIN_WIDTH, 2.2 + 1.1 * len(levels))
    fig = Figure(figsize=(width, 1.5 + 0.32 * len(names)), layout="constrained")
    ax = fig.subplots()
    image = ax.imshow(grid, vmin=0.0, vmax=1.0, cmap="RdYlGn", aspect="auto")
    ax.set_xticks(range(len(levels)), labels or [f"L{lv}" for lv in levels])
    ax.set_yticks(range(len(names)), names, fontsize=7)
    for row, family in enumerate(names):
        for column, level in enumerate(levels):
            c = rates.get((family, level))
            label = f"{c.rate:.2f}\n{c.passed}/{c.count}" if c is not None and c.count else "n/a"
            ax.text(column, row, label, ha="center", va="center", fontsize=6)
    title = f"{env} ({model}): pass rate" + (f", {mode} mode" if mode else "")
    fig.suptitle(fit_title(title, width, TITLE_POINTS), fontsize=TITLE_POINTS)
    fig.colorbar(image, ax=ax, label="pass rate")
    return fig
