"""`python -m exactgrade build --out DIR`: write the datasets, canonical (exactgrade.dataset) or
generated (`--generated N`, exactgrade.dataset_generated), one per domain."""

from __future__ import annotations

import argparse
from collections import Counter

from exactgrade.cli_args import writable_dir
from exactgrade.dataset import COLUMNS, build_domain
from exactgrade.dataset_generated import build_generated_domain
from exactgrade.task import DOMAINS, TORCH_INSTALL_HINT

HELP = "build the Hugging Face datasets (one per domain, with dataset cards) into a directory"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Materialise every task (running its reference solution) and write one Hugging Face "
        "dataset per domain to OUT/<domain>/: train.jsonl (columns " + ", ".join(COLUMNS) + ") and "
        "a README.md dataset card. The output is byte-for-byte reproducible. "
        "`--out exactgrade/data` refreshes the datasets shipped in the package."
    )
    parser.add_argument("--out", required=True, type=writable_dir, metavar="DIR",
                        help="output directory (created if missing)")
    parser.add_argument("--domain", choices=sorted(DOMAINS), action="append",
                        help="build only this domain (repeatable; default: all)")
    from exactgrade.verify import add_generation_arguments

    add_generation_arguments(parser, "write N generated tasks per family per level (with columns family, "
                                     "level, seed, index) instead of the canonical tasks")


def run(args: argparse.Namespace) -> int:
    from exactgrade.console import Progress
    from exactgrade.family import families
    from exactgrade.task import domain_module, task_defs

    status = 0
    for domain in args.domain or list(DOMAINS):
        try:
            if domain_module(domain).PROFILE == "torch":
                import torch  # noqa: F401
        except ImportError as error:
            hint = f"; install it with: {TORCH_INSTALL_HINT}" if "torch" in str(error) else ""
            print(f"{domain}: NOT BUILT: {error}{hint}")
            status = 1
            continue
        generated = args.generated is not None
        rows = (args.generated * len(args.levels) * len(families(domain)) if generated
                else len(task_defs(domain)))
        (args.out / domain).mkdir(parents=True, exist_ok=True)  # fails before any work or progress line
        with Progress(f"build {domain}", rows) as bar:
            if generated:
                module = domain_module(domain)
                environment = dict(module.environment()) if hasattr(module, "environment") else {}
                built = build_generated_domain(domain, args.out, args.generated, args.seed, args.levels,
                                               environment, bar.advance)
            else:
                built = build_domain(domain, args.out, bar.advance)
        counts = Counter(t.category for t in built)
        print(f"{domain}: wrote {len(built)} rows to {args.out / domain} "
              f"({', '.join(f'{c} {n}' for c, n in counts.items())})")
    return status
