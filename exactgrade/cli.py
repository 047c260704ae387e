"""`python -m exactgrade <command>`: one module per command.

Each command module exposes HELP (one line), add_arguments(parser) and run(args) -> exit
code, and keeps heavy imports inside run() so that --help stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import NoReturn

from exactgrade._version import __version__

COMMANDS: dict[str, str] = {
    "demo": "exactgrade.demo",
    "verify": "exactgrade.verify",
    "build": "exactgrade.build",
    "doctor": "exactgrade.sandbox.doctor",
    "policy-server": "exactgrade.scripted.server",
    "calibrate": "exactgrade.calibrate",
}


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line on stderr (exit status 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="python -m exactgrade",
        description="Exact grading engine and RL environments for quantitative deep learning.",
    )
    parser.add_argument("--version", action="version", version=f"exactgrade {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(module_name)
        command = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(command)
        command.set_defaults(run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command. An OSError (an unwritable output path, a port in use) ends it with one
    line on stderr and exit status 1: the arguments were checked, the machine said no. Ctrl-C
    ends it with one line and status 130 (the shell's 128 + SIGINT) once the command's own
    cleanup (context managers, child processes) has run."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except OSError as error:
        where = f": {error.filename}" if error.filename is not None else ""
        print(f"{parser.prog} {args.command}: error: {error.strerror or error}{where}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{parser.prog} {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
