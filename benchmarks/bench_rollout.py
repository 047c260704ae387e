"""Rollout throughput and overhead at scale: real `vf-eval`, this checkout against a baseline checkout.

Every configuration is a real `vf-eval` run (subprocess runtime, offline, reference policy from the
scripted policy server, so model time is ~0 and subtracted anyway). Per run it reports:
- rollouts/s: rollouts / (first rollout's boot start to last rollout's scoring end);
- p50 / p95 latency without model time: per rollout, boot start to scoring end minus the model's
  own duration (from the trace timing);
- failed: rollouts that did not score 1.0 (flagged or wrong);
- the 1-minute load average when the run started (the machine is shared: read figures with it);
- with --profile, the CPU seconds of each process class during the run (sampled from /proc):
  vf-eval (verifiers' chat loop, interception and scoring, our harness and reward), the tool
  server (supervisor + worker), the sandboxes (zygotes + workers) and the policy server.

--compare-to PATH runs every configuration a second time with PATH's code (PYTHONPATH=PATH, its own
policy server), interleaved with this checkout's run (the order alternates per round), and prints
this / baseline ratios from the same invocation. --memory N measures the PSS of N idle sandboxes per
profile (one call each; /proc/<pid>/smaps_rollup of every process in their cgroups). --ramp MAX
doubles the concurrency of pytorch-env from 64 (all tasks, ceil(c / 45) repeats: at least c
rollouts) until a rollout fails or MAX is passed. --stock keeps the earlier comparison with
verifiers' stock `null` harness (a fresh `uv`-prepared chat program per rollout; the stock `bash`
harness cannot run these envs: it adds a host `bash` tool that verifiers refuses as a duplicate of
the sandbox's `bash`).

    python benchmarks/bench_rollout.py --envs pytorch-env --concurrency 64 --compare-to /work/main
    python benchmarks/bench_rollout.py --concurrency 1 8 64 128 --memory 16 --ramp 256
    python benchmarks/bench_rollout.py --envs scaling-env --concurrency 1 8 --repeats 1 --stock
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
if "PYTHONPATH" not in os.environ:  # a --compare-to child runs with the other checkout's PYTHONPATH
    sys.path.insert(0, str(HERE))

from exactgrade.demo import classify, read_traces, trace_latency, vf_eval_command  # noqa: E402

ENVS = ("scaling-env", "deeplearning-env", "pytorch-env")
TASKS = {"scaling-env": 35, "deeplearning-env": 36, "pytorch-env": 45}
STOCK = ("--env.agent.harness.id", "null")
HZ = os.sysconf("SC_CLK_TCK")


@dataclass
class Checkout:
    """A tree of exactgrade code and the policy server started from it."""

    label: str
    path: Path
    server: subprocess.Popen | None = None
    url: str = ""

    def env(self) -> dict[str, str]:
        return {**os.environ, "PYTHONPATH": str(self.path)}

    def start(self) -> None:
        command = [sys.executable, "-m", "exactgrade", "policy-server", "--policy", "reference"]
        self.server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=self.env(),
                                       cwd=self.path)
        line = self.server.stdout.readline()  # "policy server (...) on http://127.0.0.1:PORT/v1"
        if "http://" not in line:
            raise SystemExit(f"{self.label}: the policy server did not start ({line!r})")
        self.url = line.split()[-1]

    def stop(self) -> None:
        if self.server is not None:
            self.server.terminate()
            self.server.wait()


@dataclass
class Run:
    rollouts: int
    failed: int
    per_second: float
    p50: float
    p95: float
    model_p50: float
    wall: float
    load: float
    cpu: dict[str, float] = field(default_factory=dict)


def tasks_for(env: str, concurrency: int, repeats: int, tasks: int | None) -> int:
    """All tasks from -c 64 up (so 64 and 128 rollouts are really in flight), else enough for
    max(16, 2c) rollouts."""
    if tasks is not None:
        return min(tasks, TASKS[env])
    if concurrency >= 64:
        return TASKS[env]
    return min(TASKS[env], math.ceil(max(16, 2 * concurrency) / repeats))


def measure(checkout: Checkout, env: str, tasks: int, repeats: int, concurrency: int, out: Path,
            extra: tuple[str, ...] = (), profile: bool = False) -> Run:
    run_dir = f"{checkout.label}-{env}-c{concurrency}-{time.monotonic_ns()}"
    command = vf_eval_command(env, "reference", checkout.url, out, run_dir, limit=tasks,
                              concurrency=concurrency, extra=("-r", str(repeats), *extra))  # last -r wins
    load = os.getloadavg()[0]
    server_cpu = _cpu_seconds(checkout.server.pid)
    started = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=checkout.env(), cwd=checkout.path)
    sampler = _TreeSampler(proc.pid) if profile else None
    _, stderr = proc.communicate(timeout=3600)
    wall = time.monotonic() - started
    cpu = sampler.stop() if sampler else {}
    if sampler:
        cpu["policy server"] = _cpu_seconds(checkout.server.pid) - server_cpu
    path = out / run_dir / "traces.jsonl"
    traces = read_traces(path) if path.exists() else []
    expected = tasks * repeats
    if proc.returncode != 0 or len(traces) != expected:
        raise SystemExit(f"{checkout.label} {env} c={concurrency}: vf-eval exit {proc.returncode}, "
                         f"{len(traces)}/{expected} traces\n{stderr[-3000:]}")
    latencies, models = zip(*(trace_latency(t) for t in traces), strict=True)
    first = min(t["timing"]["boot"]["start"] for t in traces)
    last = max(t["timing"]["scoring"]["end"] for t in traces)
    failed = sum(classify(t)[0] != "passed" for t in traces)
    return Run(len(traces), failed, len(traces) / (last - first), statistics.median(latencies),
               _percentile(latencies, 0.95), statistics.median(models), wall, load, cpu)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def _cpu_seconds(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / HZ


class _TreeSampler:
    """CPU seconds of every process below `root`, by class, sampled every 0.25 s (a process that
    lives less than that between samples is missed: the sandboxes' short bash children)."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.seen: dict[int, tuple[str, float]] = {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._done.wait(0.25):
            self._sample()

    def _sample(self) -> None:
        procs: dict[int, tuple[int, float, str]] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    command = f.read(300).decode(errors="replace")
            except OSError:
                continue
            procs[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / HZ, command)
        for pid, (_, cpu, command) in procs.items():
            kind = self._classify(pid, procs)
            if pid in self.seen and not command:  # exiting (a zombie has no command line): keep its class
                kind = self.seen[pid][0]
            if kind is not None:
                self.seen[pid] = (kind, cpu)

    def _classify(self, pid: int, procs: dict[int, tuple[int, float, str]]) -> str | None:
        chain = []
        while pid in procs and pid != self.root and pid > 1:
            chain.append(procs[pid][2])
            pid = procs[pid][0]
        if pid != self.root:
            return None
        tool_servers = sum("exactgrade.env.toolset" in command for command in chain)
        if not chain:
            return "vf-eval"
        if "exactgrade.env.toolset" in chain[0]:
            return "tool server"
        return "sandboxes" if tool_servers else "vf-eval children"

    def stop(self) -> dict[str, float]:
        self._done.set()
        self._thread.join()
        totals: dict[str, float] = {}
        for kind, cpu in self.seen.values():
            totals[kind] = totals.get(kind, 0.0) + cpu
        return totals


def idle_memory(count: int) -> dict[str, float]:
    """MiB of PSS per idle sandbox after one call, per profile; the zygote's own PSS apart."""
    from exactgrade.sandbox import Sandbox
    from exactgrade.sandbox.backends import _zygotes

    figures = {}
    for profile in ("python", "torch"):
        sandboxes = [Sandbox(profile=profile) for _ in range(count)]
        try:
            for sandbox in sandboxes:
                sandbox.execute_code("x = 1")
            total = sum(_pss(pid) for sandbox in sandboxes for pid in sandbox._cgroup.pids())
            zygote = next(z for key, z in _zygotes.items() if key[1] == profile)
            figures[profile] = total / count / 2**20
            figures[f"{profile} zygote"] = _tree_pss(zygote.process.pid) / 2**20
        finally:
            for sandbox in sandboxes:
                sandbox.close()
    return figures


def _pss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _tree_pss(pid: int) -> int:
    """PSS of pid and its descendants that are not sandboxes (bwrap and the zygote itself)."""
    children = Path(f"/proc/{pid}/task/{pid}/children")
    try:
        kids = [int(k) for k in children.read_text().split()]
    except OSError:
        kids = []
    own = _pss(pid)
    if "zygote" not in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
        return own + sum(_tree_pss(kid) for kid in kids)
    return own


def memory_of(checkout: Checkout, count: int) -> dict[str, float]:
    done = subprocess.run([sys.executable, __file__, "--memory-child", str(count)], capture_output=True,
                          text=True, env=checkout.env(), cwd=checkout.path, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"{checkout.label}: idle memory failed\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def ramp(checkout: Checkout, limit: int, out: Path, profile: bool) -> list[tuple[int, Run]]:
    """pytorch-env at concurrency 64, 128, ... <= limit with at least that many rollouts; stops at the
    first failed rollout."""
    results = []
    concurrency = 64
    while concurrency <= limit:
        repeats = math.ceil(concurrency / TASKS["pytorch-env"])
        run = measure(checkout, "pytorch-env", TASKS["pytorch-env"], repeats, concurrency, out,
                      profile=profile)
        results.append((concurrency, run))
        print(f"ramp c={concurrency}: {_row(run)}", flush=True)
        if run.failed:
            break
        concurrency *= 2
    return results


def _row(run: Run) -> str:
    cpu = "  ".join(f"{k} {v:.1f}s" for k, v in sorted(run.cpu.items(), key=lambda kv: -kv[1]))
    return (f"{run.rollouts:>5} {run.per_second:>7.2f} {run.p50:>7.2f}s {run.p95:>7.2f}s "
            f"{run.model_p50:>7.2f}s {run.wall:>7.1f}s {run.failed:>6} {run.load:>5.1f}  {cpu}")


def _ratio(ours: Run, other: Run, label: str) -> str:
    return (f"{'':<17} {'':>4} {'ratio':<9} {'':>5} {ours.per_second / other.per_second:>6.2f}x "
            f"{ours.p50 / other.p50:>7.2f}x {ours.p95 / other.p95:>7.2f}x   (branch / {label}; p95/p50 "
            f"branch {ours.p95 / ours.p50:.2f}, {label} {other.p95 / other.p50:.2f})")


HEADER = (f"{'env':<17} {'c':>4} {'code':<9} {'n':>5} {'roll/s':>7} {'p50':>8} {'p95':>8} {'model50':>8} "
          f"{'vf-eval':>8} {'failed':>6} {'load':>5}  cpu by process")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", choices=ENVS, default=list(ENVS))
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 64, 128])
    parser.add_argument("--repeats", type=int, default=4, help="rollouts per task (vf-eval -r; default 4)")
    parser.add_argument("--tasks", type=int, default=None,
                        help="tasks per run (default: all from -c 64 up, else max(16, 2c) rollouts' worth)")
    parser.add_argument("--rounds", type=int, default=1, help="repeat every configuration this many times")
    parser.add_argument("--compare-to", type=Path, default=None, metavar="CHECKOUT",
                        help="also run every configuration with this checkout's code (e.g. /work/main)")
    parser.add_argument("--profile", action="store_true", help="CPU seconds per process class")
    parser.add_argument("--memory", type=int, default=0, metavar="N",
                        help="PSS of N idle sandboxes per profile")
    parser.add_argument("--ramp", type=int, default=0, metavar="MAX",
                        help="highest pytorch-env concurrency without a failed rollout, up to MAX")
    parser.add_argument("--stock", action="store_true", help="also run verifiers' stock null harness")
    parser.add_argument("--memory-child", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        print(json.dumps(idle_memory(args.memory_child)))
        return 0
    checkouts = [Checkout("branch", HERE)]
    if args.compare_to is not None:
        checkouts.append(Checkout("baseline", args.compare_to.resolve()))
    for checkout in checkouts:
        checkout.start()
    try:
        with tempfile.TemporaryDirectory(prefix="bench-rollout-") as tmp:
            out = Path(tmp)
            print(HEADER, flush=True)
            for env in args.envs:
                for concurrency in args.concurrency:
                    tasks = tasks_for(env, concurrency, args.repeats, args.tasks)
                    for round_ in range(args.rounds):
                        order = checkouts if round_ % 2 == 0 else checkouts[::-1]
                        runs = {c.label: measure(c, env, tasks, args.repeats, concurrency, out,
                                                 profile=args.profile) for c in order}
                        if args.stock:
                            runs["stock"] = measure(checkouts[0], env, tasks, args.repeats, concurrency, out,
                                                    STOCK, args.profile)
                        for label, run in runs.items():
                            print(f"{env:<17} {concurrency:>4} {label:<9} {_row(run)}", flush=True)
                        for label in ("baseline", "stock"):
                            if label in runs:
                                print(_ratio(runs["branch"], runs[label], label), flush=True)
            if args.ramp:
                held = [c for c, run in ramp(checkouts[0], args.ramp, out, args.profile) if not run.failed]
                print(f"highest concurrency held without a failed rollout: {max(held) if held else 'none'} "
                      f"(ramp up to {args.ramp})")
        if args.memory:
            for checkout in checkouts:
                figures = memory_of(checkout, args.memory)
                print(f"idle sandbox PSS ({checkout.label}, {args.memory} per profile, one call each): "
                      + ", ".join(f"{k} {v:.1f} MiB" for k, v in figures.items()))
    finally:
        for checkout in checkouts:
            checkout.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
