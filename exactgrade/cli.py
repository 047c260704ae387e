"""`python -m exactgrade <command>`: one module per command.

Each command module exposes HELP (one line), add_arguments(parser) and run(args) -> exit
code, and keeps heavy imports inside run() so that --help stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS: dict[str, str] = {
    "demo": "exactgrade.demo",
    "verify": "exactgrade.verify",
    "build": "exactgrade.dataset",
    "doctor": "exactgrade.sandbox.doctor",
    "policy-server": "exactgrade.scripted.server",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m exactgrade",
        description="Exact grading engine and RL environments for quantitative deep learning.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(module_name)
        command = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(command)
        command.set_defaults(run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
