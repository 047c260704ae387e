"""Text answers: exactgrade.text against math-verify 0.9.0 on math-verify's own labelled pairs.

The pairs are math-verify's own test tables (benchmarks/data/math_verify_pairs.json, written by
benchmarks/extract_math_verify_pairs.py from huggingface/Math-Verify, Apache-2.0): a gold text,
a prediction text and the label its tests assert. In the same run, each pair is graded

- by math-verify as its own test does: parse(gold) + parse(pred) + verify(...) with the test's
  extraction targets and options (math-verify's default signal timeouts, main thread);
- by exactgrade: grade_text(pred, key, Exact()), where the key is read once from the gold text
  by exactgrade.text.read_key (outside the timed region, as an engine holds its keys): the
  gold's answer (its last box, or
  the whole line) read as a number/expression with every single letter that is not a constant
  declared as a symbol (no assumptions: graded over the reals; a longer word is no symbol), or
  as a list of those, or as a category word. A gold that
  is none of these (an interval, a set, an equation, a matrix, an inequality) is no engine key:
  the pair is "out of scope" and counted as a refusal (a fail) in every total.

Reported: agreement with the labels, false passes and false fails of each, the disagreements by
cause, pairs/s of each (math-verify also with the gold pre-parsed), and 8 threads grading the
whole set at once: exactgrade with a per-call time limit; math-verify in threads only with its
timeouts off (its signal timeouts raise in a worker thread, shown).

    python benchmarks/bench_text.py [--repeat 3] [--threads 8] [--disagreements]
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exactgrade import Exact, extract_answer, grade_text
from exactgrade.text import read_key

DATA = Path(__file__).parent / "data" / "math_verify_pairs.json"
TIME_LIMIT = 5.0


@dataclass(frozen=True)
class Pair:
    test: str
    gold: str
    pred: str
    label: bool
    options: dict[str, Any]


def load_pairs() -> list[Pair]:
    rows = json.loads(DATA.read_text())["pairs"]
    keys = ("match_types", "precision", "strict", "allow_set_relation_comp")
    return [
        Pair(r["test"], r["gold"], r["pred"], bool(r["expected"]), {k: r[k] for k in keys if k in r})
        for r in rows
    ]


# ---------------------------------------------------------------------------------------------
# exactgrade: the key read from the gold


def gold_key(gold: str) -> tuple[Any, str]:
    """(key, "") or (None, why the gold is not an engine key): exactgrade.text.read_key."""
    parsed = read_key(gold)
    return parsed.value, parsed.reason


def ours(pair: Pair, key: Any, time_limit: float = TIME_LIMIT) -> tuple[bool, str]:
    if key is None:
        return False, "out of scope"
    verdict = grade_text(pair.pred, key, Exact(), time_limit=time_limit)
    return verdict.ok, verdict.reason


# ---------------------------------------------------------------------------------------------
# math-verify, as its own tests call it


def math_verify_targets(pair: Pair) -> Any:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig

    kinds = pair.options.get("match_types", ["latex", "expr"])
    if kinds == ["parse-default"]:
        return None
    return [
        LatexExtractionConfig(boxed_match_priority=0) if k == "latex" else ExprExtractionConfig()
        for k in kinds
    ]


def theirs(pair: Pair, targets: Any, gold_parsed: Any = None, timeouts: bool = True) -> bool:
    from math_verify import parse, verify

    extra = {} if timeouts else {"parsing_timeout": None}
    gold = (
        gold_parsed
        if gold_parsed is not None
        else (parse(pair.gold, **extra) if targets is None else parse(pair.gold, targets, **extra))
    )
    pred = parse(pair.pred, **extra) if targets is None else parse(pair.pred, targets, **extra)
    if targets is None:
        return bool(verify(gold, pred, **({} if timeouts else {"timeout_seconds": None})))
    options = {
        "float_rounding": pair.options.get("precision", 6),
        "strict": pair.options.get("strict", True),
        "allow_set_relation_comp": pair.options.get("allow_set_relation_comp", False),
    }
    if not timeouts:
        options["timeout_seconds"] = None
    return bool(verify(gold, pred, **options))


# ---------------------------------------------------------------------------------------------


def tally(pairs: list[Pair], verdicts: list[bool]) -> dict[str, int]:
    agree = sum(v == p.label for p, v in zip(pairs, verdicts, strict=True))
    false_pass = sum(v and not p.label for p, v in zip(pairs, verdicts, strict=True))
    false_fail = sum(p.label and not v for p, v in zip(pairs, verdicts, strict=True))
    return {"agree": agree, "false_pass": false_pass, "false_fail": false_fail}


def cause(reason: str) -> str:
    """A short class of exactgrade's reason, for the disagreement table."""
    for prefix, name in (
        ("out of scope", "gold is not an engine value (set, interval, equation, ...)"),
        ("no answer: no \\boxed", "prediction is prose with no box (strict extraction)"),
        ("no answer", "extraction refused"),
        ("unreadable answer", "prediction unreadable"),
        ("value", "values differ"),
    ):
        if reason.startswith(prefix):
            return name
    return "other"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument(
        "--disagreements", action="store_true", help="print every pair where we differ from the label"
    )
    args = parser.parse_args()

    pairs = load_pairs()
    keys = [gold_key(p.gold) for p in pairs]
    targets = [math_verify_targets(p) for p in pairs]
    # warm-up: imports, sympy, the prover worker
    for pair, (key, _), target in list(zip(pairs, keys, targets, strict=True))[:20]:
        ours(pair, key)
        theirs(pair, target)

    our_results = [ours(p, k) for p, (k, _) in zip(pairs, keys, strict=True)]
    their_results = [theirs(p, t) for p, t in zip(pairs, targets, strict=True)]
    from math_verify import parse

    gold_parsed = [
        parse(p.gold) if t is None else parse(p.gold, t) for p, t in zip(pairs, targets, strict=True)
    ]

    graders = {
        "exactgrade": lambda i: ours(pairs[i], keys[i][0]),
        "math-verify": lambda i: theirs(pairs[i], targets[i]),
        "math-verify (gold pre-parsed)": lambda i: theirs(pairs[i], targets[i], gold_parsed[i]),
    }
    samples: dict[str, list[float]] = {name: [] for name in graders}
    in_scope = [i for i, (k, _) in enumerate(keys) if k is not None]
    for _ in range(args.repeat):  # pair by pair, interleaved, so load from other jobs falls on all alike
        for index in in_scope:  # the pairs both grade (an out-of-scope pair costs exactgrade nothing)
            for name, grade in graders.items():
                start = time.perf_counter()
                grade(index)
                samples[name].append(time.perf_counter() - start)
    rates = {name: len(times) / sum(times) for name, times in samples.items()}  # pairs/s on those pairs
    print(
        f"Time per pair over the {len(in_scope)} pairs whose gold is an engine key, {args.repeat} passes:\n"
    )
    print("| grader | mean ms/pair | median ms | p99 ms | max ms |\n|---|---|---|---|---|")
    for name, times in samples.items():
        ordered = sorted(times)
        print(
            f"| {name} | {1000 * sum(times) / len(times):.3f} | {1000 * ordered[len(ordered) // 2]:.3f} | "
            f"{1000 * ordered[int(len(ordered) * 0.99)]:.2f} | {1000 * ordered[-1]:.1f} |"
        )
    print()

    print(
        f"{len(pairs)} pairs ({sum(p.label for p in pairs)} labelled equal), {len(in_scope)} with a gold "
        f"that is an engine key; {args.repeat} timed passes\n"
    )
    print("| grader | agree with label | false passes | false fails | agree (in scope) | pairs/s |")
    print("|---|---|---|---|---|---|")
    for name, results in (("exactgrade", [ok for ok, _ in our_results]), ("math-verify", their_results)):
        whole = tally(pairs, results)
        scoped = tally([pairs[i] for i in in_scope], [results[i] for i in in_scope])
        print(
            f"| {name} | {whole['agree']}/{len(pairs)} | {whole['false_pass']} | {whole['false_fail']} | "
            f"{scoped['agree']}/{len(in_scope)} | {rates[name]:.0f} |"
        )
    print(f"| math-verify, gold pre-parsed | | | | | {rates['math-verify (gold pre-parsed)']:.0f} |")
    answered = [i for i in in_scope if extract_answer(pairs[i].pred).ok]
    for name, results in (("exactgrade", [ok for ok, _ in our_results]), ("math-verify", their_results)):
        scoped = tally([pairs[i] for i in answered], [results[i] for i in answered])
        print(
            f"| {name}, gold a key and the prediction boxed or a bare answer line | "
            f"{scoped['agree']}/{len(answered)} | {scoped['false_pass']} | {scoped['false_fail']} | | |"
        )
    medians = {name: sorted(times)[len(times) // 2] for name, times in samples.items()}
    print(
        f"\nspeed ratio exactgrade / math-verify: {rates['exactgrade'] / rates['math-verify']:.1f}x in "
        f"pairs/s, {medians['math-verify'] / medians['exactgrade']:.1f}x in median time per pair "
        f"({rates['exactgrade'] / rates['math-verify (gold pre-parsed)']:.1f}x and "
        f"{medians['math-verify (gold pre-parsed)'] / medians['exactgrade']:.1f}x against the gold "
        "pre-parsed)"
    )

    causes = Counter()
    for pair, (ok, reason), mv in zip(pairs, our_results, their_results, strict=True):
        if ok != pair.label:
            causes[
                (
                    ("false pass" if ok else "false fail"),
                    cause(reason),
                    "math-verify right" if mv == pair.label else "math-verify wrong too",
                )
            ] += 1
    print("\nexactgrade's disagreements with the labels, by cause:\n")
    print("| kind | cause | count | math-verify on the same pairs |")
    print("|---|---|---|---|")
    for (kind, why, mv), count in sorted(causes.items()):
        print(f"| {kind} | {why} | {count} | {mv} |")
    mv_wrong = [
        (p, ok) for p, mv, (ok, _) in zip(pairs, their_results, our_results, strict=True) if mv != p.label
    ]
    print(
        f"\nmath-verify's own disagreements: {len(mv_wrong)} (exactgrade agrees with the label on "
        f"{sum(ok == p.label for p, ok in mv_wrong)} of them)"
    )

    threaded(pairs, keys, targets, our_results, args.threads, args.repeat)
    if args.disagreements:
        print("\n| test | gold | pred | label | exactgrade | math-verify | exactgrade's reason |")
        print("|---|---|---|---|---|---|---|")
        for pair, (ok, reason), mv in zip(pairs, our_results, their_results, strict=True):
            if ok != pair.label or mv != pair.label:
                cell = [
                    pair.test,
                    pair.gold[:60],
                    pair.pred[:60],
                    int(pair.label),
                    int(ok),
                    int(mv),
                    reason[:110],
                ]
                print("| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cell) + " |")


def threaded(
    pairs: list[Pair],
    keys: list[tuple[Any, str]],
    targets: list[Any],
    single: list[tuple[bool, str]],
    threads: int,
    repeat: int,
) -> None:
    jobs = [(p, k) for p, (k, _) in zip(pairs, keys, strict=True)] * repeat
    with ThreadPoolExecutor(threads) as pool:
        start = time.perf_counter()
        results = list(pool.map(lambda job: ours(*job), jobs))
        ours_rate = len(jobs) / (time.perf_counter() - start)
    same = sum(r[0] == s[0] for r, s in zip(results, single * repeat, strict=True))
    with ThreadPoolExecutor(1) as pool:
        try:
            pool.submit(theirs, pairs[0], targets[0]).result()
            default = "works"
        except Exception as error:
            default = f"{type(error).__name__}: {str(error)[:90]}"
    mv_jobs = [(p, t) for p, t in zip(pairs, targets, strict=True)] * repeat
    with ThreadPoolExecutor(threads) as pool:
        start = time.perf_counter()
        list(pool.map(lambda job: theirs(job[0], job[1], None, False), mv_jobs))
        theirs_rate = len(mv_jobs) / (time.perf_counter() - start)
    print(f"\n{threads} threads at once, {len(jobs)} gradings each:")
    print(
        f"- exactgrade, {TIME_LIMIT} s limit per call: {ours_rate:.0f} pairs/s; verdicts equal to the "
        f"single-thread run: {same}/{len(jobs)}"
    )
    print(f"- math-verify in a worker thread with its default timeouts: {default}")
    print(f"- math-verify, timeouts off (no time limit at all): {theirs_rate:.0f} pairs/s")


if __name__ == "__main__":
    main()
