"""The error boundary of every entry point: ``zeus-nb``, ``python -m zeus_nb.*``, torchrun.

:func:`run_main` parses the arguments and runs the command. A user's mistake (our
:class:`~zeus_nb.errors.ZeusNbError`, or an ``OSError`` naming a path) becomes one line on
stderr and exit status 2; Ctrl-C is 130; a broken installation (a package that fails while it is
imported, torch and torchvision that do not match: :func:`zeus_nb.utils.stack.explain`) is one
line naming it and its fix, exit 2; anything else is a bug in zeus-nb and says so in one line
(exit 3), since a raw dependency message (from ``int()``, numpy, sqlite3, dask) means a value
reached a library unchecked. ``--debug`` or ``ZEUS_NB_DEBUG=1`` shows the traceback
instead. :func:`needs_extra` turns a missing optional dependency into a line naming the extra.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Callable, Iterator, Sequence

from zeus_nb.errors import ExtraMissingError, ZeusNbError
from zeus_nb.inputs.registry import environ_read
from zeus_nb.utils.extras import MODULES, install_hint
from zeus_nb.utils.stack import explain

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
    errno.EFBIG: "the file is too large for this file system; choose another path",
    errno.ENAMETOOLONG: "choose a shorter file or folder name",
}


def describe_os_error(e: OSError) -> str:
    """One line for an :class:`OSError`: the path, what went wrong, what to do."""
    if isinstance(e, ZeusNbError) or e.filename is None:
        return str(e)
    paths = f"{e.filename}" + (f" -> {e.filename2}" if e.filename2 is not None else "")
    advice = _OS_ADVICE.get(e.errno or 0, "")
    return f"{paths}: {(e.strerror or str(e)).lower()}" + (f"; {advice}" if advice else "")


@environ_read("ZEUS_NB_DEBUG, read before any other input")
def debug_requested(argv: list[str]) -> tuple[bool, list[str]]:
    """``--debug`` anywhere before a ``--`` (it is removed), or ``ZEUS_NB_DEBUG=1``."""
    end = argv.index("--") if "--" in argv else len(argv)
    found = "--debug" in argv[:end]
    rest = [a for i, a in enumerate(argv) if not (i < end and a == "--debug")]
    env = os.environ.get(DEBUG_ENV, "").strip().lower() in ("1", "true", "yes", "on")
    return found or env, rest  # read directly: this runs before any input is checked


def one_line(e: BaseException) -> str:
    """What the user reads about ``e``: our message, or the path and advice of an OSError."""
    line = describe_os_error(e) if isinstance(e, OSError) else str(e)
    return " ".join(line.split())


def run_main(
    prog: str, run: Callable[[list[str]], int | None], argv: Sequence[str] | None = None
) -> int:
    """``run(argv)`` inside the boundary; returns the exit status (see the module doc)."""
    debug, args = debug_requested(list(sys.argv[1:] if argv is None else argv))
    try:
        return int(run(args) or 0)
    except BrokenPipeError:
        # The reader went away (`zeus-nb ... | head`): stop quietly, as Unix tools do, and point
        # stdout at /dev/null so the interpreter's final flush does not fail again.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        if debug:
            raise
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except (ZeusNbError, OSError) as e:
        if debug:
            raise
        cause = None if isinstance(e, ZeusNbError) else _environment_cause(e)
        print(f"{prog}: error: {cause or one_line(e)}", file=sys.stderr)
        return 2
    except Exception as e:
        if debug:
            raise
        cause = _environment_cause(e)
        if cause is not None:  # a broken installation, not a bug: say which and how to fix it
            print(f"{prog}: error: {cause}", file=sys.stderr)
            return 2
        print(
            f"{prog}: internal error ({type(e).__name__}: {' '.join(str(e).split())[:200]}); "
            f"this is a bug in zeus-nb: rerun with --debug for the traceback and report it",
            file=sys.stderr,
        )
        return 3


def _environment_cause(e: BaseException) -> str | None:
    """The installation problem behind ``e`` (e.g. a torch and torchvision that do not match),
    or None when nothing known explains it."""

    try:
        return explain(e)
    except Exception:  # the explanation must never hide the original error
        return None


@contextlib.contextmanager
def needs_extra(extra: str, what: str) -> Iterator[None]:
    """Turn a missing module of ``extra`` into one line: what needs it and the pip command."""

    try:
        yield
    except ImportError as e:
        name = (getattr(e, "name", None) or "").split(".")[0]
        if name and name not in MODULES.get(extra, ()):
            raise
        raise ExtraMissingError(
            f"{what} needs the {extra} extra ({name or e} is not installed): {install_hint(extra)}"
        ) from None
