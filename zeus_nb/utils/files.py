"""The one write path: whole files replaced atomically, whole rows appended, stores read-only.

* :func:`atomic_write` writes a temporary sibling, fsyncs it and renames it over the target: a
  reader sees the old file or the new one, never half of one, and a full disk leaves the old
  file as it was.
* :func:`append_line` appends one row with a single ``write`` on an ``O_APPEND`` descriptor and
  fsyncs it; if the write fails part-way (a full disk), the bytes it did write are cut off
  again, so no torn row is left for a later run to append onto. :func:`end_with_newline` cuts
  a torn row an older, killed writer left, before appending.
* :func:`connect_readonly` opens a SQLite file with ``mode=ro``: a read command cannot change a
  store (or another program's database) even by accident.

Writers of side products (a log row, a profile) call these and, on ``OSError``, log a warning
and carry on: the measurement or the training is never lost to a failed save.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

__all__ = ["append_line", "atomic_write", "connect_readonly", "end_with_newline", "write_json"]

_write = os.write  # every byte zeus-nb writes to a file goes through here (tests inject faults)

#: Functions that write files another way, and why (tests/test_reliability_discovery.py fails
#: for any other writer outside this module).
OTHER_WRITES: dict[str, str] = {
    "zeus_nb.commands.perseus.run_synthetic": "InstructionProfile.to_csv (atomic_write)",
    "zeus_nb.commands.sweep.write_results": "moves a damaged results.csv aside: one rename",
    "zeus_nb.course.reveal.vendor": "the slides' copy of reveal.js and require.js, made afresh "
    "when its stamp differs",
    "zeus_nb.utils.logging.FileAndConsole.__init__": "Zeus's logging API: a log file streamed "
    "line by line for the program's life",
    "zeus_nb.docsite._slides_page": "the site's build folder, made afresh by each build",
    "zeus_nb.docsite.apidoc.write_pages": "the site's build folder, made afresh by each build",
    "zeus_nb.docsite.assemble": "the site's build folder, made afresh by each build",
    "zeus_nb.docsite.copy_executed": "the site's build folder, made afresh by each build",
    "zeus_nb.runner.execute.execute": "a kernel's live log, streamed while it runs",
    "zeus_nb.runner.points.execute_notebook_task": "a worker's private temporary folder",
}


def atomic_write(path: str | Path, data: str | bytes) -> Path:
    """Replace ``path`` with ``data`` through a temporary sibling; returns the path.

    The folder must exist (callers make it only after their inputs are validated). On any
    error the temporary file is removed and ``path`` is left as it was.
    """
    p = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        try:
            view = memoryview(raw)
            while view:
                view = view[_write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        mode = p.stat().st_mode & 0o777 if p.exists() else 0o666 & ~_umask()
        os.chmod(tmp, mode)
        os.replace(tmp, p)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError) and e.filename is None:
            raise OSError(e.errno, e.strerror, str(p)) from None
        raise
    return p


def write_json(path: str | Path, obj: Any, indent: int | None = 1) -> Path:
    """:func:`atomic_write` of strict JSON (a NaN is a bug, never written)."""
    return atomic_write(path, json.dumps(obj, indent=indent, allow_nan=False) + "\n")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def end_with_newline(path: str | Path) -> str | None:
    """Cut a torn last row (no line end) off ``path``; returns the dropped text, or None.

    Every row zeus-nb appends ends with a newline, so text after the last one is a write that
    an earlier process did not finish (killed, or a full disk before this write path).
    """
    p = Path(path)
    try:
        with p.open("rb+") as f:
            size = f.seek(0, os.SEEK_END)
            if size == 0:
                return None
            f.seek(max(0, size - 65536))
            tail = f.read()
            if tail.endswith(b"\n"):
                return None
            cut = tail.rfind(b"\n")
            keep = size - len(tail) + cut + 1 if cut >= 0 else 0
            f.truncate(keep)
            dropped = tail[cut + 1 :].decode("utf-8", "replace")
    except FileNotFoundError:
        return None
    log.warning("%s: dropped a torn last row an interrupted write left: %r", p, dropped[:80])
    return dropped


def append_line(path: str | Path, line: str) -> None:
    """Append ``line`` (one or more whole rows, ending with a newline) in one write, fsynced.

    Raises ``OSError`` naming ``path`` when the row could not be written whole; the file is
    then as it was before.
    """
    data = (line if line.endswith("\n") else line + "\n").encode("utf-8")
    p = Path(path)
    fd = os.open(p, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        start = os.fstat(fd).st_size
        written = 0
        try:
            written = _write(fd, data)
            if written != len(data):
                raise OSError(errno.ENOSPC, "No space left on device (the row was cut short)")
            os.fsync(fd)
        except OSError as e:
            _undo(fd, start, written)
            raise OSError(e.errno, e.strerror, str(p)) from None
    finally:
        os.close(fd)


def _undo(fd: int, start: int, written: int) -> None:
    """Cut off the part of a row that a failed write left (only if no one appended since)."""
    with contextlib.suppress(OSError):
        if written and os.fstat(fd).st_size == start + written:
            os.ftruncate(fd, start)


def connect_readonly(path: str | Path, timeout: float = 5.0):
    """A SQLite connection that cannot write (``mode=ro``); the file must exist.

    Without a write-ahead log beside the file (no writer has uncommitted pages), the file is
    also opened ``immutable``, so not even SQLite's lock files are created next to it.
    """
    import sqlite3
    from urllib.parse import quote

    p = Path(path).resolve()
    idle = not p.with_name(p.name + "-wal").exists()
    uri = f"file:{quote(str(p))}?mode=ro" + ("&immutable=1" if idle else "")
    return sqlite3.connect(uri, uri=True, timeout=timeout, check_same_thread=False)
