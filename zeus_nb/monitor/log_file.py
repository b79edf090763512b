"""The ZeusMonitor log file: one writer per file, one record per whole window.

A log row is a window's start, name, elapsed time and per-GPU energy (the columns and order are
Zeus's, which its own tests check). What a row cannot say in a column is said by how rows are
written:

* **which run wrote it**: each monitor that opens a log writes the header line again, which
  starts a run, and it is the file's only writer while it lives. A second monitor on the same
  file in this process takes the file over (the older one's later windows are not logged, with
  a warning); a monitor in another process is refused with an error that says so, since rows of
  two processes would interleave into one run (an advisory ``flock`` on the log itself, held
  while the monitor lives: no file is added beside the log). A forked child inherits the
  parent's writer and its lock but never writes the parent's run: its windows are not logged
  (with a warning), and a monitor it makes itself is another process's, refused as above.
* **which profiling run, and whether it finished**: the power-limit optimizer marks its runs
  (:meth:`MonitorLog.new_run`, :meth:`MonitorLog.end_run`). A profiling run that starts where
  this run already has rows starts a run of its own with a header line (an optimizer made again
  on the same monitor: a restarted loop, a notebook cell run twice), and a finished one ends
  with a ``__GlobalPowerLimitOptimizer~done_<W>`` row (0 s and 0 J; W is the limit it chose).
  The optimizer never logs a limit twice, so a limit's window that the run already holds starts
  a new run too. So one run never holds two profiling runs, and a replay tells a finished run
  from one cut short (no end row). Readers before these marks read them as before: the header
  splits runs, and the end row is not a limit's window.
* **whether a window is whole**: the power-limit optimizer measures a limit in pieces (it pauses
  at each epoch's end) and may cancel the last piece (adaptive profiling) or be killed midway.
  Its pieces are held here and written as one record when the limit is finished
  (:meth:`MonitorLog.release`); a limit measured only in part is written as
  ``NAME~part_TAKEN_of_TOTAL`` (steps), which no replay reads as a profile, and a limit still
  open when the process dies is never written. So a replay never sums a piece as a whole window.
* **what its reader accepts**: every row is checked by :data:`~zeus_nb.inputs.kinds.MONITOR_LOG`
  (and its key is new in the run) before it is written (:func:`zeus_nb.utils.files.append_rows`);
  a row the replay would refuse (a profiling window of 0 s) is not written, with a warning, and
  the measurement is still returned. A GPU with no valid energy in a window (a negative or NaN
  value from a power source without readings) gets an empty cell, with a warning.
* **what a crash keeps**: each row is one whole write (a killed process tears none), fsynced at
  most once a second and when the monitor lets go of the log (:data:`SYNC_S`): only a power cut
  can lose the last second's rows, and windows wait for the disk at most once a second.
"""

from __future__ import annotations

import contextlib
import csv
import io
import logging
import math
import os
import time
import weakref
from pathlib import Path
from typing import Any

from zeus_nb.errors import InputError
from zeus_nb.inputs.kinds import MONITOR_LOG, PROFILING_WINDOW, RUN_DONE
from zeus_nb.inputs.table import check_rows, read_header
from zeus_nb.utils.files import append_rows, repair_tail, unlocked_update

log = logging.getLogger(__name__)

__all__ = ["MonitorLog", "PART"]

PART = "~part_{taken}_of_{total}"  # suffix of a window measured only in part
#: Rows are fsynced at most this often (s), and when the monitor lets go of the log: a window
#: per training step would otherwise wait for the disk at every step (0.15 ms on this project's
#: machines), while a row written but not yet fsynced is lost only to a power cut.
SYNC_S = 1.0

#: The writer of each log file in this process (resolved path -> writer).
_WRITERS: dict[str, MonitorLog] = {}


