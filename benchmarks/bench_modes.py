"""Rollouts/s of the three answer modes on the same tasks: real `vf-eval`, scripted reference policy.

For each environment, the tasks are the shipped tasks text mode serves (all of scaling and
deeplearning, pytorch's two whose keys hold no floating tensor), at most --tasks of them, written to
a temporary dataset so that every mode runs exactly those tasks. Each round runs tools, code and
text mode once each (the order rotates per round), with -r --repeats rollouts per task and
-c --concurrency in flight, and reports per mode the median over rounds of:
- rollouts/s: rollouts / (first rollout's boot start to last rollout's scoring end);
- p50 latency without model time (boot start to scoring end minus the model's own duration);
- failed: rollouts that did not score 1.0 (the reference must pass everything);
and the ratios code/tools and text/tools from the same invocation (text needs no sandbox: it should
be at least 5x tools). The machine is shared: the 1-minute load average at each run's start is shown.

    python benchmarks/bench_modes.py --envs scaling-env pytorch-env --tasks 12 --repeats 4 --rounds 2
    python benchmarks/bench_modes.py --envs scaling-env --tasks 35 --repeats 4 --concurrency 16 --profile
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_rollout import HERE, Checkout, Run, measure  # noqa: E402

from exactgrade.dataset import COLUMNS, jsonl_text, load_split  # noqa: E402
from exactgrade.env.keys import key_from_row  # noqa: E402
from exactgrade.env.modes import ANSWER_MODES, text_refusal  # noqa: E402

DOMAINS = {"scaling-env": "scaling", "deeplearning-env": "deeplearning", "pytorch-env": "pytorch"}


def served_dataset(out: Path, domain: str, tasks: int) -> int:
    """Write out/<domain>/train.jsonl: the first `tasks` shipped rows text mode serves; their count."""
    rows = [row for row in load_split(domain) if text_refusal(key_from_row(row).expected) is None][:tasks]
    (out / domain).mkdir(parents=True, exist_ok=True)
    (out / domain / "train.jsonl").write_text(jsonl_text(rows, COLUMNS), encoding="utf-8")
    return len(rows)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--envs", nargs="+", choices=list(DOMAINS), default=list(DOMAINS))
    parser.add_argument("--tasks", type=int, default=12, help="tasks per environment (at most; default 12)")
    parser.add_argument("--repeats", type=int, default=4, help="rollouts per task (default 4)")
    parser.add_argument("--concurrency", type=int, default=8, help="rollouts in flight (default 8)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the three modes (default 2)")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also report CPU ms per rollout by process class (bench_rollout's sampler)",
    )
    args = parser.parse_args()

    checkout = Checkout("this", HERE)
    checkout.start()
    results: dict[tuple[str, str], list[Run]] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="bench-modes-") as tmp:
            data, out = Path(tmp) / "data", Path(tmp) / "runs"
            for env in args.envs:
                tasks = served_dataset(data, DOMAINS[env], args.tasks)
                for round_index in range(args.rounds):
                    shift = round_index % len(ANSWER_MODES)
                    for mode in ANSWER_MODES[shift:] + ANSWER_MODES[:shift]:
                        extra = (
                            "--env.taskset.answer-mode",
                            mode,
                            "--env.taskset.dataset-name",
                            str(data / DOMAINS[env]),
                        )
                        run = measure(
                            checkout,
                            env,
                            tasks,
                            args.repeats,
                            args.concurrency,
                            out,
                            extra,
                            profile=args.profile,
                        )
                        results.setdefault((env, mode), []).append(run)
                        print(
                            f"{env} {mode} round {round_index + 1}: {run.per_second:.2f} rollouts/s, "
                            f"p50 {run.p50:.2f} s, failed {run.failed}/{run.rollouts}, load {run.load:.1f}",
                            file=sys.stderr,
                            flush=True,
                        )
    finally:
        checkout.stop()
    print(
        "| env | mode | tasks x rollouts | rollouts/s | p50 latency (s) | failed | x tools | load |\n"
        "|---|---|---|---|---|---|---|---|"
    )
    for env in args.envs:
        tools = statistics.median(r.per_second for r in results[(env, "tools")])
        for mode in ANSWER_MODES:
            runs = results[(env, mode)]
            rate = statistics.median(r.per_second for r in runs)
            print(
                f"| {env} | {mode} | {runs[0].rollouts // args.repeats} x {args.repeats} | {rate:.2f} | "
                f"{statistics.median(r.p50 for r in runs):.2f} | {sum(r.failed for r in runs)} | "
                f"{rate / tools:.1f} | {', '.join(f'{r.load:.1f}' for r in runs)} |"
            )
    if args.profile:
        print("\nCPU ms per rollout by process class (median over rounds):")
        for (env, mode), runs in results.items():
            kinds = sorted({kind for r in runs for kind in r.cpu})
            shares = {
                k: statistics.median(1000 * r.cpu.get(k, 0.0) / r.rollouts for r in runs) for k in kinds
            }
            print(f"- {env} {mode}: " + ", ".join(f"{k} {v:.0f}" for k, v in shares.items()))


if __name__ == "__main__":
    main()
