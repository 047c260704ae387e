"""How fast task families generate exactly keyed tasks, against canonical materialisation in the
same run.

Per domain (one process, one core):
- **baseline**: materialising the domain's canonical tasks (rendering + running the reference
  program in-process + the wire round trip), repeated for ``--seconds``; the cache of
  ``exactgrade.tasks`` is bypassed.
- **generated, level L**: ``build_instance`` for consecutive indices of every family in turn
  (round-robin, as the mixed stream does), uncached: sampling, every rejection draw,
  materialising the key, the family's discrimination rules (scaling: float twin passes, named
  mistake fails) and the domain's independent ``check()``. For pytorch the same with
  ``checked=False`` is reported too (generation without the independent confirmation), and the
  share of instances the confirmation accepted.
- **verify --generated**: the wall time of ``python -m exactgrade verify --generated N`` for the
  domain (fresh-process determinism included), when ``--verify N`` is given.

    python benchmarks/bench_generate.py [--domains scaling deeplearning pytorch] [--seconds 3]
                                        [--verify 20] [--cpu-time]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable

from exactgrade.family import LEVELS, build_instance, families
from exactgrade.task import DOMAINS, domain_module, materialise

CLOCK = time.perf_counter
"""What a rate is per: wall time, or this process's CPU time with --cpu-time (on a shared,
loaded machine, where wall time measures the other processes too)."""


def rate(work: Callable[[int], object], seconds: float) -> tuple[float, int]:
    """Calls per second of work(i) for i = 0, 1, ... over about ``seconds``."""
    done, started = 0, CLOCK()
    while True:
        work(done)
        done += 1
        elapsed = CLOCK() - started
        if elapsed >= seconds:
            return done / elapsed, done


def canonical_rate(domain: str, seconds: float) -> float:
    module = domain_module(domain)
    definitions = module.TASKS
    per_call, _ = rate(lambda i: materialise(definitions[i % len(definitions)], domain, module.PROFILE),
                       seconds)
    return per_call


def generated_rate(domain: str, level: int, seconds: float, checked: bool = True) -> tuple[float, int]:
    names = families(domain)
    offset = 10_000 * level + (0 if checked else 5_000)  # fresh indices: nothing comes from a cache

    def one(i: int) -> object:
        return build_instance(domain, names[i % len(names)], level, 0, offset + i // len(names),
                              checked=checked)

    return rate(one, seconds)


def confirmation_rate(domain: str, level: int, count: int) -> float:
    """Share of sampled instances (before the domain check) that the domain check accepts."""
    module = domain_module(domain)
    names = families(domain)
    accepted = 0
    for i in range(count):
        task = build_instance(domain, names[i % len(names)], level, 1, 20_000 + i // len(names),
                              checked=False)
        accepted += not module.check(task)
    return accepted / count


def verify_seconds(domain: str, count: int) -> float:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "exactgrade", "verify", "--generated", str(count),
                           "--domain", domain], capture_output=True, text=True)
    seconds = time.perf_counter() - started
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-200:]
    print(f"  verify --generated {count} --domain {domain}: {seconds:.1f} s ({last})")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--domains", nargs="+", choices=sorted(DOMAINS), default=list(DOMAINS))
    parser.add_argument("--seconds", type=float, default=3.0, help="time per measurement (default 3)")
    parser.add_argument("--verify", type=int, default=0, metavar="N",
                        help="also time `verify --generated N` per domain (default: skip)")
    parser.add_argument("--cpu-time", action="store_true",
                        help="rates per CPU second of this process, not per wall second (loaded machines)")
    args = parser.parse_args()
    if args.cpu_time:
        global CLOCK
        CLOCK = time.process_time
    for domain in args.domains:
        if not families(domain):
            print(f"{domain}: no families")
            continue
        module = domain_module(domain)
        for name in families(domain):  # imports (numpy, mpmath), caches of sources and programs: once
            build_instance(domain, name, 1, 0, 0)  # each, so that level 1 does not pay for them
        baseline = canonical_rate(domain, args.seconds)
        print(f"{domain}: {len(families(domain))} families; canonical materialisation {baseline:.0f} tasks/s")
        print("  level | generated tasks/s | / canonical" + (" | unchecked tasks/s | confirmed" if
                                                             module.PROFILE == "torch" else ""))
        for level in LEVELS:
            per_second, _ = generated_rate(domain, level, args.seconds)
            line = f"  {level}     | {per_second:17.0f} | {per_second / baseline:11.2f}"
            if module.PROFILE == "torch":
                unchecked, _ = generated_rate(domain, level, args.seconds, checked=False)
                confirmed = confirmation_rate(domain, level, 2 * len(families(domain)))
                line += f" | {unchecked:17.0f} | {confirmed:8.0%}"
            print(line)
        if args.verify:
            verify_seconds(domain, args.verify)


if __name__ == "__main__":
    main()
