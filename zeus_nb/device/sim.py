"""A simulated GPU driven by real measurements.

Each training step costs the time and energy that the Zeus power trace measured for the workload at
the current power limit: time per step = time per epoch / steps per epoch, energy = average power x
time. Between measured limits both are interpolated piecewise linearly, which reproduces every
measured point exactly and never overshoots (monotone data stays monotone). The clock is virtual by
default: it advances only when :meth:`SimulatedSystem.step` runs, so CPU time spent by the notebook
never leaks into simulated time, and results are deterministic.

With ``clock="wall"`` (or ``ZEUS_NB_SIM_CLOCK=wall``) the clock follows real time instead, stretched
by the trace's slowdown at each GPU's limit and paced per training step where the loop marks its
steps (:mod:`zeus_nb.device.sim_wall`), and every GPU draws the trace's average power at its
limit for as long as time passes: code that never calls ``zeus_nb.step()`` (unmodified Zeus code)
measures the trace's time and energy ratios between limits. Either way, clock readings map to
Unix time through a fixed epoch (the creation time), so timestamps compare with ``time.time()``.
The CPU package and DRAM draw :class:`~zeus_nb.device.cpu.SimulatedCPU`'s constant power.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from zeus_nb.data.traces import GPU_NAMES, get_workload, load_power_trace, power_curves
from zeus_nb.device.base import GPU, GPUSystem, PowerSampler
from zeus_nb.device.base import milli as _mw
from zeus_nb.device.cpu.packages import CPU, SimulatedCPU
from zeus_nb.device.frequency import Work
from zeus_nb.device.guard import SettingsGuard
from zeus_nb.device.sampling import ThreadSampler
from zeus_nb.device.sim_clocks import SimulatedClocks
from zeus_nb.device.sim_ranks import parse_straggler, rank_factors  # noqa: F401 (re-exported)
from zeus_nb.device.sim_sampler import SimSampler
from zeus_nb.device.sim_wall import WallPace
from zeus_nb.errors import InputError, SimulationError
from zeus_nb.inputs.api import checked_methods
from zeus_nb.inputs.validate import CPU_TDP, DRAM_SIZE, NOISE, Quantity, integer, number, step_count

# (t0, t1, {gpu index: watts}) for every advance of the virtual clock.
Listener = Callable[[float, float, dict[int, float]], None]

CLOCKS = ("virtual", "wall")
IDLE = Quantity("idle time", "s", 0.0, 3.2e7)
MAX_GPUS = 1024  # as ZEUS_NB_SIM_GPUS: a growable system never answers for a higher index

NO_STEP_HINT = (
    "the window measured 0 s and 0 J because no zeus_nb.step() ran inside it: the simulated "
    "GPU's virtual clock advances only on zeus_nb.step(). Call zeus_nb.step() once per training "
    "step, or let the simulated clock follow real time (ZEUS_NB_SIM_CLOCK=wall, or "
    "zeus_nb.use_simulated(clock='wall')) to run unmodified Zeus code"
)


@checked_methods
class SimulatedGPU(GPU):
    """One simulated GPU, numbers from its system's trace (kept in W and J, given in mW and mJ
    by Zeus's methods: :meth:`energy`, :meth:`power` and :meth:`read_power` are unrounded)."""

    backend = "sim"
    settings_guard = SettingsGuard

    def __init__(self, system: SimulatedSystem, index: int):
        super().__init__(index)
        self._system = system
        self._limit = system.max_limit
        self._energy = 0.0
        self._power = 0.0
        self._locked: tuple[int, int] | None = None

    def get_name(self) -> str:
        return self._system.gpu_name

    def get_power_management_limit_constraints(self) -> tuple[int, int]:
        return _mw(self._system.min_limit), _mw(self._system.max_limit)

    def get_default_power_management_limit(self) -> int:
        return _mw(self._system.max_limit)

    def get_power_management_limit(self) -> int:
        return _mw(self._limit)

    def _write_power_limit(self, power_limit_mw: int) -> None:
        w = self.check_power_limit(power_limit_mw / 1000)
        self._system._sync()  # time so far was spent at the old limit
        self._limit = w

    def get_total_energy_consumption(self) -> int:
        return _mw(self.energy())

    def energy(self) -> float:
        self._system._sync()
        return self._energy

    def power(self) -> float:
        if self._system.clock_mode == "wall":
            return self._system._watts(self)
        return self._power

    # The trace holds one average power per configuration; it stands for both domains.
    def get_instant_power_usage(self) -> int:
        return _mw(self.power())

    get_average_power_usage = get_instant_power_usage

    def read_power(self, domain: str = "device_instant") -> float:
        """The trace's power in W, unrounded (Zeus's methods give whole mW)."""
        if domain in ("device_instant", "device_average"):
            return self.power()
        return super().read_power(domain)

    # --- SM clocks: the calibrated frequency model of zeus_nb.device.frequency ---------------
    def get_supported_graphics_clocks(self, memory_clock_mhz: int | None = None) -> list[int]:
        if memory_clock_mhz is not None:
            raise self._no_memory_clocks()
        return self._system.clock_spec.clocks()

    def _write_locked_clocks(self, min_mhz: int, max_mhz: int) -> None:
        self._locked = (int(min_mhz), int(max_mhz))

    def _write_reset_locked_clocks(self) -> None:
        self._locked = None

    def locked_clocks(self) -> tuple[int, int] | None:
        """The locked (min, max) SM clocks in MHz, or None when the driver chooses."""
        return self._locked

    def clock_for(self, work: Work) -> float:
        """The SM clock ``work`` runs at: the locked maximum, lowered further by the power cap."""
        model = self._system.frequency_model
        capped = model.clock_under_cap(work, self._limit)
        return min(capped, float(self._locked[1])) if self._locked else capped


