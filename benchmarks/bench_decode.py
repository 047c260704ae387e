"""wire.decode on the worst 1 MiB payloads of each shape, against json.loads of the same text.

decode is the door from the sandbox: whatever shape a hostile answer takes, its cost must stay
a small multiple of parsing the JSON at all. Each shape is built just under 1 MiB (MAX_BYTES),
plain and "tagged" (the same with one Fraction appended, so that no shortcut applies); the
baseline is json.loads of the same text in the same run. CPU seconds, best of --repeat.

    python benchmarks/bench_decode.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

from exactgrade import wire

TAG = '{"$frac":"1/3"}'


def filled(item: str, *, budget: int = wire.MAX_BYTES - len(TAG) - 8) -> str:
    """A JSON list of copies of item, as long as fits in budget bytes."""
    return "[" + ",".join([item] * ((budget - 2) // (len(item) + 1))) + "]"


SHAPES: dict[str, str] = {
    "62-deep nested empty lists": filled("[" * 61 + "]" * 61),
    "empty lists": filled("[]"),
    "empty dicts": filled("{}"),
    "one-key dicts": filled('{"a":0}'),
    "small ints": filled("1"),
    "floats": filled("0.5"),
    "empty strings": filled('""'),
    "escaped quotes in strings": filled('"' + '\\"' * 100 + '"'),
    "fractions": filled(TAG),
    "sympy nodes": filled('{"$sym":["Add",["pi"],["E"]]}'),
    "escaped dollar keys": filled('{"$$a":1}'),
}


def tagged(text: str) -> str:
    return text[:-1] + "," + TAG + "]" if text != "[]" else f"[{TAG}]"


def cpu_seconds(work: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        work()
        best = min(best, time.process_time() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{'shape':<30}{'variant':>8}{'bytes':>9}{'json.loads s':>14}{'decode s':>10}{'ratio':>7}")
    worst = 0.0
    for name, plain in SHAPES.items():
        for variant, text in (("plain", plain), ("tagged", tagged(plain))):
            assert len(text.encode()) <= wire.MAX_BYTES, name
            wire.decode(text)  # valid: a refusal would be cheap and prove nothing
            baseline = cpu_seconds(lambda text=text: json.loads(text), args.repeat)
            decode = cpu_seconds(lambda text=text: wire.decode(text), args.repeat)
            worst = max(worst, decode)
            ratio = decode / baseline
            print(f"{name:<30}{variant:>8}{len(text):>9}{baseline:>14.3f}{decode:>10.3f}{ratio:>7.1f}")
    print(f"\nslowest decode of a 1 MiB payload: {worst:.3f} CPU-s")


if __name__ == "__main__":
    main()
