"""Measure GPU (and CPU) time and energy of arbitrary code blocks with named windows.

Zeus's ``ZeusMonitor``: nesting, overlapping windows, each returning a :class:`Measurement`;
``measurement_states`` holds the open ones. An edge reads the wall clock (this module's ``time``)
and each GPU's counter, as Zeus does; GPUs without one are measured by ``PowerMonitor``; simulated
and replayed GPUs answer in one snapshot. A slow counter (an H100's: 2.8 ms a read) is read on a
background thread (:mod:`zeus_nb.device.counter`): an edge costs microseconds, counter steps are
shared out among windows by power, and :attr:`Measurement.energy_method` says how each GPU's energy
was obtained (docs/measuring.md).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import warnings
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from time import time
from types import MappingProxyType

from zeus_nb import device
from zeus_nb.device import counter, counter_registry
from zeus_nb.device.base import GPUSystem, PowerSampler
from zeus_nb.device.counter_track import COUNTER, ESTIMATED
from zeus_nb.device.gpu import get_gpus
from zeus_nb.device.gpu.common import GPUs
from zeus_nb.errors import InputError, WindowError
from zeus_nb.inputs.env import env
from zeus_nb.inputs.validate import integer
from zeus_nb.monitor.log_file import MonitorLog
from zeus_nb.monitor.power import PowerMonitor
from zeus_nb.monitor.sources import MonitoredGPUs, open_cpus, sync_jax
from zeus_nb.monitor.states import Measurement, MeasurementState, StatesView, cpu_delta, mark_starts

__all__ = ["SYNC_FRAMEWORKS", "Measurement", "MeasurementState", "PowerMonitor", "ZeusMonitor"]

log = logging.getLogger(__name__)

SYNC_FRAMEWORKS = ("torch", "jax")
ENERGY_READS = ("auto", "sync", "background")
_new = object.__new__  # window edges fill their dataclasses slot by slot (states.py says why)
#: A window edge as read: (time, GPU J, CPU package J, DRAM J, background readers' marks).
Edge = tuple[float, dict[int, float], dict[int, float] | None, dict[int, float] | None, dict | None]

ZERO_ENERGY = (
    "The energy consumption of one or more GPUs was measured as zero. This means that the time "
    "duration of the measurement window was shorter than the GPU's energy counter update period. "
    "Consider turning on the `approx_instant_energy` option in `ZeusMonitor`, which approximates "
    "the energy consumption of a short time window as instant power draw x window duration."
)


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
        energy_reads: ``"auto"`` (read counters on the caller's thread, as Zeus does, unless the
            first four reads of a GPU's counter take over 1 ms each: then in the background),
            ``"sync"`` or ``"background"``; default: ``ZEUS_NB_ENERGY_READS``, else ``"auto"``.
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
        energy_reads: str | None = None,
    ):
        if sync_execution_with not in SYNC_FRAMEWORKS:
            raise InputError(
                f"sync_execution_with must be one of {', '.join(SYNC_FRAMEWORKS)}, "
                f"got {sync_execution_with!r}"
            )
        energy_reads = energy_reads or env("ZEUS_NB_ENERGY_READS") or "auto"
        if energy_reads not in ENERGY_READS:
            raise InputError(f"energy_reads must be one of {', '.join(ENERGY_READS)}")
        if system is None:
            system = get_gpus() if backend is None else device.current(backend)
        self.system: GPUSystem = system
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
        self.gpus: GPUs = MonitoredGPUs(self.system, self.gpu_indices)
        self.cpus, self.cpu_indices = open_cpus(self.system, cpu_indices)
        self.approx_instant_energy = bool(approx_instant_energy)
        self.sync_with = sync_execution_with
        self.sync_execution = sync_execution
        self.energy_reads = energy_reads
        self._sync = (
            functools.partial(sync_jax, self.system, self.gpu_indices)
            if sync_execution_with == "jax"
            else self.system.sync_function(self.gpu_indices)
        )
        self._states: dict[str, MeasurementState] = {}
        self._warned: set[str] = set()
        self._log = (
            MonitorLog(Path(log_file), self._header(), self) if log_file is not None else None
        )
        # One reader per GPU: Zeus's reads if cheap, a background reader if slow, power if none.
        self._counted = self.system.windows_read_counters
        self._snapshot = None if self._counted else self.system.snapshot_reader(list(self.gpus))
        old = [g.index for g in self.gpus if self._counted and not g.supports_energy_counter()]
        self._counters = [g for g in self.gpus if g.index not in old]
        self.power_monitor = None
        if old:
            kwargs = {} if self.system is device.peek() else {"system": self.system}
            self.power_monitor = PowerMonitor(gpu_indices=old, update_period=None, **kwargs)
        self._readers: dict[int, counter.CounterReader] = {}
        self._methods = MappingProxyType(dict.fromkeys(self.gpu_indices, COUNTER))
        self._settle()

    def _settle(self) -> None:
        """Build each GPU's reader as decided so far, and the edge read over them."""
        undecided = []
        for g in self._counters if self._counted else []:
            slow = counter_registry.decided(g, self.energy_reads)
            if slow is None:
                undecided.append(g)
            elif slow and g.index not in self._readers:
                self._readers[g.index] = reader = counter_registry.acquire(g)
                weakref.finalize(self, counter_registry.release, reader)
                mark_starts(self._states, g.index, reader, time() - reader.clock())
        self._direct = [  # (index, read mJ, GPU whose read names the error)
            (g.index, g.counter_reader(), g)
            for g in self._counters
            if self._counted and g.index not in self._readers
        ]
        self._plain = self._counted and not self._readers and self.power_monitor is None
        self._read = self._probing(undecided) if undecided else self._reader()

    @property
    def persist_power_limits(self) -> bool:
        """Whether limits set on these GPUs need a state file for ``zeus-nb restore``."""
        return all(g.persistent for g in self.gpus)

    # --- log -------------------------------------------------------------------------------
    def _header(self) -> list[str]:
        return ["start_time", "window_name", "elapsed_time"] + [
            f"gpu{i}_energy" for i in self.gpu_indices
        ]

    def _log_pieces(self, name: str) -> None:
        """Hold the rows of window ``name`` (ended in pieces) until :meth:`_log_whole`."""
        if self._log is not None:
            self._log.hold(name)

    def _log_whole(self, name: str, taken: int | None = None, total: int | None = None) -> None:
        """Log the held pieces of ``name`` as one record: whole, or a part of ``taken`` of
        ``total`` steps (the power-limit optimizer's windows: :mod:`zeus_nb.monitor.log_file`)."""
        if self._log is not None:
            self._log.release(name, taken, total)

    def _log_run(self, chosen: float | None = None) -> None:
        """Mark the power-limit optimizer's profiling run in the log: its start (None), or its
        end and the limit it chose (see :mod:`zeus_nb.monitor.log_file`)."""
        if self._log is not None:
            self._log.new_run() if chosen is None else self._log.end_run(chosen)

    @property
    def open_windows(self) -> list[str]:
        return list(self._states)

    @property
    def log_file(self) -> Path | None:
        return self._log.path if self._log is not None else None

    def reset_windows(self) -> None:
        """Forget every open window, e.g. at the top of a notebook cell that is run again."""
        self._states.clear()

    # --- reading ----------------------------------------------------------------------------
    def _probing(self, undecided: list) -> Callable[[], Edge]:
        """The edge read while ``auto`` still times the first reads of some GPUs' counters."""
        pending = {g.index: g for g in undecided}

        def probing(begun: dict | None = None) -> Edge:
            marks = {i: r.mark() for i, r in self._readers.items()} or None
            now = time()
            energy = {}
            for i, read_mj, gpu in self._direct:
                joules = counter_registry.probe(gpu) if i in pending else None
                if joules is None and i in pending and counter_registry.decided(gpu, "auto"):
                    self._settle()  # a reader chosen meanwhile: read as decided now
                    return self._read(begun)
                energy[i] = read_mj() / 1000.0 if joules is None else joules
            for i, m in (marks or {}).items():
                if begun is None or i not in begun:
                    energy[i] = self._readers[i].estimate(m)
            edge = (now, energy, *self._read_cpus(), marks)
            if all(counter_registry.decided(g, "auto") is not None for g in undecided):
                self._settle()  # a start takes the new readers' marks, not a step-old value
                return self._read() if begun is None and self._readers else edge
            return edge

        return probing

    def _reader(self) -> Callable[..., Edge]:
        """The one read of a window edge: the clock and every GPU's (and CPU's) energy, as a
        tuple (begin_window keeps it as a :class:`MeasurementState`). ``begun``, an end's start
        marks: a GPU with one is measured between the marks, so not estimated at the end."""
        cpus = bool(self.cpu_indices)
        if not self._counted:
            snapshot, indices = self._snapshot, self.gpu_indices

            def snap(begun: dict | None = None) -> Edge:
                now, gpu = snapshot()
                return (now, dict(zip(indices, gpu, strict=True)), *self._read_cpus(), None)

            return snap
        if self._plain and len(self._direct) == 1 and not cpus:  # the usual case, as Zeus
            (i, read_mj, gpu) = self._direct[0]

            def one(begun: dict | None = None) -> Edge:
                now = time()
                try:
                    return now, {i: read_mj() / 1000.0}, None, None, None
                except Exception:  # read the slow way: its error names the GPU and the fix
                    return now, {i: gpu.get_total_energy_consumption() / 1000.0}, None, None, None

            return one
        direct, readers = self._direct, self._readers

        def read(begun: dict | None = None) -> Edge:
            marks = {i: r.mark() for i, r in readers.items()} if readers else None
            now = time()
            energy = {}
            for i, read_mj, gpu in direct:
                try:
                    energy[i] = read_mj() / 1000.0
                except Exception:  # read the slow way: its error names the GPU and the fix
                    energy[i] = gpu.get_total_energy_consumption() / 1000.0
            if marks and begun is not None:  # an end's GPUs read in the background since begin
                for i, m in marks.items():
                    if i not in begun:
                        energy[i] = readers[i].estimate(m)
            if cpus:
                return (now, energy, *self._read_cpus(), marks)
            return now, energy, None, None, marks

        return read

    def _read_cpus(self) -> tuple[dict[int, float] | None, dict[int, float] | None]:
        cpu: dict[int, float] = {}
        dram: dict[int, float] = {}
        for i in self.cpu_indices:
            reading = self.cpus.get_total_energy_consumption(i) / 1000.0
            cpu[i] = reading.cpu_mj
            if reading.dram_mj is not None:
                dram[i] = reading.dram_mj
        return cpu or None, dram or None

    # --- windows ----------------------------------------------------------------------------
    @property
    def measurement_states(self) -> StatesView:
        """The open windows: name -> :class:`MeasurementState` (its start), as Zeus's."""
        return StatesView(self._states, self._readers, self.gpu_indices)

    def begin_window(self, key: str, sync_execution: bool | None = None, restart: bool = False):
        """Start window ``key``. ``restart=True`` discards an open window of that name first."""
        states = self._states
        if key in states and not restart:
            raise WindowError(_exists(key))
        if self.sync_execution if sync_execution is None else sync_execution:
            self._sync()
        state = s = _new(MeasurementState)
        s.time, s.gpu_energy, s.cpu_energy, s.dram_energy, s.marks = self._read()
        if restart:
            states[key] = state
        elif states.setdefault(key, state) is not state:  # another thread began it meanwhile
            raise WindowError(_exists(key))

    def end_window(
        self,
        key: str,
        sync_execution: bool | None = None,
        cancel: bool = False,
        *,
        wait_for_counter: bool = False,
    ) -> Measurement:
        """End window ``key`` and return its measurement (all zeros, not logged, if cancelled).

        Where counters are read in the background the measurement returns at once; its part
        after the counter's last step is estimated from power (``energy_method`` says so).
        ``wait_for_counter=True`` waits (about one counter period) for the next step instead.
        """
        states = self._states
        start = states.pop(key, None)  # one thread gets it, however many end it at once
        if start is None:
            opened = ", ".join(repr(k) for k in states) or "none"
            raise WindowError(
                f"Measurement window {key!r} does not exist: {key!r} was never begun (open "
                f"windows: {opened}), or has ended (another thread may have ended it); call "
                "begin_window first"
            )
        if cancel:
            return Measurement(0.0, dict.fromkeys(self.gpu_indices, 0.0))
        try:
            if self.sync_execution if sync_execution is None else sync_execution:
                self._sync()
            edge = self._read(start.marks or {})  # {}: an end whose start has no marks
        except BaseException:
            states.setdefault(key, start)  # a failed read can be retried
            raise
        if self._plain:  # Zeus's reads: counter differences
            now, gpu_end, cpu_end, dram_end, _ = edge
            elapsed = now - start.time
            gpu, zero = {}, False
            for i, joules in start.gpu_energy.items():
                gpu[i] = e = gpu_end[i] - joules
                zero = zero or not e
            how = self._methods
            if zero:
                how = dict(how)
                self._zero_energy(gpu, how, elapsed, 3)
            m = _new(Measurement)
            m.time, m.gpu_energy, m.soc_energy, m.energy_method = elapsed, gpu, None, how
            m.cpu_energy = m.dram_energy = None
            if start.cpu_energy is not None:
                m.cpu_energy, m.dram_energy = cpu_delta(start, cpu_end, dram_end)
        else:
            m = self._measurement(start, edge, wait_for_counter)
        if self._log is not None:
            self._log.write(key, start.time, m.time, [m.gpu_energy[i] for i in self.gpu_indices])
        return m

    def _measurement(self, start: MeasurementState, edge: Edge, wait: bool) -> Measurement:
        """A window over background readers, integrated power or a snapshot (not plain reads)."""
        now, g1, cpu_end, dram_end, end_marks = edge
        elapsed = now - start.time
        g0 = start.gpu_energy
        gpu, how = {}, {}
        backend = self.system.backend
        default = COUNTER if self._counted else _METHOD.get(backend, f"{backend} counter")
        starts, ends = start.marks or {}, end_marks or {}
        for i in self.gpu_indices:
            a, b = starts.get(i), ends.get(i)
            if a is not None and b is not None:
                reader = self._readers[i]
                if wait:
                    reader.wait(b)
                gpu[i], how[i] = reader.energy_between(a, b)
            elif i in g0 and i in g1:  # b alone: the window began before its reader did
                gpu[i], how[i] = g1[i] - g0[i], ESTIMATED if b is not None else default
        if self.power_monitor is not None:
            energy = self.power_monitor.get_energy(start.time, now)
            for i in self.power_monitor.gpu_indices:
                power = self.system.gpu(i).power
                gpu[i] = energy[i] if energy is not None else power() * elapsed
                how[i] = "integrated power samples" if energy is not None else "power x time"
            gpu = {i: gpu[i] for i in self.gpu_indices}  # in the monitor's order again
        if 0 in gpu.values():
            self._zero_energy(gpu, how, elapsed, 4)
        return Measurement(elapsed, gpu, *cpu_delta(start, cpu_end, dram_end), energy_method=how)

    def _warn_once(self, key: str, message: str, stacklevel: int) -> None:
        if key not in self._warned:
            self._warned.add(key)
            warnings.warn(message, UserWarning, stacklevel=stacklevel + 1)

    def _zero_energy(
        self, gpu: dict[int, float], how: dict[int, str], elapsed: float, stacklevel: int
    ) -> None:
        """Explain (or, with approx_instant_energy, estimate) GPUs that measured 0 J; warnings
        name the caller of end_window, ``stacklevel`` frames up from here."""
        hint = None if any(gpu.values()) else self.system.window_hint(elapsed)
        if hint:
            self._warn_once("hint", hint, stacklevel + 1)
            return
        zeros = [i for i, e in gpu.items() if e == 0]
        # a GPU just found slow to read (its first windows were read as Zeus reads) or asked for
        # approximations: instant power x time, as Zeus's approx_instant_energy does
        approx = [i for i in zeros if self.approx_instant_energy or i in self._readers]
        for i in approx:
            gpu[i], how[i] = self.system.gpu(i).power() * elapsed, "instant power x time"
        zeros = [i for i in zeros if i not in approx]
        if not zeros:
            return
        period = self.system.energy_update_period
        self._warn_once(
            "zero",
            f"{ZERO_ENERGY} (zeus-nb: GPU(s) {', '.join(map(str, zeros))} measured 0 J over "
            f"{elapsed:.3g} s; the counter moves every {period:g} s. Pass "
            "approx_instant_energy=True to ZeusMonitor, or energy_reads='background', which "
            "shares each counter step out among the windows it spans.)",
            stacklevel + 1,
        )

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
        m.energy_method = result.energy_method

    def power_timeline(self, period: float = 0.1) -> PowerSampler:
        """Sampler of power over time for the monitored GPUs; use as a context manager."""
        return self.system.power_sampler(self.gpu_indices, period)


_METHOD = {"sim": "simulated counter", "replay": "replayed log"}


def _exists(key: str) -> str:
    return (
        f"Measurement window {key!r} already exists: it is already open; end it first, "
        "or pass restart=True to begin it again (e.g. when re-running a notebook cell)"
    )
