"""What issue 22's disk budget and own-time call limit cost, how far a writer overshoots, and what the
limit decides on a starved host, measured on the real sandbox.

    python -m benchmarks.bench_sandbox_limits cost [--backend B] [--rounds N]  # per call, checks on/off
    python -m benchmarks.bench_sandbox_limits overshoot [--backend B] [--hogs]  # bytes past the budget
    python -m benchmarks.bench_sandbox_limits starve [--backend B] [--no-cgroups]  # under CPU hogs

(-m from the checkout, so that its exactgrade is the one imported.)

cost: the baseline is the same sandbox with both checks switched off (no CPU snapshot at the start of
a call, no disk check), interleaved round by round in the same run. overshoot: each writer of
tests/sandbox/test_sandbox_limits against its budget, alone or beside cpu_hogs. starve: each case with and
without tests/sandbox_leftovers.cpu_hogs. The load average is printed with every figure.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from contextlib import nullcontext
from pathlib import Path

from exactgrade.sandbox import Limits, Sandbox, SandboxDied, calltime, disk

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import test_sandbox_limits as workloads  # noqa: E402  (the tests' writers and their limits: one definition)
from sandbox_leftovers import cpu_hogs  # noqa: E402  (the tests' hogs: one definition)

MiB = 1 << 20


def load() -> str:
    return "load " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def cost(backend: str, rounds: int) -> None:
    """Median round trip of execute_code('pass') with the checks on and off, with n files in the work dir,
    in wall time and in the host thread's CPU time (which the machine's load does not inflate); and
    the host thread's CPU per second while a call waits (the polls)."""
    for files in (0, 100, 1000, 10_000):
        with Sandbox(backend=backend) as sb:
            sb.execute_code(f"for i in range({files}):\n    open(f'f{{i}}', 'wb').write(b'x' * 4096)")
            clock, budget = sb._clock, sb._disk
            on, off, cpu_on, cpu_off = [], [], [], []
            for _ in range(rounds):
                for checks, times, cpu in ((True, on, cpu_on), (False, off, cpu_off)):
                    sb._clock, sb._disk = (clock, budget) if checks else (calltime.Clock(), None)
                    started, cpu_started = time.perf_counter(), time.thread_time()
                    sb.execute_code("pass")
                    times.append(time.perf_counter() - started)
                    cpu.append(time.thread_time() - cpu_started)
            waits = {}
            for checks in (True, False):
                sb._clock, sb._disk = (clock, budget) if checks else (calltime.Clock(), None)
                started = time.thread_time()
                sb.execute_code("import time; time.sleep(2)")
                waits[checks] = (time.thread_time() - started) / 2
            sb._clock, sb._disk = clock, budget
        with_checks, without = statistics.median(on), statistics.median(off)
        print(f"{backend} files={files}: round trip checks on {with_checks * 1e3:.3f} ms, off "
              f"{without * 1e3:.3f} ms (+{(with_checks - without) * 1e3:.3f} ms, "
              f"x{with_checks / without:.2f}); host CPU per call on {statistics.median(cpu_on) * 1e3:.3f} "
              f"ms, off {statistics.median(cpu_off) * 1e3:.3f} ms; host CPU while a call waits: on "
              f"{waits[True] * 1e3:.2f} ms/s, off {waits[False] * 1e3:.2f} ms/s [{clock.source}; {load()}]")


