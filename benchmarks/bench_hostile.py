"""What hostile exact answers cost the grader, and whether they spend other rollouts' time.

The hostile values are those of tests/engine/test_compare.py: HOSTILE_THREE (3 plus twenty denested
radicals that are exactly zero: sympy needs about 9 s to give up on it) and LOGS_NEXT_TO_ONE
(330 logarithms that cancel, leaving a value exactly on the RelTol(1e-9) boundary of 1, which no
interval precision can decide). Three cases, CPU seconds of this process and its prover workers
(resource.getrusage) and wall seconds:

1. the 330 logarithms under RelTol(1e-9) with time_limit=1 (the bound: the limit itself, plus at
   most one interval operation);
2. HOSTILE_THREE alone under the default limit (5 s);
3. two HOSTILE_THREE rollouts and, half a second later, four correct answers that need a proof
   (log(2**k)/log(2) for k = 3..6), each compare in its own thread: how many correct ones pass.

    python benchmarks/bench_hostile.py
"""

from __future__ import annotations

import resource
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import sympy

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from test_compare import HOSTILE_THREE, LOGS_NEXT_TO_ONE  # noqa: E402  (the tests' own values)

from exactgrade import RelTol, Verdict, compare  # noqa: E402


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def measure(name: str, work: Callable[[], str]) -> None:
    cpu, wall = cpu_seconds(), time.monotonic()
    outcome = work()
    cpu, wall = cpu_seconds() - cpu, time.monotonic() - wall
    print(f"{name}\n  {cpu:.2f} CPU-s, {wall:.2f} s wall: {outcome}", flush=True)


def concurrent() -> str:
    verdicts: dict[str, Verdict] = {}

    def grade(name: str, expected: object, actual: object) -> None:
        verdicts[name] = compare(expected, actual)

    hostile = [threading.Thread(target=grade, args=(f"hostile {i}", 3, HOSTILE_THREE)) for i in range(2)]
    correct = [threading.Thread(target=grade, args=(f"correct {k}", k, sympy.log(2**k) / sympy.log(2)))
               for k in range(3, 7)]
    for thread in hostile:
        thread.start()
    time.sleep(0.5)
    for thread in correct:
        thread.start()
    for thread in hostile + correct:
        thread.join()
    passed = sum(verdicts[f"correct {k}"].ok for k in range(3, 7))
    return f"{passed}/4 correct answers pass; hostile: {verdicts['hostile 0'].reason[-70:]!r}"


def main() -> None:
    compare(3, sympy.log(8) / sympy.log(2))  # start a prover worker: startup is not what is measured
    measure("330 logarithms next to 1, RelTol(1e-9), time_limit=1",
            lambda: compare(1.0, LOGS_NEXT_TO_ONE, RelTol(1e-9), time_limit=1).reason[-60:])
    measure("a hostile exact answer alone, time_limit=5", lambda: compare(3, HOSTILE_THREE).reason[-70:])
    measure("2 hostile rollouts + 4 correct ones needing a proof, concurrently", concurrent)


if __name__ == "__main__":
    main()
