"""The cost and the effect of the size-scaled agreement of the symbolic point test (issue 27 item 5),
before and after in one run.

"before" is exactgrade/_symbolic.py as it is at a git revision (default: main), loaded as a module
of its own; "after" is the working tree's. Both grade the same pairs through exactgrade.compare (the
module compare consults is swapped chunk by chunk, so load from other jobs falls on both alike):

1. bench_compare's symbolic pairs (its second table: rational and elementary rewrites and
   mutations, math-verify's issue pairs), each timed on its own: decode both wires + compare.
   Reported: agreement with the mathematical truth, mean and median time per pair, the ratio.
2. The blind-spot answers of issue 27 and their relatives, each graded GRADES times by each:
   how many of those gradings pass (every one is wrong, so every pass is a false pass).

    python benchmarks/bench_symbolic_bound.py [--symbolic-pairs 2000] [--grades 20] [--before main]
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import sympy

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_compare  # noqa: E402  (a sibling script, not a package)

from exactgrade import Exact, compare  # noqa: E402

COMPARE = importlib.import_module("exactgrade.compare")  # the module (exactgrade.compare is the function)

ROOT = Path(__file__).resolve().parent.parent
X = sympy.Symbol("x")
T = sympy.Symbol("t", positive=True)
P = sympy.Symbol("p", positive=True, integer=True)


def unevaluated(function: Any, *args: Any) -> Any:
    return function(*args, evaluate=False)


TWO_300 = unevaluated(sympy.Pow, 2, 300)

# (name, key, wrong answer): every answer differs from its key as a function.
BLIND_SPOTS = [
    ("sin(x) + 2**-300", sympy.sin(X), sympy.sin(X) + sympy.Rational(1, 2**300)),
    ("p/(p+1) + 2**(-p-200)", P / (P + 1), P / (P + 1) + 2 ** (-P - 200)),
    ("sqrt(t + 2**-500)", sympy.sqrt(T), sympy.sqrt(T + sympy.Rational(1, 2**500))),
    ("x/7 + exp(-10**6*x**2)", X / 7, X / 7 + sympy.exp(-(10**6) * X**2)),
    ("x/7 + exp(-(x-40)**2)", X / 7, X / 7 + sympy.exp(-((X - 40) ** 2))),
    ("x*log(2**300+1)/log(2**300)", X,
     X * unevaluated(sympy.Mul, sympy.log(unevaluated(sympy.Add, TWO_300, 1)),
                     unevaluated(sympy.Pow, sympy.log(TWO_300), -1))),
    ("x*2*atan(2**300)/pi", X, X * unevaluated(sympy.Mul, 2, sympy.atan(TWO_300), 1 / sympy.pi)),
    ("x*tanh(100)", X, X * sympy.tanh(100)),
    ("sin(x) + sqrt(2**600+1) - 2**300", sympy.sin(X),
     unevaluated(sympy.Add, sympy.sin(X),
                 sympy.sqrt(unevaluated(sympy.Add, unevaluated(sympy.Pow, 2, 600), 1)), -TWO_300)),
]


def module_at(revision: str) -> ModuleType:
    """exactgrade/_symbolic.py at a git revision, as a module of its own (it imports the working
    tree's exactgrade._real and wire, which it uses unchanged)."""
    source = subprocess.run(["git", "show", f"{revision}:exactgrade/_symbolic.py"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    spec = importlib.util.spec_from_loader("exactgrade._symbolic_before", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    exec(compile(source, f"{revision}:exactgrade/_symbolic.py", "exec"), module.__dict__)  # our own file
    return module


Timings = dict[str, list[tuple[float, bool]]]


def timed(modules: dict[str, ModuleType], pairs: list[Any], chunk: int) -> Timings:
    results: Timings = {name: [] for name in modules}
    for start in range(0, len(pairs), chunk):
        for name, module in modules.items():
            COMPARE._symbolic = module  # type: ignore[attr-defined]
            results[name] += bench_compare.grade_exactgrade(pairs[start:start + chunk])
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--symbolic-pairs", type=int, default=2000)
    parser.add_argument("--grades", type=int, default=20)
    parser.add_argument("--before", default="main", help="git revision of the 'before' _symbolic.py")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--chunk", type=int, default=100)
    args = parser.parse_args()

    after = COMPARE._symbolic  # type: ignore[attr-defined]
    modules = {"before": module_at(args.before), "after": after}
    pairs = bench_compare.make_symbolic_pairs(args.symbolic_pairs, args.seed)
    timed(modules, bench_compare.make_symbolic_pairs(40, args.seed + 1), 20)  # warm-up (prover worker)
    results = timed(modules, pairs, args.chunk)

    print(f"\n{len(pairs)} symbolic pairs of bench_compare (seed {args.seed}), before = {args.before}\n")
    print(f"{'':<8}{'agree':>7}{'mean ms':>10}{'median ms':>11}{'p99 ms':>9}")
    means = {}
    for name, rows in results.items():
        seconds = sorted(s for s, _ in rows)
        agree = sum(ok == p.correct for p, (_, ok) in zip(pairs, rows, strict=True))
        means[name] = statistics.fmean(seconds)
        print(f"{name:<8}{agree:>7}{1e3 * means[name]:>10.3f}{1e3 * statistics.median(seconds):>11.3f}"
              f"{1e3 * seconds[int(0.99 * (len(seconds) - 1))]:>9.3f}")
    print(f"\nafter / before, mean time per pair: {means['after'] / means['before']:.2f}x")

    print(f"\nwrong answers, passes out of {args.grades} gradings each (each a false pass)\n")
    print(f"{'answer':<36}{'before':>8}{'after':>8}{'after ms':>10}")
    for name, key, answer in BLIND_SPOTS:
        counts, elapsed = {}, 0.0
        for label, module in modules.items():
            COMPARE._symbolic = module  # type: ignore[attr-defined]
            started = time.perf_counter()
            counts[label] = sum(compare(key, answer, Exact()).ok for _ in range(args.grades))
            elapsed = time.perf_counter() - started
        print(f"{name:<36}{counts['before']:>8}{counts['after']:>8}{1e3 * elapsed / args.grades:>10.1f}")
    COMPARE._symbolic = after  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
