"""Rollout overhead: this environment's harness vs verifiers' stock chat-program harness.

Runs real `vf-eval` (subprocess runtime, offline, reference policy from the scripted policy
server, so model latency is ~0 and measured anyway) on the same tasks with:
- `exactgrade`: the env's default harness (verifiers' chat loop in-process, shared sandbox
  tool server);
- `stock`: verifiers' `null` harness, which runs the same bundled chat program as the stock
  `bash` harness as a fresh `uv`-prepared process per rollout. (The stock `bash` harness
  itself cannot be paired with these envs: it adds its own host `bash` tool, and verifiers
  refuses the duplicate tool name `bash`.)
at concurrency 1 and 8. Per rollout it reports the latency without model time (trace timing:
boot start to scoring end, minus the model's own duration, median) and the wall time per
rollout (first rollout start to last rollout end, divided by the rollouts), each with the
ratio stock / exactgrade from the same run, and the whole vf-eval process time (start-up of
vf-eval and of the shared tool server included).

    python benchmarks/bench_rollout.py [--env scaling-env] [--tasks 16]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from exactgrade.demo import classify, read_traces, vf_eval_command
from exactgrade.scripted.server import serve

HARNESSES = {"exactgrade": (), "stock": ("--env.agent.harness.id", "null")}


def measure(env: str, tasks: int, concurrency: int, harness: str, url: str, out: Path) -> dict[str, float]:
    run_dir = f"{harness}-c{concurrency}"
    command = vf_eval_command(env, "reference", url, out, run_dir, limit=tasks, concurrency=concurrency,
                              extra=HARNESSES[harness])
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    total = time.monotonic() - started
    path = out / run_dir / "traces.jsonl"
    traces = read_traces(path) if path.exists() else []
    if done.returncode != 0 or len(traces) != tasks:
        raise SystemExit(f"{harness} c={concurrency}: vf-eval exit {done.returncode}, {len(traces)} traces\n"
                         f"{done.stdout[-2000:]}{done.stderr[-2000:]}")
    bad = [t["task"]["data"]["id"] for t in traces if classify(t)[0] != "passed"]
    latencies = []
    for t in traces:
        timing = t["timing"]
        model = (timing["agent"].get("model") or {}).get("duration") or 0.0
        latencies.append(timing["scoring"]["end"] - timing["boot"]["start"] - model)
    first = min(t["timing"]["boot"]["start"] for t in traces)
    last = max(t["timing"]["scoring"]["end"] for t in traces)
    return {"latency_median": statistics.median(latencies), "wall_per_rollout": (last - first) / len(traces),
            "vf_eval_seconds": total, "not_passed": len(bad)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="scaling-env")
    parser.add_argument("--tasks", type=int, default=16, help="rollouts per configuration (first N tasks)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    args = parser.parse_args()
    server = serve("reference")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-rollout-") as tmp:
        for concurrency in args.concurrency:
            figures = {h: measure(args.env, args.tasks, concurrency, h, url, Path(tmp)) for h in HARNESSES}
            rows.append((concurrency, figures))
    server.shutdown()
    print(f"{args.env}, {args.tasks} rollouts per configuration, reference policy (model time excluded)")
    print(f"{'concurrency':>11} {'harness':<11} {'latency/rollout':>16} {'wall/rollout':>13} "
          f"{'whole vf-eval':>14} {'not 1.0':>8}")
    for concurrency, figures in rows:
        for harness, f in figures.items():
            print(f"{concurrency:>11} {harness:<11} {f['latency_median']:>15.2f}s "
                  f"{f['wall_per_rollout']:>12.2f}s {f['vf_eval_seconds']:>13.1f}s {f['not_passed']:>8}")
        ours, stock = figures["exactgrade"], figures["stock"]
        print(f"{'':>11} {'ratio':<11} {stock['latency_median'] / ours['latency_median']:>15.1f}x "
              f"{stock['wall_per_rollout'] / ours['wall_per_rollout']:>12.1f}x   (stock / exactgrade)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
