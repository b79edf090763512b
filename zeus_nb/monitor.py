"""Measure GPU time and energy of arbitrary code blocks with named windows.

Call shapes follow the Zeus ``ZeusMonitor``: ``begin_window(name)`` / ``end_window(name)``, windows
may nest and overlap, and each one returns a :class:`Measurement`. Energy comes from the device
layer, which integrates sampled power itself on GPUs without an energy counter.
"""

from __future__ import annotations

import contextlib
import csv
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from zeus_nb import device
from zeus_nb.device.base import GPUSystem, PowerSampler
from zeus_nb.errors import WindowError

log = logging.getLogger(__name__)


@dataclass
class Measurement:
    """Time (s) and per-GPU energy (J) of one window."""

    time: float
    gpu_energy: dict[int, float] = field(default_factory=dict)

    @property
    def total_energy(self) -> float:
        return sum(self.gpu_energy.values())

    @property
    def average_power(self) -> float:
        """Total energy over time in W (0 for an empty window)."""
        return self.total_energy / self.time if self.time > 0 else 0.0


class ZeusMonitor:
    """Measurement windows over some GPUs of the current backend.

    Args:
        gpu_indices: CUDA indices to measure; all visible GPUs if None.
        log_file: append every finished window to this CSV
            (``start_time,window_name,elapsed_time,gpu<i>_energy...``), replayable later.
        backend: ``auto``, ``sim`` or ``nvml`` (default: ``ZEUS_NB_BACKEND`` or ``auto``).
        sync_execution: wait for queued CUDA work before reading counters (real GPUs with torch).
        system: the GPU system to measure (e.g. one per rank from :func:`zeus_nb.device.create`,
            or a :class:`~zeus_nb.device.replay.ReplaySystem` over a logged profiling run);
            default: the process's current one for ``backend``.
    """

    def __init__(
        self,
        gpu_indices: list[int] | None = None,
        log_file: str | Path | None = None,
        backend: str | None = None,
        sync_execution: bool = True,
        system: GPUSystem | None = None,
    ):
        self.system: GPUSystem = system if system is not None else device.current(backend)
        if gpu_indices is None:
            gpu_indices = [g.index for g in self.system.gpus]
        if not gpu_indices:
            raise ValueError("gpu_indices is empty: give at least one GPU index")
        if len(set(gpu_indices)) != len(gpu_indices):
            raise ValueError(f"gpu_indices has duplicates: {gpu_indices}")
        self.gpu_indices = list(gpu_indices)
        self.gpus = [self.system.gpu(i) for i in self.gpu_indices]
        self.sync_execution = sync_execution
        self._windows: dict[str, tuple[float, list[float]]] = {}
        self._unwritten: list[list[str]] = []  # log rows an I/O error kept from the file
        self._log_path = Path(log_file) if log_file is not None else None
        if self._log_path is not None:
            self._init_log(self._log_path)

    @property
    def persist_power_limits(self) -> bool:
        """Whether limits set on these GPUs need a state file for ``zeus-nb restore``."""
        return all(g.persistent for g in self.gpus)

    # --- log -------------------------------------------------------------------------------
    def _header(self) -> list[str]:
        return ["start_time", "window_name", "elapsed_time"] + [
            f"gpu{i}_energy" for i in self.gpu_indices
        ]

    def _init_log(self, path: Path) -> None:
        header = self._header()
        if path.exists() and path.stat().st_size > 0:
            with path.open(newline="") as f:
                existing = next(csv.reader(f), [])
            if existing != header:
                raise ValueError(
                    f"log file {path} has header {existing}, but this monitor writes {header}; "
                    "choose another log_file"
                )
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="") as f:
            csv.writer(f).writerow(header)

    def _log(self, name: str, start: float, m: Measurement) -> None:
        """Append the window's row; on an I/O error keep it (and later ones) for the next try.

        A full disk or a vanished folder must not cost the measurement: the caller still gets
        it, the failure is logged as a warning, and the rows not yet written go out with the
        next window that can be written.
        """
        if self._log_path is None:
            return
        row = [repr(start), name, repr(m.time)] + [repr(m.gpu_energy[i]) for i in self.gpu_indices]
        self._unwritten.append(row)
        try:
            with self._log_path.open("a", newline="") as f:
                csv.writer(f).writerows(self._unwritten)
        except OSError as e:
            log.warning(
                "could not append window %r to the log file %s (%s); the measurement is "
                "returned, and %d unwritten row(s) will be written with the next window. "
                "Free disk space or fix the folder's permissions",
                name,
                self._log_path,
                e.strerror or e,
                len(self._unwritten),
            )
            return
        self._unwritten.clear()

    # --- windows ---------------------------------------------------------------------------
    def _read(self, sync: bool) -> tuple[float, list[float]]:
        if sync:
            self.system.sync(self.gpu_indices)
        return self.system.clock(), [g.energy() for g in self.gpus]

    @property
    def open_windows(self) -> list[str]:
        return list(self._windows)

    def begin_window(self, key: str, sync_execution: bool | None = None, restart: bool = False):
        """Start window ``key``. ``restart=True`` discards an open window of that name first."""
        if key in self._windows and not restart:
            raise WindowError(
                f"measurement window {key!r} is already open; end it first, or pass "
                "restart=True to begin it again (e.g. when re-running a notebook cell)"
            )
        sync = self.sync_execution if sync_execution is None else sync_execution
        self._windows[key] = self._read(sync)

    def end_window(
        self, key: str, sync_execution: bool | None = None, cancel: bool = False
    ) -> Measurement:
        """End window ``key`` and return its measurement (all zeros, not logged, if cancelled)."""
        if key not in self._windows:
            opened = ", ".join(repr(k) for k in self._windows) or "none"
            raise WindowError(
                f"measurement window {key!r} was never begun (open windows: {opened}); "
                "call begin_window first"
            )
        if cancel:
            self._windows.pop(key)
            return Measurement(0.0, {i: 0.0 for i in self.gpu_indices})
        sync = self.sync_execution if sync_execution is None else sync_execution
        now, e1 = self._read(sync)  # before forgetting the window: a failed read can be retried
        start, e0 = self._windows.pop(key)
        m = Measurement(
            time=now - start,
            gpu_energy={i: b - a for i, a, b in zip(self.gpu_indices, e0, e1, strict=True)},
        )
        self._log(key, start, m)
        return m

    @contextlib.contextmanager
    def window(self, key: str, restart: bool = False) -> Iterator[Measurement]:
        """``with monitor.window("train") as m:`` fills ``m`` when the block ends.

        On an exception the window is cancelled, so a failed cell can simply be re-run.
        """
        m = Measurement(0.0, {})
        self.begin_window(key, restart=restart)
        try:
            yield m
        except BaseException:
            self.end_window(key, cancel=True)
            raise
        result = self.end_window(key)
        m.time, m.gpu_energy = result.time, result.gpu_energy

    def power_timeline(self, period: float = 0.1) -> PowerSampler:
        """Sampler of power over time for the monitored GPUs; use as a context manager."""
        return self.system.power_sampler(self.gpu_indices, period)
