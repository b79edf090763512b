"""Synthetic power-limit profiles, to check adaptive profiling beyond the one GPU it was tuned on.

The model (also in ``docs/power_limit_optimizer.md``). A profile has ``n`` power limits (5 to 9),
``max_limit`` down in ``pl_step`` W strides. Limit ``i`` (0 = highest) sits at depth
``x = i / (n - 1)`` in [0, 1]. One training step at depth ``x`` takes, without noise,

* time ``t(x) = t0 * (1 + slope * x**2)``: time only grows as the limit falls;
* energy ``e(x) = e0 * (1 + curvature * (x - x_opt)**2)``: least at ``x_opt``, the energy optimum,
  at the ``top`` (x_opt 0), ``middle`` (0.5) or ``bottom`` (1) of the range.

A ``flat`` curve has ``slope`` 0.05 and ``curvature`` 0.03: over the whole range time grows by 5 %
and energy varies by at most 3 %, so neighbouring limits differ by about a window's noise; a
``steep`` one has ``slope`` 0.5 and ``curvature`` 0.4.
Each step's time is multiplied by ``1 + noise * z`` and its energy by the same factor times
``1 + noise / 2 * z'`` (``z``, ``z'`` standard normal, independent per step; ``noise`` 1 % to 5 %):
a window's energy follows its time, and its average power varies half as much (a modelling
choice, not a measurement). ``t0`` (1 s) and ``e0`` (200 J) only set the units: every comparison
is relative.

:class:`LoggedProfile` takes its noise-free curve from a real profiling log instead, and
:func:`trace_profiles` from each (workload, optimizer, batch size) of a shipped power trace (the
V100's: seven limits, 250 W down to 100 W); the step noise is the same.

:class:`SyntheticMonitor` runs :class:`GlobalPowerLimitOptimizer` on such a profile with no GPU:
it offers the monitor interface the optimizer uses (``gpus``, ``system``, windows).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from zeus_nb.data.traces import load_power_trace
from zeus_nb.device.replay import load_profile_log
from zeus_nb.errors import InputError, TraceFormatError
from zeus_nb.inputs.api import unchecked_arguments
from zeus_nb.monitor import Measurement
from zeus_nb.optimizer.power_limit.selectors import PowerLimitMeasurement

__all__ = [
    "CURVES",
    "LoggedProfile",
    "OPTIMA",
    "SyntheticMonitor",
    "SyntheticProfile",
    "trace_profiles",
]

OPTIMA = {"top": 0.0, "middle": 0.5, "bottom": 1.0}
CURVES = {"flat": (0.05, 0.03), "steep": (0.5, 0.4)}  # (time slope, energy curvature)


@dataclass(frozen=True)
class SyntheticProfile:
    """One synthetic GPU: ``n`` limits, the energy optimum's place, the curve's steepness, noise."""

    n: int
    optimum: str = "middle"
    curve: str = "steep"
    noise: float = 0.03
    max_limit: float = 300.0
    pl_step: float = 25.0
    t0: float = 1.0
    e0: float = 200.0

    def __post_init__(self) -> None:
        if self.n < 2:
            raise InputError(f"a profile needs at least 2 limits, got {self.n}")
        if self.optimum not in OPTIMA or self.curve not in CURVES:
            raise InputError(f"optimum in {list(OPTIMA)} and curve in {list(CURVES)}")

    @property
    def limits(self) -> list[float]:
        """Highest first."""
        return [self.max_limit - i * self.pl_step for i in range(self.n)]

    @property
    def min_limit(self) -> float:
        return self.limits[-1]

    def step_cost(self, limit: float) -> tuple[float, float]:
        """Noise-free (s, J) of one step at ``limit``."""
        x = (self.max_limit - limit) / (self.max_limit - self.min_limit)
        slope, curvature = CURVES[self.curve]
        time = self.t0 * (1.0 + slope * x * x)
        energy = self.e0 * (1.0 + curvature * (x - OPTIMA[self.optimum]) ** 2)
        return time, energy

    def exact(self, steps: int = 1) -> list[PowerLimitMeasurement]:
        """Noise-free measurements of ``steps`` steps at every limit: the ground truth."""
        out = []
        for w in self.limits:
            t, e = self.step_cost(w)
            out.append(PowerLimitMeasurement(w, e * steps, t * steps))
        return out


@dataclass(frozen=True)
class LoggedProfile(SyntheticProfile):
    """A real profiling log's per-limit time and energy as the noise-free curve, plus step noise.

    One step at limit W costs the logged window's time and energy (summed over the log's GPUs,
    seen as one GPU) divided by ``steps_per_window``. Build it with :meth:`from_log`.
    """

    steps: dict[float, tuple[float, float]] = field(default_factory=dict, compare=False)

    @classmethod
    def from_log(cls, path, noise: float, steps_per_window: int = 40) -> LoggedProfile:
        log = load_profile_log(path)
        limits = log.power_limits
        strides = {round(a - b, 6) for a, b in zip(limits, limits[1:], strict=False)}
        if len(strides) != 1:
            raise InputError(f"{path}: the logged limits are not evenly spaced: {limits}")
        steps = {
            w: (log.elapsed[w] / steps_per_window, sum(log.energy[w].values()) / steps_per_window)
            for w in limits
        }
        return cls(
            len(limits), noise=noise, max_limit=limits[0], pl_step=strides.pop(), steps=steps
        )

    def step_cost(self, limit: float) -> tuple[float, float]:
        return self.steps[limit]


def trace_profiles(gpu: str = "v100", noise: float = 0.03) -> list[tuple[str, LoggedProfile]]:
    """Every (workload, optimizer, batch size) of a shipped power trace as a noisy profile.

    One step at limit W costs the trace's epoch time and energy (time x average power) at W,
    divided by the epoch time at the highest limit: a step there takes 1 s, so each curve weighs
    the same in a total, and only the ratios between limits, the trace's, matter. Labelled
    ``dataset/network/optimizer/batch size`` and sorted by those.
    """

    out = []
    trace = load_power_trace(gpu)
    keys = ["dataset", "network", "optimizer", "batch_size"]
    for key, rows in trace.groupby(keys, sort=True):
        rows = rows.sort_values("power_limit", ascending=False)
        limits = [float(w) for w in rows["power_limit"]]
        strides = {round(a - b, 6) for a, b in zip(limits, limits[1:], strict=False)}
        if len(limits) < 2 or len(strides) != 1:
            raise TraceFormatError(
                f"{gpu} trace, {'/'.join(map(str, key))}: power limits {limits} are not evenly "
                "spaced; give every curve the same stride (e.g. 25 W)"
            )
        unit = float(rows["time_per_epoch"].iloc[0])
        steps = {
            w: (t / unit, t * p / unit)
            for w, t, p in zip(limits, rows["time_per_epoch"], rows["average_power"], strict=True)
        }
        profile = LoggedProfile(
            len(limits), noise=noise, max_limit=limits[0], pl_step=strides.pop(), steps=steps
        )
        out.append(("/".join(str(k) for k in key), profile))
    return out


@unchecked_arguments("as SyntheticSystem")
class SyntheticGPU:
    """The GPU interface the optimizer and its power-limit guard use, over a profile."""

    def __init__(self, system: SyntheticSystem):
        self._system = system
        self.index = 0
        self.name = f"Synthetic GPU ({system.profile.n} limits)"

    def power_limit_constraints(self) -> tuple[float, float]:
        return self._system.profile.min_limit, self._system.profile.max_limit

    def default_power_limit(self) -> float:
        return self._system.profile.max_limit

    def get_power_limit(self) -> float:
        return self._system.limit

    def set_power_limit(self, watts: float) -> None:
        lo, hi = self.power_limit_constraints()
        if not lo <= watts <= hi:
            raise InputError(f"{watts} W is outside [{lo}, {hi}] W")
        self._system.limit = float(watts)

    def can_set_power_limit(self) -> tuple[bool, str]:
        return True, ""

    def energy(self) -> float:
        return self._system.energy


@unchecked_arguments(
    "a teaching model built from checked profile numbers; its GPUs check limits "
    "through GPU.check_power_limit"
)
@dataclass
class SyntheticSystem:
    """A clock and an energy counter that advance one noisy step at a time.

    Every limit has its own noise stream, seeded by ``seed`` and the limit: the k-th step run at
    a limit gets the same noise whatever was run before. Two profiling runs with one seed thus
    read the same steps at every limit they visit (common random numbers), so comparing their
    choices shows what their rules did, not which run drew luckier noise.
    """

    profile: SyntheticProfile
    seed: int = 0
    limit: float = 0.0
    now: float = 0.0
    energy: float = 0.0
    backend: str = "synthetic"
    _streams: dict[float, random.Random] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.limit = self.profile.max_limit

    def clock(self) -> float:
        return self.now

    def _rng(self) -> random.Random:
        rng = self._streams.get(self.limit)
        if rng is None:
            rng = self._streams[self.limit] = random.Random(f"{self.seed}/{self.limit:g}")
        return rng

    def step(self) -> None:
        t, e = self.profile.step_cost(self.limit)
        sigma, rng = self.profile.noise, self._rng()
        factor = max(0.0, 1.0 + sigma * rng.gauss(0.0, 1.0))
        power_factor = max(0.0, 1.0 + sigma / 2 * rng.gauss(0.0, 1.0))
        self.now += t * factor
        self.energy += e * factor * power_factor


class SyntheticMonitor:
    """Monitor windows over a :class:`SyntheticSystem`; call :meth:`step` once per training step."""

    persist_power_limits = False  # nothing outlives the process: no restore state file

    def __init__(self, profile: SyntheticProfile, seed: int = 0):
        self.system = SyntheticSystem(profile, seed)
        self.gpus = [SyntheticGPU(self.system)]
        self._windows: dict[str, tuple[float, float]] = {}

    def step(self) -> None:
        self.system.step()

    def begin_window(self, key: str, sync_execution: bool | None = None) -> None:
        self._windows[key] = (self.system.now, self.system.energy)

    def end_window(
        self, key: str, sync_execution: bool | None = None, cancel: bool = False
    ) -> Measurement:
        t0, e0 = self._windows.pop(key)
        if cancel:
            return Measurement(0.0, {0: 0.0})
        return Measurement(self.system.now - t0, {0: self.system.energy - e0})
