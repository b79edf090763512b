"""The ``zeus-nb`` command line.

Each sub-command lives in its own module under :mod:`zeus_nb.commands` and exposes
``register(subparsers)``; modules are discovered, so adding a command touches no other file.
Command modules import heavy libraries inside their handlers only, to keep start-up fast.
"""

from __future__ import annotations

import argparse
import errno
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


DEBUG_ENV = "ZEUS_NB_DEBUG"

# What to do about the OS errors a user's own path choices cause, by errno.
_OS_ADVICE = {
    errno.EACCES: "check its permissions, or choose a path you can write to",
    errno.EPERM: "check its permissions, or choose a path you can write to",
    errno.EROFS: "that file system is read-only; choose a path elsewhere",
    errno.ENOENT: "check the path (is a folder in it missing or misspelt?)",
    errno.EEXIST: "a file is in the way where a folder is needed; choose another path",
    errno.ENOTDIR: "a file is in the way where a folder is needed; choose another path",
    errno.EISDIR: "that is a folder, not a file; give a file path",
    errno.ENOSPC: "the disk is full; free space or choose another path",
    errno.EDQUOT: "the disk quota is exceeded; free space or choose another path",
}


def describe_os_error(e: OSError) -> str:
    """One line for an :class:`OSError`: the path, what went wrong, what to do."""
    if e.filename is None:
        return str(e)
    paths = f"{e.filename}" + (f" -> {e.filename2}" if e.filename2 is not None else "")
    advice = _OS_ADVICE.get(e.errno or 0, "")
    return f"{paths}: {(e.strerror or str(e)).lower()}" + (f"; {advice}" if advice else "")


def _debug_requested(argv: list[str]) -> tuple[bool, list[str]]:
    """``--debug`` anywhere before a ``--`` (it is removed), or ``ZEUS_NB_DEBUG=1``."""
    end = argv.index("--") if "--" in argv else len(argv)
    found = "--debug" in argv[:end]
    rest = [a for i, a in enumerate(argv) if not (i < end and a == "--debug")]
    env = os.environ.get(DEBUG_ENV, "").strip().lower() in ("1", "true", "yes", "on")
    return found or env, rest


def main(argv: list[str] | None = None) -> int:
    """Run one command. A user's mistake (our own errors, a bad path) is one line and exit 2;
    ``--debug`` or ``ZEUS_NB_DEBUG=1`` shows the traceback instead."""
    debug, argv = _debug_requested(list(sys.argv[1:] if argv is None else argv))
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:
        # The reader went away (`zeus-nb ... | head`): stop quietly, as Unix tools do, and point
        # stdout at /dev/null so the interpreter's final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except (ZeusNbError, OSError, ValueError) as e:
        if debug:
            raise
        line = describe_os_error(e) if isinstance(e, OSError) else str(e)
        print(f"zeus-nb: error: {' '.join(line.split())}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("zeus-nb: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
