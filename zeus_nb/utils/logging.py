"""Diagnostics of zeus-nb go through :mod:`logging`; this module shows them where you look.

Every library module logs to ``logging.getLogger(__name__)``, so all loggers sit under ``zeus_nb``.
Python shows only warnings by default (on stderr). In a notebook, call :func:`show_logs` once to
see the INFO lines too (profiling started, optimum applied, backend chosen...)::

    from zeus_nb.utils.logging import show_logs
    show_logs()          # INFO and above, on the cell's output
    show_logs("DEBUG")   # everything
    show_logs(None)      # back to Python's default

``verbose=`` flags of the library do not print: they pick the level of their lines
(:func:`level_for`), INFO when verbose and DEBUG otherwise, so a quiet object still explains itself
at DEBUG.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TextIO

from zeus_nb.utils.files import writes_itself

__all__ = ["FORMAT", "FileAndConsole", "level_for", "show_logs"]

ROOT = "zeus_nb"
FORMAT = "%(name)s: %(message)s"


class _ConsoleHandler(logging.StreamHandler):
    """Writes to the ``sys.stdout`` of the moment of each record (Jupyter swaps it per cell)."""

    def __init__(self, stream: TextIO | None):
        super().__init__(stream or sys.stdout)
        self._fixed = stream

    def emit(self, record: logging.LogRecord) -> None:
        if self._fixed is None:
            self.stream = sys.stdout
        super().emit(record)


def show_logs(level: int | str | None = "INFO", stream: TextIO | None = None) -> logging.Logger:
    """Show ``zeus_nb`` log lines of ``level`` and above on ``stream`` (default: stdout).

    Idempotent: calling it again replaces the handler it added before rather than adding a
    second one. ``level=None`` removes the handler and the level, restoring Python's default.
    Returns the ``zeus_nb`` logger.
    """
    logger = logging.getLogger(ROOT)
    for h in [h for h in logger.handlers if isinstance(h, _ConsoleHandler)]:
        logger.removeHandler(h)
    if level is None:
        logger.setLevel(logging.NOTSET)
        return logger
    handler = _ConsoleHandler(stream)
    handler.setFormatter(logging.Formatter(FORMAT))
    logger.addHandler(handler)
    logger.setLevel(level.upper() if isinstance(level, str) else level)
    return logger


def level_for(verbose: bool | int) -> int:
    """The logging level of a ``verbose=`` flag: INFO if true, DEBUG if false; ints pass through.

    ``bool`` is checked first because ``True == 1`` would otherwise read as a level.
    """
    if isinstance(verbose, bool):
        return logging.INFO if verbose else logging.DEBUG
    return int(verbose)


class FileAndConsole:
    """Like ``tee`` for ``print``: ``sys.stdout = FileAndConsole(path)`` writes both places.

    Each write is flushed at once, so the file is complete even if the program dies.
    """

    @writes_itself("Zeus's logging API: a log file streamed line by line for the program's life")
    def __init__(self, filepath: Path | str) -> None:
        self.file = open(filepath, "w")  # noqa: SIM115 (kept open for the program's life)
        self.stdout = sys.stdout

    def write(self, message: str) -> None:
        self.file.write(message)
        self.stdout.write(message)
        self.flush()

    def flush(self) -> None:
        self.file.flush()
        self.stdout.flush()
