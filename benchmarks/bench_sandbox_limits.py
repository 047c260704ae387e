"""What issue 22's disk budget and own-time call limit cost, how far a writer overshoots, and what the
limit decides on a starved host, measured on the real sandbox.

    python -m benchmarks.bench_sandbox_limits cost [--backend B] [--rounds N]  # per call, checks on/off
    python -m benchmarks.bench_sandbox_limits overshoot [--backend B]          # bytes past the budget
    python -m benchmarks.bench_sandbox_limits starve [--backend B] [--no-cgroups]  # under CPU hogs

(-m from the checkout, so that its exactgrade is the one imported.)

cost: the baseline is the same sandbox with both checks switched off (no CPU snapshot at the start of
a call, no disk check), interleaved round by round in the same run. overshoot: a writer of 16 MiB
files against a 64 MiB budget, per poll interval (disk.POLL). starve: each case with and without
tests/sandbox_leftovers.cpu_hogs. The load average is printed with every figure.
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
from textwrap import dedent

from exactgrade.sandbox import Limits, Sandbox, SandboxDied, calltime, disk

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from sandbox_leftovers import cpu_hogs  # noqa: E402  (the tests' hogs: one definition)

MiB = 1 << 20


def load() -> str:
    return "load " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def cost(backend: str, rounds: int) -> None:
    """Median round trip of execute_code('pass') with the checks on and off, with n files in the work dir;
    and the host thread's CPU per second while a call waits (the polls)."""
    for files in (0, 100, 1000):
        with Sandbox(backend=backend) as sb:
            sb.execute_code(f"for i in range({files}):\n    open(f'f{{i}}', 'wb').write(b'x' * 4096)")
            clock, budget = sb._clock, sb._disk
            on, off = [], []
            for _ in range(rounds):
                for checks, times in ((True, on), (False, off)):
                    sb._clock, sb._disk = (clock, budget) if checks else (calltime.Clock(), None)
                    started = time.perf_counter()
                    sb.execute_code("pass")
                    times.append(time.perf_counter() - started)
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
              f"x{with_checks / without:.2f}); host CPU while a call waits: on "
              f"{waits[True] * 1e3:.2f} ms/s, off {waits[False] * 1e3:.2f} ms/s [{clock.source}; {load()}]")


FILL = dedent("""
    chunk = b'x' * (1 << 20)
    i = 0
    while True:
        with open(f'f{i}', 'wb') as f:
            for _ in range(16):
                f.write(chunk)
        i += 1
""")
HELD = dedent("""
    import os
    chunk, held, i = b'x' * (1 << 20), [], 0
    while True:
        f = open(f'h{i}', 'wb')
        for _ in range(16):
            f.write(chunk)
        f.flush()
        os.unlink(f'h{i}')
        held.append(f)
        i += 1
""")


def overshoot(backend: str, rounds: int) -> None:
    limits = Limits(memory_bytes=512 * MiB, disk_bytes=64 * MiB, max_file_bytes=32 * MiB, call_timeout=60)
    for poll in (0.01, 0.05, 0.1, 0.2):
        disk.POLL = poll
        for name, code in (("16 MiB files", FILL), ("deleted, held open", HELD)):
            seen = []
            for _ in range(rounds):
                with Sandbox(backend=backend, limits=limits) as sb:
                    try:
                        sb.execute_code(code)
                    except SandboxDied as died:
                        found = re.search(r"held (\d+) bytes", died.death.evidence)
                        seen.append(int(found.group(1)) - limits.disk_bytes if found else 0)
            print(f"{backend} POLL={poll:g} s, {name}: overshoot at the kill median "
                  f"{statistics.median(seen) / MiB:.1f} MiB, max {max(seen) / MiB:.1f} MiB over "
                  f"{rounds} runs (budget 64 MiB; {load()})")


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
    args = parser.parse_args()
    rounds = args.rounds or {"cost": 200, "overshoot": 5, "starve": 1}[args.what]
    if args.what == "starve":
        starve(args.backend, rounds, not args.no_cgroups)
    else:
        {"cost": cost, "overshoot": overshoot}[args.what](args.backend, rounds)


if __name__ == "__main__":
    main()