def _release(key: str, writer_id: int) -> None:
    """The owning monitor is gone: let other processes write the log."""
    writer = _WRITERS.get(key)
    if writer is not None and id(writer) == writer_id:
        del _WRITERS[key]
        if writer.lock is not None:
            with contextlib.suppress(OSError):
                if writer.unsynced:
                    os.fsync(writer.lock)  # the rows written since the last fsync
                os.close(writer.lock)


def _after_fork_in_child() -> None:
    """The child of a fork holds copies of this process's writers: they stop writing (the rows
    would double the parent's run) and let go of the child's copy of the lock."""
    for writer in list(_WRITERS.values()):
        writer.pid = -1
        if writer.lock is not None:
            with contextlib.suppress(OSError):
                os.close(writer.lock)
            writer.lock = None
    _WRITERS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _lock(path: Path) -> int | None:
    """A descriptor of ``path`` holding an exclusive ``flock`` (None where there is no flock),
    or our error when another process holds it."""
    try:
        import fcntl
    except ImportError:  # not POSIX: one writer per file is not enforced there
        return None
    fd = os.open(path, os.O_RDONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise InputError(
            f"log file {path} is being written by a ZeusMonitor of another process; give each "
            "monitor its own log_file (two writers would mix their rows into one run)"
        ) from None
    return fd


class MonitorLog:
    """The log of one monitor: its run's header, its rows, held pieces (see the module doc)."""

    @unlocked_update(
        "reads the log's header, then appends its own under the flock it holds on the log for "
        "the monitor's life"
    )
    def __init__(self, path: Path, header: list[str], owner: Any):
        self.path = path
        self.header = header
        self.revoked = False
        self.pid = os.getpid()  # the process whose run this is (-1: a forked copy)
        self._keys: set[tuple] = set()  # identities of this run's rows
        self._limits: set[str] = set()  # this run's profiling windows
        self._end = 0.0  # when the last window logged ended, on the windows' own clock
        self._pending: list[list[str]] = []
        self._synced = time.monotonic()  # when rows were last fsynced
        self.unsynced = False  # rows written since then
        self._tail_whole = True  # the file ends with a whole row this monitor wrote
        self._held: dict[str, tuple[float, float, list[float]] | None] = {}
        existing = read_header(path, MONITOR_LOG)
        if existing is not None and existing != header:
            raise InputError(
                f"log file {path} has header {existing}, but this monitor writes {header}; "
                "choose another log_file"
            )
        if existing is None:
            path.parent.mkdir(parents=True, exist_ok=True)
        key = str(path.resolve())
        previous = _WRITERS.get(key)
        if previous is not None:  # a newer monitor of this process takes the file over
            previous.flush()  # rows a full disk kept back belong to the older run: first
            previous.revoked = True
            self.lock = previous.lock
        else:
            self.lock = _lock(path)
        _WRITERS[key] = self
        weakref.finalize(owner, _release, key, id(self))
        repair_tail(path, MONITOR_LOG, header)  # a complete last row is kept, a torn one cut
        append_rows(path, ",".join(header) + "\n", MONITOR_LOG, header)  # starts this run

    # --- runs ---------------------------------------------------------------------------------
    def new_run(self) -> None:
        """Start a run (a header line), unless this one has no row yet; its held pieces, of the
        run that ends here, are dropped."""
        if not self._keys or self.revoked or self.pid != os.getpid():
            return
        self._held.clear()
        self._keys.clear()
        self._limits.clear()
        self._pending.append(list(self.header))
        self.flush()

    def end_run(self, chosen: float) -> None:
        """End a finished profiling run: a row of 0 s and 0 J naming the limit it chose, at the
        end of the run's last window."""
        self._append(RUN_DONE.format(chosen), self._end, 0.0, [0.0] * (len(self.header) - 3))

    # --- pieces of one window -----------------------------------------------------------------
    def hold(self, name: str) -> None:
        """Sum the pieces of window ``name`` until :meth:`release` writes them as one record."""
        self._held[name] = None

    def release(self, name: str, taken: int | None = None, total: int | None = None) -> None:
        """Write the held pieces of ``name``: as a whole window, or, when only ``taken`` of
        ``total`` steps were measured, under ``name~part_TAKEN_of_TOTAL``."""
        record = self._held.pop(name, None)
        if record is None:
            return
        if taken is not None and total is not None and taken < total:
            name += PART.format(taken=taken, total=total)
        self._append(name, *record)

    # --- rows ---------------------------------------------------------------------------------
    def write(self, name: str, start: float, elapsed: float, energy: list[float]) -> None:
        """The row of an ended window (or one more piece of a held one)."""
        if name in self._held:
            held = self._held[name]
            if held is None:
                self._held[name] = (start, elapsed, list(energy))
            else:
                s0, t, e = held
                self._held[name] = (
                    s0,
                    t + elapsed,
                    [a + b for a, b in zip(e, energy, strict=True)],
                )
            return
        self._append(name, start, elapsed, energy)

    def _append(self, name: str, start: float, elapsed: float, energy: list[float]) -> None:
        if self.pid != os.getpid():
            log.warning(
                "window %r is not logged: this process is a fork of the one whose run %s "
                "holds; make a ZeusMonitor with its own log_file in the child",
                name,
                self.path,
            )
            self._pending.clear()
            return
        if self.revoked:
            log.warning(
                "window %r is not logged: a newer ZeusMonitor of this process writes %s now",
                name,
                self.path,
            )
            return
        if PROFILING_WINDOW.match(name) and name in self._limits:
            self.new_run()  # the optimizer never logs a limit twice in one run: it started again
        row = [repr(start), name, repr(elapsed)] + [
            self._cell(name, i, e) for i, e in enumerate(energy)
        ]
        try:  # a row its reader would refuse is never written
            checked = check_rows(_csv([row]), MONITOR_LOG, self.header, str(self.path), self._keys)
        except InputError as e:
            log.warning("window %r is not logged (the measurement is returned): %s", name, e)
            return
        self._keys.update((r["start_time"], r["window_name"]) for r in checked)
        self._end = max(self._end, start + elapsed)
        if PROFILING_WINDOW.match(name):
            self._limits.add(name)
        self._pending.append(row)
        self.flush(name)

    def _cell(self, name: str, column: int, energy: float) -> str:
        """A GPU's energy, or an empty cell where there is none to record: a power source that
        has no reading returns a negative or non-finite value, and the window's other GPUs are
        still worth their row."""
        if math.isfinite(energy) and energy >= 0:
            return repr(energy)
        log.warning(
            "window %r: %s is %r, not an energy; its cell in %s is left empty",
            name,
            self.header[3 + column],
            energy,
            self.path,
        )
        return ""

    def flush(self, name: str = "") -> None:
        """Write the rows an I/O error kept back (they go out with the next window)."""
        if not self._pending or self.revoked or self.pid != os.getpid():
            return
        now = time.monotonic()
        sync = now - self._synced >= SYNC_S
        try:  # this monitor holds the file's lock: its own last row needs no repair
            append_rows(
                self.path,
                _csv(self._pending),
                MONITOR_LOG,
                self.header,
                own_tail=self._tail_whole,
                sync=sync,
            )
        except OSError as e:
            self._tail_whole = False  # a failed write may have left part of a row: repair first
            log.warning(
                "could not append window %r to the log file %s (%s); the measurement is "
                "returned, and %d unwritten row(s) will be written with the next window. "
                "Free disk space or fix the folder's permissions",
                name,
                self.path,
                e.strerror or e,
                len(self._pending),
            )
            return
        self._pending.clear()
        self._tail_whole = True
        self.unsynced = not sync
        if sync:
            self._synced = now


def _csv(rows: list[list[str]]) -> str:
    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerows(rows)
    return text.getvalue()