def overshoot(backend: str, rounds: int, hogs: bool = False) -> None:
    """Per writer of tests/sandbox/test_sandbox_limits (one definition), how far past its budget the sandbox
    was when it was killed: the larger of what the check that killed it saw (its evidence: work dir
    plus deleted files held, or the tmpfs) and what was on disk once its processes were dead (the
    writer runs on between the check and the kill; held files are freed by it)."""
    cases = [("fast writer, six 32 MiB files", workloads.SIX_32_MIB_FILES, workloads.DISK),
             ("fast writer, 16 MiB files for ever", workloads.FILL_FILES, workloads.DISK),
             ("slow writer, 1 MiB per 10 ms", workloads.SLOW_WRITER, workloads.DISK),
             ("many small files, 16 KiB each", workloads.SMALL_FILES, workloads.MANY_ENTRIES),
             ("many empty files", workloads.EMPTY_FILES, workloads.DISK),
             ("deleted files held open", workloads.HOLD_DELETED, workloads.DISK)]
    left: list[disk.DiskUse] = []
    close = disk.DiskBudget.close

    def measure_then_close(budget: disk.DiskBudget) -> None:  # after the kill, before the work dir goes
        if budget.workdir is not None:
            left.append(disk.tree_usage(budget.workdir, 1 << 30))
        elif budget.tmpfs_fd >= 0:
            left.append(disk.tmpfs_usage(os.fstatvfs(budget.tmpfs_fd)))
        close(budget)

    disk.DiskBudget.close = measure_then_close
    try:
        for name, code, limits in cases:
            past_bytes, past_entries, killed = [], [], 0
            for _ in range(rounds):
                left.clear()
                with Sandbox(backend=backend, limits=limits) as sb, cpu_hogs(60) if hogs else nullcontext():
                    seen = 0
                    try:
                        sb.execute_code(code)
                    except SandboxDied as died:
                        killed += died.death.cause == "model" and "disk budget" in died.death.reason
                        found = re.search(r"(\d+) bytes in \d+ (?:entries|inodes)", died.death.evidence)
                        seen = int(found.group(1)) if found else 0
                after = left[0] if left else disk.DiskUse(0, 0)
                past_bytes.append(max(0, seen - limits.disk_bytes, after.bytes - limits.disk_bytes))
                past_entries.append(max(0, after.entries - limits.max_files))
            print(f"{backend} {name}: killed for its disk budget {killed}/{rounds}; past "
                  f"{limits.disk_bytes // MiB} MiB by {_spread(past_bytes, MiB)} MiB, past "
                  f"{limits.max_files} entries by {_spread(past_entries, 1)} (median / max) "
                  f"[POLL {disk.POLL:g} s{', cpu_hogs' if hogs else ''}; {load()}]")
    finally:
        disk.DiskBudget.close = close


def _spread(values: list[int], unit: int) -> str:
    return f"{statistics.median(values) / unit:.1f} / {max(values) / unit:.1f}"


SPIN = "while True:\n    pass"
SLEEP = "import time\ntime.sleep(60)"
WORK = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.2:\n    pass\nresult = 42"
OWN = "import subprocess\n[subprocess.Popen(['python3', '-c', 'while True: pass']) for _ in range(6)]\n"
OWN += SPIN


def starve(backend: str, rounds: int, use_cgroups: bool = True) -> None:
    cases = [("spin", SPIN, 1.0, 4), ("sleep", SLEEP, 1.0, 4), ("0.2 s CPU of work", WORK, 1.0, 60),
             ("spin, quota 0.05 CPU", SPIN, 0.05, 40), ("7 own processes", OWN, 1.0, 40)]
    for hogs in (False, True):
        for name, code, cpus, factor in cases:
            limits = Limits(call_timeout=0.5, cpus=cpus, wall_factor=factor)
            for _ in range(rounds):
                sandbox = Sandbox(backend=backend, limits=limits, use_cgroups=use_cgroups)
                with sandbox as sb, cpu_hogs(20) if hogs else nullcontext():
                    try:
                        sb.execute_code(code)
                        outcome = "finished"
                    except SandboxDied as died:
                        outcome = f"died ({died.death.cause})"
                    call = sb.last_call
                print(f"{backend} {'hogs' if hogs else 'no hogs'}: {name} (limit 0.5 s, cap "
                      f"{0.5 * factor:g} s): {outcome}; wall {call.wall:.2f} s, own {call.charged:.2f} s, "
                      f"stolen "
                      f"{call.stolen or 0:.2f} s [{call.source}; {load()}]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("cost", "overshoot", "starve"))
    parser.add_argument("--backend", default="namespaces")
    parser.add_argument("--rounds", type=int, default=0)
    parser.add_argument("--no-cgroups", action="store_true", help="starve: use_cgroups=False (landlock)")
    parser.add_argument("--hogs", action="store_true", help="overshoot: with tests' cpu_hogs beside")
    args = parser.parse_args()
    rounds = args.rounds or {"cost": 200, "overshoot": 5, "starve": 1}[args.what]
    if args.what == "starve":
        starve(args.backend, rounds, not args.no_cgroups)
    elif args.what == "overshoot":
        overshoot(args.backend, rounds, args.hogs)
    else:
        cost(args.backend, rounds)


if __name__ == "__main__":
    main()
