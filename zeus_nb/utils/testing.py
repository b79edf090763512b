"""Replaying a monitor's log instead of measuring: Zeus's ``ReplayZeusMonitor``, for tests.

A :class:`~zeus_nb.monitor.ZeusMonitor` log (``log_file=``) has one row per ended window:
``start_time,window_name,elapsed_time,gpu<i>_energy,...``. :class:`ReplayZeusMonitor` hands those
rows back, in order, as the measurements of the windows a program ends, so training code that
uses monitor windows can be run fast and deterministically. (To replay a power-limit profiling
run with the power-limit optimizer, use ``ZeusMonitor(system=ReplaySystem(log))``, which also
answers limit changes; see :mod:`zeus_nb.device.replay`.)
"""

from __future__ import annotations

import csv
import logging
import re
from pathlib import Path

from zeus_nb.errors import TraceFormatError, WindowError
from zeus_nb.inputs.registry import not_input
from zeus_nb.inputs.table import regular_file
from zeus_nb.inputs.validate import DURATION, ENERGY, number
from zeus_nb.monitor.energy import Measurement
from zeus_nb.utils.framework import sync_execution

logger = logging.getLogger(__name__)
_GPU_COLUMN = re.compile(r"^gpu(\d+)_energy$")


class ReplayWindowError(WindowError, RuntimeError):
    """A replayed window that is open twice, or ended without being open (Zeus raises
    RuntimeError there; zeus-nb's WindowError is a ValueError: this is both)."""


class ReplayZeusMonitor:
    """Windows whose measurements come from a ZeusMonitor log, row by row.

    The log is read as windows end, so a log still being written (by a monitor in the same
    program) replays the rows it has by then.

    Args:
        gpu_indices: the GPUs to report; default: every ``gpu<i>_energy`` column of the log.
        approx_instant_energy: accepted for Zeus's call shape; unused.
        log_file: the log to replay (required).
        ignore_sync_execution: never wait for queued GPU work.
        match_window_name: refuse a row whose window name differs from the ended window's.
    """

    def __init__(
        self,
        gpu_indices: list[int] | None = None,
        approx_instant_energy: bool = False,
        log_file: str | Path | None = None,
        ignore_sync_execution: bool = False,
        match_window_name: bool = True,
    ) -> None:
        if log_file is None:
            raise ValueError("ReplayZeusMonitor needs log_file=: the ZeusMonitor log to replay")
        self.approx_instant_energy = approx_instant_energy
        self.ignore_sync_execution = ignore_sync_execution
        self.match_window_name = match_window_name
        self.log_file = Path(log_file)
        self._header, self._offset = self._read(self.log_file)
        columns = {int(m[1]): c for c in self._header if (m := _GPU_COLUMN.match(c or ""))}
        in_log = sorted(columns)
        self.gpu_indices = list(in_log if gpu_indices is None else gpu_indices)
        if missing := [i for i in self.gpu_indices if i not in columns]:
            raise TraceFormatError(
                f"{self.log_file}: no energy column for GPU(s) {missing} (the log has {in_log})"
            )
        self._columns = columns
        self.nvml_gpu_indices = self.gpu_indices
        self.ongoing_windows: list[str] = []
        logger.info("replaying %s for GPUs %s", self.log_file, self.gpu_indices)

    @not_input(
        "Zeus's own power log format; each value is checked there (finite, in range) "
        "and a bad line is named"
    )
    @staticmethod
    def _read(path: Path) -> tuple[list[str], int]:
        """The log's header and the byte offset of its first row."""
        regular_file(path, "ZeusMonitor log")  # a FIFO would block, /dev/zero never end
        try:
            with path.open("rb") as f:
                first = f.readline()
        except OSError as e:
            raise TraceFormatError(f"{path}: cannot read the log ({e.strerror})") from None
        header = next(csv.reader([first.decode("utf-8-sig")]), [])
        if "window_name" not in header or "elapsed_time" not in header:
            raise TraceFormatError(
                f"{path}: want a ZeusMonitor log (start_time,window_name,elapsed_time,"
                "gpu<i>_energy,...)"
            )
        return header, len(first)

    @not_input(
        "the next row of the same log, read as windows end; each value is checked by "
        "end_window (finite, in range)"
    )
    def _next_row(self, key: str) -> dict[str, str]:
        """The next complete row of the log (read now, so rows written since count)."""
        regular_file(self.log_file, "ZeusMonitor log", max_bytes=None)  # one line is read
        with self.log_file.open("rb") as f:
            f.seek(self._offset)
            line = f.readline()
        if not line.endswith(b"\n"):  # the end, or a row still being written
            raise ReplayWindowError(
                f"{self.log_file} has no more rows to replay for window {key!r}"
            )
        self._offset += len(line)
        if not line.strip():
            return self._next_row(key)
        values = next(csv.reader([line.decode()]), [])
        if values == self._header:  # another run of the log begins: skip its header
            return self._next_row(key)
        return dict(zip(self._header, values, strict=False))

    def _sync(self, sync_execution_: bool) -> None:
        if sync_execution_ and not self.ignore_sync_execution:
            sync_execution(self.gpu_indices)

    def begin_window(self, key: str, sync_execution: bool = True, restart: bool = False) -> None:
        """Open ``key`` (``restart=True`` reopens one already open)."""
        if key in self.ongoing_windows:
            if not restart:
                raise ReplayWindowError(
                    f"Window {key!r} is already ongoing; end it or pass restart=True"
                )
            self.ongoing_windows.remove(key)
        self.ongoing_windows.append(key)
        self._sync(sync_execution)

    def end_window(
        self, key: str, sync_execution: bool = True, cancel: bool = False
    ) -> Measurement:
        """The next row of the log as ``key``'s measurement (a cancelled window uses no row)."""
        if key not in self.ongoing_windows:
            raise ReplayWindowError(f"Window {key!r} is not ongoing; begin_window({key!r}) first")
        self.ongoing_windows.remove(key)
        self._sync(sync_execution)
        if cancel:
            return Measurement(time=0.0, gpu_energy=dict.fromkeys(self.gpu_indices, 0.0))
        row = self._next_row(key)
        if self.match_window_name and row.get("window_name") != key:
            raise ReplayWindowError(
                f"{self.log_file}: the next row is window {row.get('window_name')!r}, not "
                f"{key!r}; end windows in the order the log recorded them, or "
                "match_window_name=False"
            )
        where = f"{self.log_file}, window {row.get('window_name')!r}"
        energy = {
            i: number(row.get(self._columns[i]), f"{where}: GPU {i} energy", ENERGY)
            for i in self.gpu_indices
        }
        return Measurement(
            time=number(row.get("elapsed_time"), f"{where}: time", DURATION), gpu_energy=energy
        )