@checked_methods
class SimulatedSystem(SimulatedClocks, GPUSystem):
    """Several identical simulated GPUs sharing one virtual clock.

    Args:
        gpu: ``"v100"`` or ``"a40"`` (bundled traces), or the path of a power-trace CSV.
        workload: dataset name of the simulated workload (``"imagenet"``, ``"cifar100"``...).
        batch_size: batch size the steps run at by default (the workload's default if None).
        num_gpus: number of GPUs (indices 0..num_gpus-1).
        noise: relative standard deviation of per-step time and power (0 = exact trace values).
        seed: seed of the noise generator.
        num_samples: training-set size, needed only for datasets zeus-nb does not know.
        clock: ``"virtual"`` (advances on :meth:`step`) or ``"wall"`` (follows real time).
        grow: add GPUs when code asks for an index beyond ``num_gpus`` (e.g. Zeus's
            ``ZeusMonitor(gpu_indices=[0, 1, 2, 3])``); off when the user fixed the count.
        cpu_tdp: TDP in W of the simulated CPU package (default 85 W, CodeCarbon's).
        dram_gb: memory size in GB of the simulated DRAM (default: this machine's).
        rank: the process's rank in a distributed job (each rank simulates its own GPUs).
        rank_spread: relative spread of step time and power between ranks (0: all alike).
        straggler: ``(rank, factor)`` or ``"RANK:FACTOR"``: that rank's steps take longer.
    """

    backend = "sim"
    energy_update_period = math.inf  # the simulated counter is exact

    def __init__(
        self,
        gpu: str | Path = "a40",
        workload: str = "imagenet",
        batch_size: int | None = None,
        num_gpus: int = 1,
        noise: float = 0.0,
        seed: int = 0,
        num_samples: int | None = None,
        clock: str = "virtual",
        grow: bool = False,
        cpu_tdp: float | None = None,
        dram_gb: float | None = None,
        rank: int = 0,
        rank_spread: float = 0.0,
        straggler: tuple[int, float] | str | None = None,
    ):
        clock = (clock or "virtual").strip().lower()
        if clock not in CLOCKS:
            raise InputError(
                f"simulated clock must be one of {', '.join(CLOCKS)}, got {clock!r}; "
                "fix or unset ZEUS_NB_SIM_CLOCK"
            )
        num_gpus = integer(num_gpus, "parameter num_gpus", 1, 1024)
        # NaN noise once made every step 10x shorter and every joule 100x smaller, silently.
        noise = number(noise, "parameter noise", NOISE, "use e.g. 0.02 for 2% noise, or 0")
        seed = integer(seed, "parameter seed", 0, 2**32 - 1)
        if cpu_tdp is not None:
            cpu_tdp = number(cpu_tdp, "parameter cpu_tdp", CPU_TDP, "use e.g. 85 (W), or None")
        if dram_gb is not None:
            dram_gb = number(dram_gb, "parameter dram_gb", DRAM_SIZE, "use e.g. 16 (GB), or None")
        self.source = str(gpu)
        self.trace = load_power_trace(gpu)
        key = self.source.lower()
        self.gpu_name = (
            f"{GPU_NAMES[key]} (simulated)"
            if key in GPU_NAMES
            else f"simulated GPU ({Path(self.source).stem})"
        )
        self.noise = float(noise)
        self.seed = int(seed)
        spread = number(rank_spread, "parameter rank_spread", NOISE, "use e.g. 0.03, or 0")
        self.rank = integer(rank, "parameter rank", 0, 2**20)
        self.rank_factors = rank_factors(self.rank, spread, parse_straggler(straggler))
        self._rng = np.random.default_rng(seed)
        self._now = 0.0
        self.clock_mode = clock
        self.grow = bool(grow)
        self._epoch = time.time()  # Unix time of clock reading 0
        self._pace = WallPace()
        self._lock = threading.Lock()
        self._cpu_args = (cpu_tdp, dram_gb)
        self._cpus: list[CPU] | None = None
        self.steps_taken = 0
        self._listeners: list[Listener] = []
        self.gpus: list[SimulatedGPU] = []
        self.set_workload(workload, batch_size, num_samples)
        self.gpus = [SimulatedGPU(self, i) for i in range(num_gpus)]

    @property
    def virtual_clock(self) -> bool:  # type: ignore[override]
        return self.clock_mode == "virtual"

    def gpu(self, index: int) -> GPU:
        """GPU ``index``; a growable system adds GPUs up to it (as many as the code asks for,
        at most :data:`MAX_GPUS`: a node has no more)."""
        index = integer(
            index, "GPU index", 0, MAX_GPUS - 1 if self.grow else 1 << 16, text_ok=False
        )
        if self.grow and index >= len(self.gpus):
            self._sync()
            self.gpus += [SimulatedGPU(self, i) for i in range(len(self.gpus), index + 1)]
        return super().gpu(index)

    def cpus(self) -> list[CPU]:
        """One simulated CPU package (with DRAM) on this system's clock."""
        if self._cpus is None:
            tdp, dram = self._cpu_args
            self._cpus = [SimulatedCPU(self.clock, 0, tdp, dram)]
        return self._cpus

    def snapshot(self, gpus: list[GPU]) -> tuple[float, list[float]]:
        """One wall-clock update for the clock and every counter, so they describe one instant."""
        if self.replaced_by is not None:
            self.check_current()
        self._sync()
        return self._now, [g._energy if isinstance(g, SimulatedGPU) else g.energy() for g in gpus]

    def wall_time(self, t: float | None = None) -> float:
        return self._epoch + (self.clock() if t is None else t)

    def window_hint(self, elapsed: float) -> str | None:
        return NO_STEP_HINT if self.virtual_clock and elapsed == 0 else None

    def _watts(self, gpu: SimulatedGPU) -> float:
        return self.step_cost(self.batch_size, gpu._limit)[1]

    def _sync(self) -> None:
        """Wall clock: account for the real time passed since the last reading."""
        if self.clock_mode != "wall":
            return
        with self._lock:
            self._charge(self._pace.elapsed())

    def mark_step(self) -> None:
        """Wall clock: a training step ended; it costs the calibrated step time (see sim_wall)."""
        if self.clock_mode != "wall":
            return
        with self._lock:
            if self._pace.base is None:  # calibrating: real time is what the steps cost
                self._charge(self._pace.elapsed())
            self._charge(self._pace.mark())  # calibrated: its length, however long it paused

    def pace_ready(self) -> bool:
        """Whether a window opened now holds paced steps only (wall clock: calibrated)."""
        return self.clock_mode != "wall" or self._pace.ready

    def slowdown(self, power_limit: float, batch_size: int | None = None) -> float:
        """The trace's time per step at ``power_limit`` over its time at the maximum limit."""
        bs = batch_size or self.batch_size
        top = self.measured_limits(bs)[1]
        return self.step_cost(bs, power_limit)[0] / self.step_cost(bs, top)[0]

    def measured_limits(self, batch_size: int | None = None) -> tuple[float, float]:
        """The lowest and highest power limit the trace measured at ``batch_size``: the range
        the simulated GPU answers for (its power-limit constraints)."""
        pl = self._curves[self._check_batch_size(batch_size or self.batch_size)][0]
        return float(pl.min()), float(pl.max())

    @property
    def min_limit(self) -> float:
        return self.measured_limits()[0]

    @property
    def max_limit(self) -> float:
        return self.measured_limits()[1]

    def _charge(self, real: float) -> None:
        """``real`` seconds of work at the GPUs' current limits; the slowest sets the clock."""
        if real <= 0:
            return
        t0, dt, powers = self._now, 0.0, {}
        for g in self.gpus:
            busy = real * self.slowdown(g._limit)
            watts = self._watts(g)
            g._energy += watts * busy
            g._power = powers[g.index] = watts
            dt = max(dt, busy)
        self._now = t0 + dt
        for listener in self._listeners:
            listener(t0, self._now, powers)

    # --- workload ---------------------------------------------------------------------------
    def set_workload(
        self, workload: str, batch_size: int | None = None, num_samples: int | None = None
    ) -> None:
        """Switch the simulated workload (and its default batch size)."""
        dataset = workload.split("/")[0]
        rows = power_curves(self.trace, dataset)
        self.workload = dataset
        self.network = str(rows["network"].iloc[0])
        self._curves = {
            int(bs): (
                g["power_limit"].to_numpy(float),
                g["time_per_epoch"].to_numpy(float),
                g["average_power"].to_numpy(float),
            )
            for bs, g in rows.groupby("batch_size")
        }
        if num_samples is not None:
            num_samples = integer(num_samples, "num_samples", 1, 10**12, text_ok=False)
        if num_samples is None:
            try:
                num_samples = get_workload(dataset).num_samples
            except ValueError:
                raise InputError(
                    f"zeus-nb does not know the training-set size of {dataset!r}; pass "
                    "num_samples= so epochs can be split into steps"
                ) from None
        self.num_samples = int(num_samples)
        if batch_size is None:
            try:
                b0 = get_workload(dataset).default_batch_size
            except ValueError:
                b0 = min(self._curves)
            batch_size = max(b for b in self._curves if b <= b0) if b0 >= min(self._curves) else b0
        self.batch_size = self._check_batch_size(batch_size)
        self._cache: dict[tuple[int, float], tuple[float, float]] = {}

    @property
    def batch_sizes(self) -> list[int]:
        return sorted(self._curves)

    def _check_batch_size(self, batch_size: int) -> int:
        bs = int(batch_size)
        if bs not in self._curves:
            raise InputError(
                f"the {self.source} trace has no batch size {bs} for {self.workload}; "
                f"use one of {self.batch_sizes}"
            )
        return bs

    def steps_per_epoch(self, batch_size: int | None = None) -> int:
        return math.ceil(self.num_samples / (batch_size or self.batch_size))

    def step_cost(self, batch_size: int, power_limit: float) -> tuple[float, float]:
        """(seconds, watts) of one noiseless step: exact trace values at measured limits, times
        this rank's factors (see :func:`rank_factors`; 1 unless a spread or straggler is set)."""
        key = (batch_size, power_limit)
        cost = self._cache.get(key)
        if cost is None:
            pl, t, p = self._curves[self._check_batch_size(batch_size)]
            if not pl.min() - 1e-9 <= power_limit <= pl.max() + 1e-9:
                raise SimulationError(
                    f"the {self.source} trace measured {self.workload} at batch size "
                    f"{batch_size} only from {pl.min():g} to {pl.max():g} W, not at "
                    f"{power_limit:g} W: the simulated GPU answers only for what its trace "
                    "measured (between measured limits it interpolates linearly); set a limit in "
                    "that range or use another batch size"
                )
            epoch_time = float(np.interp(power_limit, pl, t))
            time_factor, power_factor = self.rank_factors
            cost = (
                time_factor * epoch_time / self.steps_per_epoch(batch_size),
                power_factor * float(np.interp(power_limit, pl, p)),
            )
            self._cache[key] = cost
        return cost

    # --- clock and work ---------------------------------------------------------------------
    def clock(self) -> float:
        self._sync()
        return self._now

    def step(self, n: int = 1, batch_size: int | None = None) -> None:
        """Run ``n`` steps on every GPU in lockstep; the slowest GPU sets the pace.

        On the wall clock, real time is what passes: a step only brings the counters up to now.
        """
        n, batch_size = step_count(n, batch_size)
        if n == 0:
            return
        self.steps_taken += n
        if self.clock_mode == "wall":
            self._sync()
            return
        bs = batch_size or self.batch_size
        t0 = self._now
        powers: dict[int, float] = {}
        dt = 0.0
        for g in self.gpus:
            t_step, watts = self.step_cost(bs, g._limit)
            if self.noise:
                t_step *= max(0.1, 1.0 + self.noise * self._rng.standard_normal())
                watts *= max(0.1, 1.0 + self.noise * self._rng.standard_normal())
            busy = t_step * n
            g._energy += watts * busy
            g._power = watts
            powers[g.index] = watts
            dt = max(dt, busy)
        self._now = t0 + dt
        for listener in self._listeners:
            listener(t0, self._now, powers)

    def advance_idle(self, seconds: float) -> None:
        """Let virtual time pass with no GPU work (the trace has no idle power: 0 J is added)."""
        seconds = number(seconds, "advance_idle(seconds)", IDLE, "time cannot go back")
        if self.clock_mode == "wall":
            raise InputError("the wall clock cannot be advanced; time.sleep() instead")
        t0 = self._now
        self._now += seconds
        for listener in self._listeners:
            listener(t0, self._now, {g.index: 0.0 for g in self.gpus})

    def info(self) -> dict[str, str]:
        return {
            "backend": f"simulated ({self.clock_mode} clock)",
            "trace": self.source,
            "workload": f"{self.workload}/{self.network}, batch size {self.batch_size}",
            "noise": f"{self.noise:g} (seed {self.seed})",
        }

    def power_sampler(self, indices: list[int], period: float) -> PowerSampler:
        if self.clock_mode == "wall":
            return ThreadSampler(self, indices, period)

        return SimSampler(self, indices, period)
