"""The pytorch task families, measured: generation speed, confirmation, rejections and variety.

- speed: tasks/s (CPU time of this process, so on one core) of the mixed stream of all families at
  each level, without the domain check (``build_instance(..., checked=False)``) and with it (the
  independent confirmation and clean re-run), beside the baseline of the same run: materialising
  the 45 canonical tasks (reference run + prompt) afresh. Each level starts with a warm-up instance
  per family (its program compiled, its torch kernels called once); the timed tasks are others.
- confirm: N instances per family and level, each independently confirmed within half the
  tolerance (the largest share used is printed), with the number of draws each took and the most
  common rejection reasons (the generator's loop replayed, draw by draw).
- variety: distinct keys among N consecutive indices per family, at the given levels (built without
  the domain check, for speed: the check rarely rejects, so the stream is almost the same).

    python benchmarks/measure_pytorch_families.py speed [--tasks 480] [--levels 1-5]
    python benchmarks/measure_pytorch_families.py confirm [--tasks 10] [--families a,b]
    python benchmarks/measure_pytorch_families.py variety [--tasks 200] [--levels 2-5]
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections import Counter

from exactgrade import family, wire
from exactgrade.domains import pytorch
from exactgrade.domains.pytorch.checks import independent_check
from exactgrade.task import Task, materialise


def _levels(text: str) -> list[int]:
    low, _, high = text.partition("-")
    return list(range(int(low), int(high or low) + 1))


def speed(tasks: int, levels: list[int]) -> None:
    names = [f.name for f in pytorch.FAMILIES]
    for _ in range(2):  # the first pass warms up, the second is timed
        start = time.process_time()
        for definition in pytorch.TASKS:
            materialise(definition, "pytorch", pytorch.PROFILE)
    baseline = len(pytorch.TASKS) / (time.process_time() - start)
    print(f"baseline: {baseline:.1f} canonical tasks/s materialised ({len(pytorch.TASKS)} tasks)")
    for level in levels:
        for name in names:  # warm-up: each family's program compiled and its torch ops called once
            family.build_instance("pytorch", name, level, 99, 0)
        rates = []
        for seed, checked in ((7, False), (8, True)):
            start = time.process_time()
            for i in range(tasks):
                family.build_instance("pytorch", names[i % len(names)], level, seed, i // len(names),
                                      checked=checked)
            rates.append(tasks / (time.process_time() - start))
        print(f"level {level}: {rates[0]:.1f} tasks/s without the check ({rates[0] / baseline:.2f}x the "
              f"baseline), {rates[1]:.1f} tasks/s confirmed ({tasks} tasks each)", flush=True)


def _replay(fam: family.Family, level: int, index: int, reasons: Counter[str]) -> tuple[int, Task]:
    """The generator's loop for one instance, replayed draw by draw: the draws it took and the task
    it accepts (the same as build_instance's), counting why each earlier draw failed."""
    canonical = {wire.encode(dict(d.inputs)) for d in pytorch.TASKS}
    task_id = family.generated_id("pytorch", fam.name, level, 0, index)
    for attempt in range(family.MAX_ATTEMPTS):
        draw = family.Draw(f"{family.STREAM_VERSION}|pytorch|{fam.name}|0|{index}|{level}|{attempt}")
        try:
            inputs = dict(fam.sample(draw, level))
        except family.Reject as reason:
            reasons[f"{fam.name}: {str(reason)[:70]}"] += 1
            continue
        if wire.encode(inputs) in canonical:
            reasons[f"{fam.name}: canonical inputs"] += 1
            continue
        definition = dataclasses.replace(fam.task(task_id, inputs), level=level, seed=0, index=index)
        task = materialise(definition, "pytorch", pytorch.PROFILE)
        problem = fam.reject(task) or "; ".join(pytorch.check(task)) or None
        if problem is None:
            return attempt + 1, task
        reasons[f"{fam.name}: {problem[:70]}"] += 1
    raise family.GenerationError(f"{fam.name} level {level} index {index}: no instance")


def confirm(tasks: int, only: list[str] | None) -> None:
    reasons: Counter[str] = Counter()
    total = 0
    for fam in pytorch.FAMILIES:
        if only and fam.name not in only:
            continue
        draws, used = 0, 0.0
        for level in family.LEVELS:
            for index in range(tasks):
                count, task = _replay(fam, level, index, reasons)
                if index == 0:  # the replay is the generator's loop: it accepts the same instance
                    generated = family.build_instance("pytorch", fam.name, level, 0, index)
                    if wire.encode(generated.expected) != wire.encode(task.expected):
                        raise AssertionError(f"{task.id}: the replay accepted another instance")
                result = independent_check(task)
                if result.problems:
                    raise AssertionError(f"{task.id}: {result.problems}")
                used = max(used, float(result.used))
                draws += count
                total += 1
        print(f"{fam.name:28s} {draws / (len(family.LEVELS) * tasks):5.2f} draws per instance, "
              f"largest key error {used:.2%} of the tolerance", flush=True)
    print(f"independently confirmed: {total}/{total}")
    for reason, count in reasons.most_common(25):
        print(f"{count:5d} rejections  {reason}")


def variety(tasks: int, levels: list[int]) -> None:
    worst = 1.0
    for fam in pytorch.FAMILIES:
        for level in levels:
            built = [family.build_instance("pytorch", fam.name, level, 0, i, checked=False)
                     for i in range(tasks)]
            keys = {wire.encode(task.expected) for task in built}
            worst = min(worst, len(keys) / tasks)
            print(f"{fam.name:28s} level {level}: {len(keys)}/{tasks} distinct keys", flush=True)
    print(f"fewest distinct keys: {worst:.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("speed", "confirm", "variety"))
    parser.add_argument("--tasks", type=int)
    parser.add_argument("--levels")
    parser.add_argument("--families", help="comma-separated family names (confirm only; default: all)")
    args = parser.parse_args()
    if args.mode == "speed":
        speed(args.tasks or 480, _levels(args.levels or "1-5"))
    elif args.mode == "confirm":
        confirm(args.tasks or 10, args.families.split(",") if args.families else None)
    else:
        variety(args.tasks or 200, _levels(args.levels or "2-5"))


if __name__ == "__main__":
    main()
