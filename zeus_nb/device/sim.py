"""A simulated GPU driven by real measurements.

Each training step costs the time and energy that the Zeus power trace measured for the workload at
the current power limit: time per step = time per epoch / steps per epoch, energy = average power x
time. Between measured limits both are interpolated piecewise linearly, which reproduces every
measured point exactly and never overshoots (monotone data stays monotone). The clock is virtual: it
advances only when :meth:`SimulatedSystem.step` runs, so CPU time spent by the notebook never leaks
into simulated time, and results are deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np

from zeus_nb.device.base import GPU, GPUSystem, PowerSampler, PowerTimeline
from zeus_nb.errors import InputError
from zeus_nb.traces import GPU_NAMES, get_workload, load_power_trace, power_curves
from zeus_nb.validate import NOISE, integer, number

# (t0, t1, {gpu index: watts}) for every advance of the virtual clock.
Listener = Callable[[float, float, dict[int, float]], None]


class SimulatedGPU(GPU):
    """One simulated GPU; all its numbers come from its system's power trace."""

    def __init__(self, system: SimulatedSystem, index: int):
        self.index = index
        self._system = system
        self._limit = system.max_limit
        self._energy = 0.0
        self._power = 0.0

    @property
    def name(self) -> str:
        return self._system.gpu_name

    def power_limit_constraints(self) -> tuple[float, float]:
        return (self._system.min_limit, self._system.max_limit)

    def default_power_limit(self) -> float:
        return self._system.max_limit

    def get_power_limit(self) -> float:
        return self._limit

    def set_power_limit(self, watts: float) -> None:
        self._limit = self.check_power_limit(watts)

    def supports_energy_counter(self) -> bool:
        return True

    def energy(self) -> float:
        return self._energy

    def power(self) -> float:
        return self._power

    def can_set_power_limit(self) -> tuple[bool, str]:
        return True, "simulated GPU: power limits can always be changed"


class SimulatedSystem(GPUSystem):
    """Several identical simulated GPUs sharing one virtual clock.

    Args:
        gpu: ``"v100"`` or ``"a40"`` (bundled traces), or the path of a power-trace CSV.
        workload: dataset name of the simulated workload (``"imagenet"``, ``"cifar100"``...).
        batch_size: batch size the steps run at by default (the workload's default if None).
        num_gpus: number of GPUs (indices 0..num_gpus-1).
        noise: relative standard deviation of per-step time and power (0 = exact trace values).
        seed: seed of the noise generator.
        num_samples: training-set size, needed only for datasets zeus-nb does not know.
    """

    backend = "sim"

    def __init__(
        self,
        gpu: str | Path = "a40",
        workload: str = "imagenet",
        batch_size: int | None = None,
        num_gpus: int = 1,
        noise: float = 0.0,
        seed: int = 0,
        num_samples: int | None = None,
    ):
        num_gpus = integer(num_gpus, "parameter num_gpus", 1, 1024)
        # NaN noise once made every step 10x shorter and every joule 100x smaller, silently.
        noise = number(noise, "parameter noise", NOISE, "use e.g. 0.02 for 2% noise, or 0")
        seed = integer(seed, "parameter seed", 0, 2**32 - 1)
        self.source = str(gpu)
        self.trace = load_power_trace(gpu)
        key = self.source.lower()
        self.gpu_name = (
            f"{GPU_NAMES[key]} (simulated)"
            if key in GPU_NAMES
            else f"simulated GPU ({Path(self.source).stem})"
        )
        self.min_limit = float(self.trace["power_limit"].min())
        self.max_limit = float(self.trace["power_limit"].max())
        self.noise = float(noise)
        self.seed = int(seed)
        self._rng = np.random.default_rng(seed)
        self._now = 0.0
        self._listeners: list[Listener] = []
        self.gpus = [SimulatedGPU(self, i) for i in range(num_gpus)]
        self.set_workload(workload, batch_size, num_samples)

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
        if num_samples is None:
            try:
                num_samples = get_workload(dataset).num_samples
            except ValueError:
                raise ValueError(
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
        """(seconds, watts) of one noiseless step: exact trace values at measured limits."""
        key = (batch_size, power_limit)
        cost = self._cache.get(key)
        if cost is None:
            pl, t, p = self._curves[self._check_batch_size(batch_size)]
            epoch_time = float(np.interp(power_limit, pl, t))
            cost = (
                epoch_time / self.steps_per_epoch(batch_size),
                float(np.interp(power_limit, pl, p)),
            )
            self._cache[key] = cost
        return cost

    # --- clock and work ---------------------------------------------------------------------
    def clock(self) -> float:
        return self._now

    def step(self, n: int = 1, batch_size: int | None = None) -> None:
        """Run ``n`` steps on every GPU in lockstep; the slowest GPU sets the pace."""
        if n <= 0:
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
        if seconds < 0:
            raise ValueError("cannot go back in time")
        t0 = self._now
        self._now += seconds
        for listener in self._listeners:
            listener(t0, self._now, {g.index: 0.0 for g in self.gpus})

    def info(self) -> dict[str, str]:
        return {
            "backend": "simulated (virtual clock)",
            "trace": self.source,
            "workload": f"{self.workload}/{self.network}, batch size {self.batch_size}",
            "noise": f"{self.noise:g} (seed {self.seed})",
        }

    def power_sampler(self, indices: list[int], period: float) -> PowerSampler:
        return _SimSampler(self, indices, period)


class _SimSampler(PowerSampler):
    """Samples the piecewise-constant simulated power on a grid of virtual time."""

    MAX_SAMPLES_PER_STEP = 10_000

    def __init__(self, system: SimulatedSystem, indices: list[int], period: float):
        super().__init__(indices, period)
        for i in indices:
            system.gpu(i)
        self._system = system
        self._next = 0.0

    def start(self) -> _SimSampler:
        self._next = self._system.clock()
        self._system._listeners.append(self._on_advance)
        return self

    def _on_advance(self, t0: float, t1: float, powers: dict[int, float]) -> None:
        count = 0
        while self._next < t1 and count < self.MAX_SAMPLES_PER_STEP:
            for i, pts in self.timeline.samples.items():
                pts.append((self._next, powers.get(i, 0.0)))
            self._next += self.timeline.period
            count += 1
        if self._next < t1:  # skip ahead rather than flood memory
            skipped = math.ceil((t1 - self._next) / self.timeline.period)
            self._next += skipped * self.timeline.period

    def stop(self) -> PowerTimeline:
        if self._on_advance in self._system._listeners:
            self._system._listeners.remove(self._on_advance)
        return self.timeline
