"""The CSV log a :class:`~zeus_nb.monitor.energy.ZeusMonitor` appends its windows to.

Zeus's format: a header ``start_time,window_name,elapsed_time,gpu<i>_energy,...`` and one row
per ended window (start time, name, seconds, each GPU's joules). Each monitor that opens the log
starts a run with its header line, so several monitors can append to one file and readers tell
the runs apart. A torn last row an interrupted writer left is cut off first; rows are appended
whole or not at all, and rows an I/O error kept from the file go out with the next window.
"""

from __future__ import annotations

import csv
import io
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from zeus_nb.errors import InputError
from zeus_nb.inputs.kinds import MONITOR_LOG
from zeus_nb.inputs.table import read_header
from zeus_nb.utils.files import append_line, end_with_newline

if TYPE_CHECKING:
    from zeus_nb.monitor.energy import Measurement

log = logging.getLogger(__name__)


class MonitorLog:
    """The log file of one monitor measuring ``gpu_indices``."""

    def __init__(self, path: str | Path, gpu_indices: list[int]) -> None:
        self.path = Path(path)
        self.gpu_indices = list(gpu_indices)
        self._unwritten: list[list[str]] = []
        header = self.header()
        existing = read_header(self.path, MONITOR_LOG)
        if existing is not None and existing != header:
            raise InputError(
                f"log file {self.path} has header {existing}, but this monitor writes {header}; "
                "choose another log_file"
            )
        if existing is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        else:
            end_with_newline(self.path)
        append_line(self.path, ",".join(header))

    def header(self) -> list[str]:
        return ["start_time", "window_name", "elapsed_time"] + [
            f"gpu{i}_energy" for i in self.gpu_indices
        ]

    def write(self, name: str, start: float, m: Measurement) -> None:
        """Append the window's row; on an I/O error keep it (and later ones) for the next try.

        A full disk or a vanished folder must not cost the measurement: the caller still gets
        it, the failure is logged as a warning, and the rows not yet written go out with the
        next window that can be written.
        """
        row = [repr(start), name, repr(m.time)] + [repr(m.gpu_energy[i]) for i in self.gpu_indices]
        self._unwritten.append(row)
        text = io.StringIO()
        csv.writer(text, lineterminator="\n").writerows(self._unwritten)
        try:
            append_line(self.path, text.getvalue())
        except OSError as e:
            log.warning(
                "could not append window %r to the log file %s (%s); the measurement is "
                "returned, and %d unwritten row(s) will be written with the next window. "
                "Free disk space or fix the folder's permissions",
                name,
                self.path,
                e.strerror or e,
                len(self._unwritten),
            )
            return
        self._unwritten.clear()
