"""Rollouts through verifiers' env-server pool, the way a trainer drives an environment.

For each environment it starts `python -m exactgrade.env.serving serve <env> --workers N` (a static
`serve_env` pool of N spawned workers on a TCP loopback address, subprocess runtime) and, as the
baseline in the same run, the same server with one worker (`serve_env(max_workers=1)`: verifiers'
lone in-process `EnvServer`, no broker). This process drives both with `EnvClient` against the
scripted reference policy (model time ~0, and subtracted anyway) at each concurrency, on the
environment's canonical tasks repeated to `--episodes-per-slot` x concurrency episodes (at least 8).
Both servers stay up for the whole environment and run each concurrency one right after the
other (same machine load, as nearly as a shared machine allows). Each first runs a warm-up batch
(its workers and tool servers start meanwhile; that time is printed, not counted in the figures).

Per configuration: rollouts/s (episodes / wall time of the batch), latency per rollout without
model time (trace timing: boot start to scoring end minus the model's duration) p50 and p95, the
rollouts that did not score 1.0, and the 1-minute load average before and after the batch (the
machine is shared). Ratios are pool / baseline.

    python benchmarks/bench_pool.py [--envs scaling-env ...] [--workers 2] [--concurrency 1 8 64]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass

from exactgrade.env.serving import ENVS, Episode, ServerProcess, TasksetOptions, drive, load_tasks
from exactgrade.scripted.server import serve


@dataclass(frozen=True)
class Figures:
    episodes: int
    rollouts_per_s: float
    p50: float
    p95: float
    not_passed: int
    load_before: float
    load_after: float


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def batch(address: str, tasks: list[dict], url: str, count: int, concurrency: int) -> Figures:
    episodes = [Episode(tasks[i % len(tasks)], url, "reference") for i in range(count)]
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    results = asyncio.run(drive(address, episodes, concurrency))
    wall = time.monotonic() - started
    latencies = [r.latency for r in results if r.latency is not None]
    failed = Counter(f"{r.outcome}: {r.reason[:160]}" for r in results if r.outcome != "passed")
    for reason, times in failed.most_common():
        print(f"    not 1.0 at c={concurrency} ({times}x) {reason}", file=sys.stderr, flush=True)
    return Figures(count, count / wall, statistics.median(latencies), percentile(latencies, 0.95),
                   sum(r.outcome != "passed" for r in results), load_before, os.getloadavg()[0])


def measure(env: str, workers: int, url: str, concurrencies: list[int],
            per_slot: int) -> dict[int, dict[int, Figures]]:
    """{concurrency: {1: baseline figures, workers: pool figures}}. Both servers are up for the
    whole measurement and each concurrency runs on one right after the other, so that both see
    the same machine load as nearly as a shared machine allows."""
    tasks = load_tasks(env, TasksetOptions(), 1000)
    started = time.monotonic()
    with ServerProcess(env, 1) as baseline, ServerProcess(env, workers) as pool:
        servers = {1: baseline, workers: pool}
        for n, server in servers.items():
            warm = batch(server.address, tasks, url, 2 * n, 2 * n)
            print(f"  {env} workers={n}: up and warm {time.monotonic() - started:.1f} s after the start "
                  f"({warm.not_passed} of the warm-up not 1.0)", file=sys.stderr, flush=True)
        figures: dict[int, dict[int, Figures]] = {}
        for c in concurrencies:
            for n, server in servers.items():
                f = figures.setdefault(c, {})[n] = batch(server.address, tasks, url, max(8, per_slot * c), c)
                print(f"  {env} workers={n} c={c}: {f.rollouts_per_s:.2f} rollouts/s, p50 {f.p50:.2f} s, "
                      f"p95 {f.p95:.2f} s, load {f.load_before:.1f}->{f.load_after:.1f}",
                      file=sys.stderr, flush=True)
        codes = {n: server.stop() for n, server in servers.items()}
    if any(code != 0 for code in codes.values()):
        raise SystemExit(f"{env}: exit codes of the stopped servers by workers: {codes}")
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", choices=ENVS, default=list(ENVS))
    parser.add_argument("--workers", type=int, default=2, help="workers of the pool (baseline: 1)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--with-128", action="store_true", help="also measure concurrency 128")
    parser.add_argument("--episodes-per-slot", type=int, default=2,
                        help="episodes per batch = this x concurrency (at least 8)")
    args = parser.parse_args()
    concurrencies = args.concurrency + ([128] if args.with_128 else [])
    httpd = serve("reference")
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    rows = {}
    for env in args.envs:
        rows[env] = measure(env, args.workers, url, concurrencies, args.episodes_per_slot)
    httpd.shutdown()
    print(f"reference policy, model time excluded from latency; baseline = 1 worker (verifiers' lone "
          f"EnvServer); {os.cpu_count()} CPUs")
    print(f"{'env':<17} {'c':>4} {'workers':>7} {'episodes':>8} {'rollouts/s':>10} {'p50':>7} {'p95':>7} "
          f"{'not 1.0':>7} {'load 1m':>9}")
    for env, by_concurrency in rows.items():
        for c, by_workers in by_concurrency.items():
            for n, f in by_workers.items():
                print(f"{env:<17} {c:>4} {n:>7} {f.episodes:>8} {f.rollouts_per_s:>10.2f} "
                      f"{f.p50:>6.2f}s {f.p95:>6.2f}s {f.not_passed:>7} "
                      f"{f.load_before:>4.1f}-{f.load_after:<4.1f}")
            pool, base = by_workers[args.workers], by_workers[1]
            print(f"{'':<17} {c:>4} {'ratio':>7} {'':>8} {pool.rollouts_per_s / base.rollouts_per_s:>9.2f}x "
                  f"{pool.p50 / base.p50:>6.2f}x {pool.p95 / base.p95:>6.2f}x   ({args.workers} workers / 1)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
