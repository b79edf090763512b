"""The ``zeus-nb`` command line.

Each sub-command lives in its own module under :mod:`zeus_nb.commands` and exposes
``register(subparsers)``; modules are discovered, so adding a command touches no other file.
Command modules import heavy libraries inside their handlers only, to keep start-up fast.
Options are typed by :mod:`zeus_nb.inputs.args` and errors pass the one boundary of
:mod:`zeus_nb.utils.boundary`.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from zeus_nb import __version__, commands
from zeus_nb.inputs.args import Parser
from zeus_nb.utils.boundary import DEBUG_ENV, describe_os_error, run_main

__all__ = ["DEBUG_ENV", "build_parser", "describe_os_error", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="zeus-nb",
        description="Measure and optimize the GPU energy of deep-learning training.",
    )
    parser.add_argument("--version", action="version", version=f"zeus-nb {__version__}")
    parser.add_argument(
        "--debug",
        action="store_true",
        help=f"show the full traceback of an error (also: {DEBUG_ENV}=1)",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{commands.__name__}.{info.name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command. A user's mistake (our own errors, a bad path) is one line and exit 2;
    ``--debug`` or ``ZEUS_NB_DEBUG=1`` shows the traceback instead."""

    def run(args: list[str]) -> int | None:
        ns = build_parser().parse_args(args)
        return ns.func(ns)

    return run_main("zeus-nb", run, argv)


if __name__ == "__main__":
    sys.exit(main())
