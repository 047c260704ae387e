"""Sandbox speed against an unsandboxed subprocess baseline measured in the same run.

Measures, for each profile (python, torch):
- ready time, warm: Sandbox() until its worker has answered the init request (zygote running);
- ready time, cold: the same with a fresh zygote (interpreter start + imports + first fork);
- baseline ready: a plain `python` subprocess worker (same interpreter, same imports, same JSON-line
  protocol, no isolation) until it answers its first request;
- execute_code round trip ("x = 1") in a sandbox vs the same request to the baseline worker;
and optionally --cycles N create/close cycles (the issue's 1,000) with leak checks: no process of
a used uid, no cgroup, no work dir, no extra host fd afterwards.

    python benchmarks/bench_sandbox.py [--backend namespaces|landlock] [--rounds 20] [--cycles 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from exactgrade.sandbox import Sandbox, backends, uids
from exactgrade.sandbox.cgroups import SandboxCgroup
from exactgrade.sandbox.runtime import default_state_dir

BASELINE_WORKER = r"""
import json, sys
profile = sys.argv[1]
import sympy
if profile == "torch":
    import torch
namespace = {}
for line in sys.stdin:
    request = json.loads(line)
    if request.get("code"):
        exec(request["code"], namespace)
    sys.stdout.write(json.dumps({"id": request["id"], "ok": True, "output": ""}) + "\n")
    sys.stdout.flush()
"""


class BaselineWorker:
    """An unsandboxed persistent worker: the cost floor a sandbox is compared against."""

    def __init__(self, profile: str) -> None:
        argv = [sys.executable, "-c", BASELINE_WORKER, profile]
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                        bufsize=1)
        self.call("")

    def call(self, code: str) -> dict:
        self.process.stdin.write(json.dumps({"id": "1", "code": code}) + "\n")
        return json.loads(self.process.stdout.readline())

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def _ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1000:9.2f} ms"


def _timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def bench_profile(profile: str, backend: str, rounds: int, cold_rounds: int) -> None:
    baseline_ready, warm_ready, cold_ready = [], [], []
    for _ in range(cold_rounds):
        backends.shutdown_zygotes()
        cold_ready.append(_timed(lambda: Sandbox(profile=profile, backend=backend).close()))
    for _ in range(rounds):  # interleaved so machine load hits both sides alike
        worker = None

        def start_baseline() -> None:
            nonlocal worker
            worker = BaselineWorker(profile)

        baseline_ready.append(_timed(start_baseline))
        worker.close()
        with Sandbox(profile=profile, backend=backend) as sb:
            warm_ready.append(sb.ready_seconds)
    worker = BaselineWorker(profile)
    with Sandbox(profile=profile, backend=backend) as sb:
        sandbox_trip = [_timed(lambda: sb.execute_code("x = 1")) for _ in range(rounds * 20)]
        baseline_trip = [_timed(lambda: worker.call("x = 1")) for _ in range(rounds * 20)]
    worker.close()
    base = statistics.median(baseline_ready)
    print(f"[{profile}] ready, baseline subprocess (cold import) {_ms(baseline_ready)}")
    print(f"[{profile}] ready, sandbox warm zygote            {_ms(warm_ready)}   "
          f"sandbox/baseline = {statistics.median(warm_ready) / base:.3f}")
    print(f"[{profile}] ready, sandbox cold (new zygote)      {_ms(cold_ready)}   "
          f"sandbox/baseline = {statistics.median(cold_ready) / base:.3f}")
    print(f"[{profile}] execute_code round trip, baseline     {_ms(baseline_trip)}")
    print(f"[{profile}] execute_code round trip, sandbox      {_ms(sandbox_trip)}   "
          f"sandbox/baseline = {statistics.median(sandbox_trip) / statistics.median(baseline_trip):.3f}")


def bench_cycles(backend: str, cycles: int) -> int:
    Sandbox(backend=backend).close()
    fds_before = sorted(os.listdir("/proc/self/fd"))
    used: set[int] = set()
    started = time.perf_counter()
    for i in range(cycles):
        with Sandbox(inputs={"i": i}, backend=backend) as sb:
            used.add(sb.uid)
            if i % 10 == 0:
                sb.bash("setsid sleep 600 >/dev/null 2>&1 &")
    elapsed = time.perf_counter() - started
    leaks = [f"fds {fds_before} -> {sorted(os.listdir('/proc/self/fd'))}"] \
        if sorted(os.listdir("/proc/self/fd")) != fds_before else []
    reused = 0
    for uid in used:
        slot = uids.try_claim(default_state_dir(), uid)
        if slot is None:  # another process on the machine has a live sandbox on this uid now
            reused += 1
            continue
        leaks += [f"process {pid} of uid {uid}" for pid in uids.processes_of(uid)]
        leaks += [f"cgroup {group}" for group in SandboxCgroup(f"sb-{uid}").dirs if group.exists()]
        if (default_state_dir() / "work" / str(uid)).exists():
            leaks.append(f"work dir of uid {uid}")
        slot.release()
    print(f"[cycles] {cycles} create/close cycles in {elapsed:.1f} s "
          f"({elapsed / cycles * 1000:.1f} ms each), {len(used)} uids used ({reused} now held by other "
          f"processes, not checked), leaks: {leaks or 'none'}")
    return 1 if leaks else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="namespaces", choices=("namespaces", "landlock"))
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--cold-rounds", type=int, default=3)
    parser.add_argument("--profiles", default="python,torch")
    parser.add_argument("--cycles", type=int, default=0,
                        help="also run N create/close cycles with leak checks")
    args = parser.parse_args()
    print(f"backend {args.backend}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    for profile in args.profiles.split(","):
        bench_profile(profile, args.backend, args.rounds, args.cold_rounds)
    return bench_cycles(args.backend, args.cycles) if args.cycles else 0


if __name__ == "__main__":
    sys.exit(main())
