"""The one write path: whole files replaced atomically, whole rows appended, stores read-only.

* :func:`atomic_write` writes a temporary sibling, fsyncs it and renames it over the target: a
  reader sees the old file or the new one, never half of one, and a full disk leaves the old
  file as it was.
* :func:`append_rows` checks every row as the file's reader will (its schema), repairs a last
  row without a line end (kept if complete, cut if torn: :func:`end_with_newline`), then
  :func:`append_line` appends the rows with a single ``write`` on an ``O_APPEND`` descriptor and
  fsyncs them (a writer of a row per training step fsyncs at most once a second instead:
  :mod:`zeus_nb.monitor.log_file`); if the write fails part-way (a full disk), the bytes it did
  write are cut off again, so no torn row is left for a later run to append onto. Appenders call
  :func:`append_rows` only (tests/test_reliability_discovery.py), so no writer writes a row its
  reader refuses.
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
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from zeus_nb.inputs.registry import reasoned_mark
from zeus_nb.inputs.table import check_rows, complete_row

log = logging.getLogger(__name__)

__all__ = [
    "append_line",
    "append_rows",
    "repair_tail",
    "atomic_write",
    "connect_readonly",
    "end_with_newline",
    "move_into_place",
    "unlocked_update",
    "write_json",
    "writes_itself",
]

F = TypeVar("F", bound=Callable)

_write = os.write  # every byte zeus-nb writes to a file goes through here (tests inject faults)


def writes_itself(why: str) -> Callable[[F], F]:
    """Mark a function that writes files another way than through this module, saying ``why``
    (tests/test_reliability_discovery.py fails for any other writer outside this module). The
    mark sits on the function, so renaming or moving it carries the mark along."""
    return reasoned_mark("__writes_itself__", why)


def unlocked_update(why: str) -> Callable[[F], F]:
    """Mark a function that reads a file and writes it back without a lock, saying why that is
    safe (tests/test_reliability_discovery.py fails for any other read-modify-write without
    one: two processes would each write back what they read, and one's change would be lost)."""
    return reasoned_mark("__unlocked_update__", why)


def atomic_write(path: str | Path, data: str | bytes) -> Path:
    """Replace ``path`` with ``data`` through a temporary sibling; returns the path.

    The folder must exist (callers make it only after their inputs are validated). On any
    error the temporary file is removed and ``path`` is left as it was.
    """
    p = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    _check_name_length(p)
    # The temporary sibling's name is kept short: a long target name once made it 14
    # characters over the file system's limit, an error that named a file the user never gave.
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name[:64]}.", suffix=".tmp", dir=p.parent)
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


def move_into_place(src: str | Path, dst: str | Path) -> Path:
    """Rename the finished file ``src`` (a sibling of ``dst``) over ``dst``, fsynced first, so
    ``dst`` is the old file or the whole new one."""
    fd = os.open(src, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(src, dst)
    return Path(dst)


def _check_name_length(p: Path) -> None:
    """A name the file system cannot hold is an error naming the target, before any write."""
    try:
        limit = os.pathconf(p.parent, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    if len(os.fsencode(p.name)) > limit:
        raise OSError(
            errno.ENAMETOOLONG,
            f"File name too long ({len(os.fsencode(p.name))} bytes; this file system allows "
            f"{limit}): choose a shorter name",
            str(p),
        )


def write_json(path: str | Path, obj: Any, indent: int | None = 1) -> Path:
    """:func:`atomic_write` of strict JSON (a NaN is a bug, never written)."""
    return atomic_write(path, json.dumps(obj, indent=indent, allow_nan=False) + "\n")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def end_with_newline(path: str | Path, complete: Callable[[str], bool] | None = None) -> str | None:
    """Repair a last row without a line end; returns the text cut off, or None.

    Every row zeus-nb appends ends with a newline, so text after the last one is a write an
    earlier process did not finish (killed, or a full disk before this write path), or a file an
    editor saved without its last line end. If ``complete(row)`` says it is a whole row (every
    field, every value valid), it is kept and ended with a newline: a repair never deletes a
    complete row. Otherwise it is cut off, with a warning that quotes it.
    """
    p = Path(path)
    try:
        with p.open("rb+") as f:
            size = f.seek(0, os.SEEK_END)
            if size == 0:
                return None
            f.seek(size - 1)
            if f.read(1) == b"\n":  # the usual case: one byte read
                return None
            f.seek(max(0, size - 65536))
            tail = f.read()
            if tail.endswith(b"\n"):
                return None
            cut = tail.rfind(b"\n")
            dropped = tail[cut + 1 :].decode("utf-8", "replace")
            if complete is not None and complete(dropped):
                f.seek(0, os.SEEK_END)
                _write(f.fileno(), b"\n")
                os.fsync(f.fileno())
                log.warning("%s: the last row had no line end but is complete; kept it", p)
                return None
            keep = size - len(tail) + cut + 1 if cut >= 0 else 0
            f.truncate(keep)
    except FileNotFoundError:
        return None
    log.warning("%s: dropped a torn last row an interrupted write left: %r", p, dropped[:80])
    return dropped


def repair_tail(path: str | Path, schema: Any, header: list[str] | None = None) -> str | None:
    """:func:`end_with_newline` that keeps a last row ``schema``'s reader accepts (CSV under
    ``header``, or a JSON line when ``header`` is None) and cuts one it would refuse."""

    where = str(path)

    def complete(line: str) -> bool:
        if header is not None:
            return complete_row(line, header, schema, where) is not None
        return bool(check_rows(line, schema, None, where, None, quiet=True))

    return end_with_newline(path, complete)


def append_rows(
    path: str | Path,
    text: str,
    schema: Any,
    header: list[str] | None = None,
    keys: set[tuple] | None = None,
    *,
    own_tail: bool = False,
    sync: bool = True,
) -> list:
    """Append the whole rows ``text`` to a file that ``schema``'s reader reads back.

    Every row is first checked as that reader will check it (CSV under ``header``, or JSON lines
    when ``header`` is None; a row repeating one of ``keys``, the identities already in the
    file's current run, too): a row the reader would refuse raises
    :class:`~zeus_nb.errors.InputError` and nothing is written. A last row without its line end
    is repaired first (:func:`end_with_newline`, keeping it if it is complete), unless
    ``own_tail``: the caller is the file's only writer (it holds the file's lock) and wrote its
    last row itself. Then the rows go out in one write (:func:`append_line`), fsynced when
    ``sync``. Returns the checked rows.
    """

    rows = check_rows(text, schema, header, str(path), keys)
    if not own_tail:
        repair_tail(path, schema, header)
    append_line(path, text, sync=sync)
    return rows


def append_line(path: str | Path, line: str, sync: bool = True) -> None:
    """Append ``line`` (one or more whole rows, ending with a newline) in one write, fsynced
    unless ``sync`` is false (the write is whole either way: a killed process tears no row; the
    fsync keeps it through a power cut).

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
            if sync:
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
