#!/usr/bin/env python
"""Hashes of the generated streams and the canonical datasets: proof that a refactoring moved code
without changing a single task.

  python tools/stream_hashes.py show  [--n N] [--domain D ...]        print the hashes
  python tools/stream_hashes.py write FILE [--n N] [--domain D ...]  record them as JSON
  python tools/stream_hashes.py check FILE [--domain D ...]          recompute, compare (exit 1 on change)

One line per (family, level): the SHA-256 of the first N instances of the stream (seed 0), each as
its dataset row (``exactgrade.dataset.task_row``: prompt, api_description, inputs, expected output,
policy) plus its tags, zero_reason, family, level, seed and index: what a user sees and grades. The
reference program's text is left out: a family may reorganise its references (one per question,
helpers written once) without changing any task. One line per
domain for its built canonical dataset (``train.jsonl`` and the ``README.md`` card, as
``python -m exactgrade build`` writes them). A domain's total hashes its lines in order, so it
changes when a family is added, removed or reordered. ``check`` reads N from the file.

The torch keys hold floats from the CPU's kernels (exactgrade.dataset, "On another CPU"), so the
pytorch hashes are comparable only between runs on one machine: record and check on the same one.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from exactgrade.dataset import build_domain, task_row
from exactgrade.family import LEVELS, families, generate
from exactgrade.task import DOMAINS, Task

DEFAULT_N = 3
"""Instances hashed per (family, level): every level of every family, at a cost of minutes."""
SEED = 0


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def instance_text(task: Task) -> str:
    """Everything of a generated task that a host or a grader sees, as one canonical JSON text."""
    record = {
        **task_row(task),
        "tags": list(task.tags),
        "zero_reason": task.zero_reason,
        "family": task.family,
        "level": task.level,
        "seed": task.seed,
        "index": task.index,
    }
    return json.dumps(record, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def stream_hash(domain: str, family: str, level: int, n: int) -> str:
    """The hash of the first ``n`` instances of one (family, level) stream."""
    digest = hashlib.sha256()
    for index in range(n):
        digest.update(
            instance_text(generate(domain, seed=SEED, index=index, level=level, family=family)).encode()
        )
        digest.update(b"\n")
    return digest.hexdigest()


def canonical_hash(domain: str) -> str:
    """The hash of the domain's canonical dataset as the build command writes it."""
    with tempfile.TemporaryDirectory() as out:
        build_domain(domain, Path(out))
        files = sorted((Path(out) / domain).iterdir())
        return _sha("".join(f"{path.name}\n{_sha(path.read_text(encoding='utf-8'))}\n" for path in files))


def domain_lines(domain: str, n: int) -> Iterator[tuple[str, str]]:
    """(label, hash) of every (family, level) of the domain, then of its canonical dataset."""
    for family in families(domain):
        for level in LEVELS:
            yield f"{domain}/{family}/L{level}", stream_hash(domain, family, level, n)
    yield f"{domain}/canonical", canonical_hash(domain)


def compute(domains: Sequence[str], n: int) -> dict[str, dict[str, str]]:
    """Every line's hash, and each domain's total, printing each line as it is computed."""
    table: dict[str, dict[str, str]] = {}
    for domain in domains:
        lines: dict[str, str] = {}
        for label, value in domain_lines(domain, n):
            lines[label] = value
            print(f"{label:60} {value[:16]}", flush=True)
        lines[f"{domain}/total"] = _sha("".join(f"{k} {v}\n" for k, v in lines.items()))
        print(f"{domain + '/total':60} {lines[domain + '/total'][:16]}", flush=True)
        table[domain] = lines
    return table


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("show", "write", "check"))
    parser.add_argument("file", nargs="?", type=Path, help="the JSON of hashes (write, check)")
    parser.add_argument(
        "--n", type=int, default=None, help=f"instances per (family, level) (default {DEFAULT_N})"
    )
    parser.add_argument(
        "--domain",
        choices=sorted(DOMAINS),
        action="append",
        help="only this domain (repeatable; default: all)",
    )
    args = parser.parse_args(argv)
    if args.action != "show" and args.file is None:
        parser.error(f"{args.action} needs FILE")
    if args.n is not None and args.n < 1:
        parser.error("--n must be at least 1")

    if args.action == "check":
        if args.n is not None:
            parser.error("check reads N from the file")
        recorded = json.loads(args.file.read_text(encoding="utf-8"))
        n = recorded["n"]
        domains = args.domain or list(recorded["domains"])
        missing = [d for d in domains if d not in recorded["domains"]]
        if missing:
            print(f"{args.file} records no hashes for {', '.join(missing)}")
            return 1
        fresh = compute(domains, n)
        changed = [
            label
            for d in domains
            for label, value in fresh[d].items()
            if recorded["domains"][d].get(label) != value
        ]
        changed += [label for d in domains for label in recorded["domains"][d] if label not in fresh[d]]
        for label in changed:
            print(f"CHANGED {label}")
        print(
            f"{'IDENTICAL' if not changed else f'{len(changed)} lines changed'} ({', '.join(domains)}; n={n})"
        )
        return 1 if changed else 0

    n = args.n or DEFAULT_N
    domains = args.domain or list(DOMAINS)
    table = compute(domains, n)
    if args.action == "write":
        args.file.write_text(
            json.dumps({"n": n, "seed": SEED, "domains": table}, indent=1, sort_keys=True) + "\n",
            encoding="utf-8",
        )
        print(f"wrote {args.file}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
