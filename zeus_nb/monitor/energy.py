"""Measure GPU (and CPU) time and energy of arbitrary code blocks with named windows.

Call shapes follow the Zeus ``ZeusMonitor``: ``begin_window(name)`` / ``end_window(name)``, windows
may nest and overlap, and each one returns a :class:`Measurement`. Energy comes from the device
layer, which integrates sampled power itself on GPUs without an energy counter; CPU package and
DRAM energy come from RAPL (or the simulated CPU).

The rest of Zeus's monitor module is importable from here too: :class:`PowerMonitor`,
:class:`TemperatureMonitor`, :class:`CarbonEmissionMonitor`, :class:`EnergyCostMonitor` and their
providers. ``python -m zeus_nb.monitor energy|power`` prints live readings, like Zeus's CLI.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import operator
import sys
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zeus_nb import device
from zeus_nb.device.base import GPUSystem, PowerSampler
from zeus_nb.errors import CpuEnergyError, InputError, WindowError
from zeus_nb.utils.validate import integer

log = logging.getLogger(__name__)

SYNC_FRAMEWORKS = ("torch", "jax")


@dataclass
class Measurement:
    """Time (s) and energy (J) of one window.

    ``gpu_energy`` maps GPU index to J. ``cpu_energy`` and ``dram_energy`` map CPU package index
    to J, and are None when CPUs (or their DRAM) were not measured; ``soc_energy`` is always None
    here (zeus-nb measures no system-on-chip). As in Zeus, ``total_energy`` is the GPUs' energy
    only: add ``cpu_energy`` and ``dram_energy`` yourself for the whole machine.
    """

    time: float
    gpu_energy: dict[int, float] = field(default_factory=dict)
    cpu_energy: dict[int, float] | None = None
    dram_energy: dict[int, float] | None = None
    soc_energy: Any = None

    @property
    def total_energy(self) -> float:
        """Energy of the measured GPUs in J (Zeus's meaning: CPU and DRAM not included)."""
        return sum(self.gpu_energy.values())

    @property
    def average_power(self) -> float:
        """Total energy over time in W (0 for an empty window)."""
        return self.total_energy / self.time if self.time > 0 else 0.0


class ZeusMonitor:
    """Measurement windows over some GPUs (and CPU packages) of the current backend.

    Args:
        gpu_indices: CUDA indices to measure; all visible GPUs if None.
        cpu_indices: CPU packages (RAPL ``intel-rapl:N``) to measure; None measures all of them
            where CPU energy can be read (and none where it cannot), ``[]`` none. Given
            explicitly, an unreadable CPU is an error that says how to fix it.
        approx_instant_energy: a GPU whose counter did not move during a window gets
            instant power x window time instead of 0 J (as in Zeus).
        log_file: append every finished window to this CSV
            (``start_time,window_name,elapsed_time,gpu<i>_energy...``), replayable later.
        sync_execution_with: ``"torch"`` or ``"jax"``: whose queued GPU work to wait for.
        backend: ``auto``, ``sim`` or ``nvml`` (default: ``ZEUS_NB_BACKEND`` or ``auto``).
        sync_execution: wait for queued GPU work before reading counters (real GPUs).
        system: the GPU system to measure (e.g. one per rank from :func:`zeus_nb.device.create`,
            or a :class:`~zeus_nb.device.replay.ReplaySystem` over a logged profiling run);
            default: the process's current one for ``backend``.
    """

    def __init__(
        self,
        gpu_indices: list[int] | None = None,
        cpu_indices: list[int] | None = None,
        approx_instant_energy: bool = False,
        log_file: str | Path | None = None,
        sync_execution_with: str = "torch",
        *,
        backend: str | None = None,
        sync_execution: bool = True,
        system: GPUSystem | None = None,
    ):
        if sync_execution_with not in SYNC_FRAMEWORKS:
            raise InputError(
                f"sync_execution_with must be one of {', '.join(SYNC_FRAMEWORKS)}, "
                f"got {sync_execution_with!r}"
            )
        self.system: GPUSystem = system if system is not None else device.current(backend)
        if gpu_indices is None:
            gpu_indices = [g.index for g in self.system.gpus]
        if not gpu_indices:
            raise InputError("gpu_indices is empty: give at least one GPU index")
        gpu_indices = [  # checked once here, never in the windows
            integer(i, "ZeusMonitor gpu_indices", 0, 1 << 16, text_ok=False) for i in gpu_indices
        ]
        if isinstance(log_file, str) and not log_file.strip():
            raise InputError("ZeusMonitor log_file is empty; give a file path, or None for no log")
        if len(set(gpu_indices)) != len(gpu_indices):
            raise InputError(f"gpu_indices has duplicates: {gpu_indices}")
        self.gpu_indices = list(gpu_indices)
        self.gpus = [self.system.gpu(i) for i in self.gpu_indices]
        self.cpus = _open_cpus(self.system, cpu_indices)
        self.cpu_indices = [c.index for c in self.cpus]
        self._dram = [c for c in self.cpus if c.supports_dram()]
        self.approx_instant_energy = bool(approx_instant_energy)
        self.sync_with = sync_execution_with
        self.sync_execution = sync_execution
        # A window pair costs microseconds, so its per-call work is decided here, once: the
        # bound readers, the indices of each result, and the function that waits for GPU work.
        self._snapshot: Callable[[], tuple[float, list[float]]] | None = None  # on first read
        self._cpu_reads = [c.energy for c in self.cpus]
        self._dram_reads = [c.dram_energy for c in self._dram]
        self._dram_indices = [c.index for c in self._dram]
        self._one_gpu = self.gpu_indices[0] if len(self.gpu_indices) == 1 else None
        self._sync = (
            functools.partial(_sync_jax, self.system, self.gpu_indices)
            if sync_execution_with == "jax"
            else self.system.sync_function(self.gpu_indices)
        )
        self._windows: dict[str, tuple] = {}  # name -> (time, gpu, cpu, dram) readings
        self._warned: set[str] = set()
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
        """Start this monitor's run in the log (its header line), as the file's one writer:
        see :mod:`zeus_nb.monitor.log_file` (an existing log must have the same columns; a
        complete last row without its line end is kept, a torn one cut)."""
        from zeus_nb.monitor.log_file import MonitorLog

        self._log_file = MonitorLog(path, self._header(), self)

    def _log(self, name: str, start: float, m: Measurement) -> None:
        """Log the window's row, checked as the replay will read it; on an I/O error it is kept
        (with later ones) for the next try, and a full disk never costs the measurement."""
        energy = [m.gpu_energy[i] for i in self.gpu_indices]
        self._log_file.write(name, start, m.time, energy)

    def _log_pieces(self, name: str) -> None:
        """Hold the rows of window ``name`` (ended in pieces) until :meth:`_log_whole`."""
        if self._log_path is not None:
            self._log_file.hold(name)

    def _log_whole(self, name: str, taken: int | None = None, total: int | None = None) -> None:
        """Log the held pieces of ``name`` as one record: whole, or a part of ``taken`` of
        ``total`` steps (the power-limit optimizer's windows: see
        :mod:`zeus_nb.monitor.log_file`)."""
        if self._log_path is not None:
            self._log_file.release(name, taken, total)

    # --- windows ---------------------------------------------------------------------------
    def _read(self, sync: bool) -> tuple:
        """(time, GPU energies, CPU package energies, DRAM energies), in the monitor's order."""
        if sync:
            self._sync()
        snapshot = self._snapshot
        if snapshot is None:  # built at the first read, so that its errors surface there
            snapshot = self._snapshot = self.system.snapshot_reader(self.gpus)
        now, gpu = snapshot()
        if self._cpu_reads:
            return now, gpu, [r() for r in self._cpu_reads], [r() for r in self._dram_reads]
        return now, gpu, (), ()

    @property
    def open_windows(self) -> list[str]:
        return list(self._windows)

    def reset_windows(self) -> None:
        """Forget every open window, e.g. at the top of a notebook cell that is run again."""
        self._windows.clear()

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            warnings.warn(message, UserWarning, stacklevel=5)  # the caller of end_window

    def _measurement(self, start: tuple, end: tuple) -> Measurement:
        (t0, g0, c0, d0), (t1, g1, c1, d1) = start, end
        elapsed = t1 - t0
        if self._one_gpu is not None:  # the usual case, without building an iterator
            joules = g1[0] - g0[0]
            gpu = {self._one_gpu: joules}
            if joules == 0:  # rare: a counter that did not move
                self._zero_energy(gpu, elapsed)
        else:
            gpu = dict(zip(self.gpu_indices, map(operator.sub, g1, g0), strict=True))
            if 0 in gpu.values():
                self._zero_energy(gpu, elapsed)
        cpu = dict(zip(self.cpu_indices, map(operator.sub, c1, c0), strict=True)) if c0 else None
        dram = dict(zip(self._dram_indices, map(operator.sub, d1, d0), strict=True)) if d0 else None
        return Measurement(elapsed, gpu, cpu, dram)

    def _zero_energy(self, gpu: dict[int, float], elapsed: float) -> None:
        """Explain (or, with approx_instant_energy, estimate) GPUs that measured 0 J."""
        hint = None if any(gpu.values()) else self.system.window_hint(elapsed)
        if hint:
            self._warn_once("hint", hint)
        for g in self.gpus:
            if gpu[g.index] != 0 or elapsed <= 0:
                continue
            if self.approx_instant_energy:
                gpu[g.index] = g.power() * elapsed
            elif elapsed > self.system.energy_update_period:
                self._warn_once(
                    "zero",
                    f"GPU {g.index} measured 0 J over a {elapsed:.3g} s window, longer than its "
                    f"energy counter's update period ({self.system.energy_update_period:g} s); "
                    "pass approx_instant_energy=True to ZeusMonitor to estimate such windows "
                    "as instant power x time",
                )

    def begin_window(self, key: str, sync_execution: bool | None = None, restart: bool = False):
        """Start window ``key``. ``restart=True`` discards an open window of that name first."""
        if key in self._windows and not restart:
            raise WindowError(
                f"measurement window {key!r} is already open; end it first, or pass "
                "restart=True to begin it again (e.g. when re-running a notebook cell)"
            )
        self._windows[key] = self._read(
            self.sync_execution if sync_execution is None else sync_execution
        )

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
        end = self._read(sync)  # before forgetting the window: a failed read can be retried
        state = self._windows.pop(key)
        m = self._measurement(state, end)
        if self._log_path is not None:
            self._log(key, state[0], m)
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
        m.cpu_energy, m.dram_energy = result.cpu_energy, result.dram_energy

    def power_timeline(self, period: float = 0.1) -> PowerSampler:
        """Sampler of power over time for the monitored GPUs; use as a context manager."""
        return self.system.power_sampler(self.gpu_indices, period)


def _open_cpus(system: GPUSystem, cpu_indices: list[int] | None) -> list:
    """The CPUs to measure: all readable ones for None, none for [], else exactly those."""
    if cpu_indices is not None and not cpu_indices:
        return []
    try:
        cpus = system.cpus()
    except CpuEnergyError as e:
        if cpu_indices is None:
            log.debug("not measuring CPU energy: %s", e)
            return []
        raise
    if cpu_indices is None:
        return cpus
    if len(set(cpu_indices)) != len(cpu_indices):
        raise InputError(f"cpu_indices has duplicates: {cpu_indices}")
    by_index = {c.index: c for c in cpus}
    missing = [i for i in cpu_indices if i not in by_index]
    if missing:
        have = ", ".join(str(i) for i in by_index) or "none"
        raise InputError(f"no CPU package with index {missing[0]} (have: {have})")
    return [by_index[i] for i in cpu_indices]


def _sync_jax(system: GPUSystem, indices: list[int]) -> None:
    """Wait for JAX's queued work on real GPUs (never imports jax)."""
    jax = sys.modules.get("jax")
    if jax is None or system.backend != "nvml":
        return
    gpus = [d for d in jax.devices() if d.platform == "gpu"]
    for i in indices:
        if i < len(gpus):
            jax.device_put(0.0, device=gpus[i]).block_until_ready()
