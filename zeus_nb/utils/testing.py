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
from zeus_nb.inputs.table import regular_file
from zeus_nb.monitor.energy import Measurement
from zeus_nb.utils.framework import sync_execution
from zeus_nb.utils.validate import DURATION, ENERGY, number

logger = logging.getLogger(__name__)
_GPU_COLUMN = re.compile(r"^gpu(\d+)_energy$")


class ReplayZeusMonitor:
    """Windows whose measurements come from a ZeusMonitor log, row by row.

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
        self._rows, columns = self._read(self.log_file)
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

    @staticmethod
    def _read(path: Path) -> tuple[list[dict[str, str]], dict[int, str]]:
        regular_file(path, "ZeusMonitor log")  # a FIFO would block, /dev/zero never end
        try:
            with path.open(newline="", encoding="utf-8-sig") as f:
                rows = list(csv.DictReader(f))
                header = rows[0].keys() if rows else []
        except OSError as e:
            raise TraceFormatError(f"{path}: cannot read the log ({e.strerror})") from None
        columns = {int(m[1]): c for c in header if (m := _GPU_COLUMN.match(c or ""))}
        if not rows or "window_name" not in header or "elapsed_time" not in header:
            raise TraceFormatError(
                f"{path}: want a ZeusMonitor log (start_time,window_name,elapsed_time,"
                "gpu<i>_energy,...) with at least one row"
            )
        return rows, columns

    def _sync(self, sync_execution_: bool) -> None:
        if sync_execution_ and not self.ignore_sync_execution:
            sync_execution(self.gpu_indices)

    def begin_window(self, key: str, sync_execution: bool = True, restart: bool = False) -> None:
        """Open ``key`` (``restart=True`` reopens one already open)."""
        if key in self.ongoing_windows:
            if not restart:
                raise WindowError(f"window {key!r} is already open; end it or pass restart=True")
            self.ongoing_windows.remove(key)
        self.ongoing_windows.append(key)
        self._sync(sync_execution)

    def end_window(
        self, key: str, sync_execution: bool = True, cancel: bool = False
    ) -> Measurement:
        """The next row of the log as ``key``'s measurement (a cancelled window uses no row)."""
        if key not in self.ongoing_windows:
            raise WindowError(f"window {key!r} is not open; begin_window({key!r}) first")
        self.ongoing_windows.remove(key)
        self._sync(sync_execution)
        if cancel:
            return Measurement(time=0.0, gpu_energy=dict.fromkeys(self.gpu_indices, 0.0))
        if not self._rows:
            raise WindowError(f"{self.log_file} has no more rows to replay for window {key!r}")
        row = self._rows.pop(0)
        if self.match_window_name and row["window_name"] != key:
            raise WindowError(
                f"{self.log_file}: the next row is window {row['window_name']!r}, not {key!r}; "
                "end windows in the order the log recorded them, or match_window_name=False"
            )
        where = f"{self.log_file}, window {row['window_name']!r}"
        energy = {
            i: number(row[self._columns[i]], f"{where}: GPU {i} energy", ENERGY)
            for i in self.gpu_indices
        }
        return Measurement(
            time=number(row["elapsed_time"], f"{where}: time", DURATION), gpu_energy=energy
        )
