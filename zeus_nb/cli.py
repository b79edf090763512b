"""The ``zeus-nb`` command line.

Each sub-command lives in its own module under :mod:`zeus_nb.commands` and exposes
``register(subparsers)``; modules are discovered, so adding a command touches no other file.
Command modules import heavy libraries inside their handlers only, to keep start-up fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys

from zeus_nb import __version__, commands
from zeus_nb.errors import ZeusNbError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="zeus-nb",
        description="Measure and optimize the GPU energy of deep-learning training.",
    )
    parser.add_argument("--version", action="version", version=f"zeus-nb {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{commands.__name__}.{info.name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ZeusNbError, FileNotFoundError, ValueError) as e:
        print(f"zeus-nb: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("zeus-nb: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`zeus-nb ... | head`): stop quietly, as Unix tools do, and point
        # stdout at /dev/null so the interpreter's final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
