"""Find the best GPU power limit while training: profile each limit, then keep the optimum.

:class:`GlobalPowerLimitOptimizer` is driven by four calls in the training loop
(``on_epoch_begin``, ``on_step_begin``, ``on_step_end``, ``on_epoch_end``). It waits
``wait_steps`` steps, then for each power limit from the maximum down in ``pl_step`` W strides it
runs ``warmup_steps`` steps unmeasured and ``profile_steps`` steps inside a monitor window, and
finally applies the limit its :class:`OptimumSelector` picks. Progress carries across epochs: an
epoch boundary pauses the open window (validation is not measured) and the next epoch resumes it.

With ``adaptive=True`` (the default) it stops early where a limit cannot win: a window is
abandoned once its partial readings rule the limit out, and the descent stops once
:attr:`GlobalPowerLimitOptimizer.patience` limits in a row lost by more than the noise margin, or
once time alone (which only grows as the limit falls) rules out every lower limit. Selectors opt
in by implementing :meth:`OptimumSelector.rules_out`; they may also reorder the search
(:meth:`OptimumSelector.adaptive_order`) and declare the choice final early
(:meth:`OptimumSelector.settled`).

Under ``torch.distributed`` every window's time is max-reduced and its energy sum-reduced across
ranks, so all ranks choose the same limit, and :class:`ZeusCost` counts every GPU in MaxPower.
GPU limits are restored to their original values when the optimizer is closed, at exit and on
SIGTERM (see :mod:`zeus_nb.optimizer.restore`).
"""

from __future__ import annotations

import json
import math
import sys
import warnings
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from zeus_nb.errors import PowerLimitPermissionError, ZeusNbError
from zeus_nb.optimizer.restore import PowerLimitGuard
from zeus_nb.train.distributed import initialized_dist, reduce_time_energy
from zeus_nb.tradeoff import check_eta, zeus_cost

__all__ = [
    "Energy",
    "GlobalPowerLimitOptimizer",
    "MaxSlowdownConstraint",
    "OptimumSelector",
    "PowerLimitMeasurement",
    "ProfileError",
    "Time",
    "ZeusCost",
]

WINDOW_PREFIX = "__GlobalPowerLimitOptimizer_"
PROFILE_FORMAT = "zeus-nb power-limit profile"


class ProfileError(ZeusNbError, ValueError):
    """A saved profile is corrupt, or was made on another GPU model or power-limit range."""


@dataclass(frozen=True)
class PowerLimitMeasurement:
    """One profiled power limit: W, J summed over every GPU of the job, s of the slowest one."""

    power_limit: float
    energy: float
    time: float
    num_gpus: int = 1


# --- selectors ----------------------------------------------------------------------------------
def _descending(measurements: Sequence[PowerLimitMeasurement]) -> list[PowerLimitMeasurement]:
    if not measurements:
        raise ValueError("no power-limit measurements to select from")
    return sorted(measurements, key=lambda m: -m.power_limit)


class OptimumSelector(ABC):
    """Chooses one power limit from the profiled ones. Subclass it for your own criterion."""

    @abstractmethod
    def select(self, measurements: Sequence[PowerLimitMeasurement]) -> float:
        """The chosen power limit in W."""

    def rules_out(
        self,
        measurements: Sequence[PowerLimitMeasurement],
        energy: float,
        time: float,
        margin: float,
    ) -> bool:
        """Whether a limit below all measured ones, using at least ``energy`` J and ``time`` s,
        could not be chosen even if the measurements were off by ``margin`` (relative).

        Adaptive profiling only prunes for selectors that override this; the default never
        rules anything out, so custom selectors always see every limit.
        """
        return False

    def adaptive_order(self, limits: list[float]) -> list[float]:
        """The order adaptive profiling measures ``limits`` (given highest first) in."""
        return list(limits)

    def settled(
        self, measurements: Sequence[PowerLimitMeasurement], remaining: list[float]
    ) -> bool:
        """Whether measuring the ``remaining`` limits could not change the choice."""
        return False

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({fields})"


class _ArgminSelector(OptimumSelector):
    """Least ``score``; ties go to the higher limit."""

    def score(self, energy: float, time: float, measurements) -> float:
        raise NotImplementedError

    def select(self, measurements: Sequence[PowerLimitMeasurement]) -> float:
        ordered = _descending(measurements)
        best = ordered[0]
        best_score = self.score(best.energy, best.time, ordered)
        for m in ordered[1:]:
            s = self.score(m.energy, m.time, ordered)
            if s < best_score:
                best, best_score = m, s
        return best.power_limit

    def rules_out(self, measurements, energy, time, margin) -> bool:
        if not measurements:
            return False
        best = min(self.score(m.energy, m.time, measurements) for m in measurements)
        return self.score(energy, time, measurements) > best * (1.0 + margin)


class Energy(_ArgminSelector):
    """The limit with the least energy."""

    def score(self, energy, time, measurements) -> float:
        return energy


class Time(_ArgminSelector):
    """The limit with the least time."""

    def score(self, energy, time, measurements) -> float:
        return time


class ZeusCost(_ArgminSelector):
    """Least ``eta x Energy + (1 - eta) x MaxPower x Time``.

    MaxPower is the highest profiled limit times the number of GPUs: ``world_size`` if given,
    else the GPU count the measurements were summed over (all ranks under torch.distributed).
    """

    def __init__(self, eta_knob: float = 0.5, world_size: int | None = None):
        self.eta_knob = check_eta(eta_knob)
        if world_size is not None and (int(world_size) != world_size or world_size < 1):
            raise ValueError(
                f"world_size must be an integer >= 1 (GPUs in the job), got {world_size}"
            )
        self.world_size = None if world_size is None else int(world_size)

    def __repr__(self) -> str:
        ws = "" if self.world_size is None else f", world_size={self.world_size}"
        return f"ZeusCost(eta_knob={self.eta_knob:g}{ws})"

    def max_power(self, measurements: Sequence[PowerLimitMeasurement]) -> float:
        gpus = self.world_size or max(m.num_gpus for m in measurements)
        return max(m.power_limit for m in measurements) * gpus

    def score(self, energy, time, measurements) -> float:
        return zeus_cost(energy, time, self.eta_knob, self.max_power(measurements))


class MaxSlowdownConstraint(OptimumSelector):
    """The lowest limit whose time is within ``factor`` x the time at the highest limit."""

    def __init__(self, factor: float):
        factor = float(factor)
        if not factor >= 1.0:
            raise ValueError(f"factor must be >= 1 (1.1 allows 10% slowdown), got {factor}")
        self.factor = factor

    def _budget(self, measurements) -> float:
        return self.factor * _descending(measurements)[0].time

    def select(self, measurements: Sequence[PowerLimitMeasurement]) -> float:
        budget = self._budget(measurements)
        return min(m.power_limit for m in measurements if m.time <= budget)

    def rules_out(self, measurements, energy, time, margin) -> bool:
        return bool(measurements) and time > self._budget(measurements) * (1.0 + margin)

    def adaptive_order(self, limits: list[float]) -> list[float]:
        # After the reference (highest) limit, try the lowest: if it meets the constraint it is
        # the answer and nothing else needs measuring; if not, it is abandoned early.
        if len(limits) <= 2:
            return list(limits)
        return [limits[0], limits[-1], *limits[1:-1]]

    def settled(self, measurements, remaining) -> bool:
        # Only a lower limit that meets the constraint could displace the current choice.
        return bool(measurements) and all(w > self.select(measurements) for w in remaining)


# --- the optimizer ------------------------------------------------------------------------------
WAIT, WARMUP, PROFILE, DONE = "wait", "warmup", "profile", "done"


class GlobalPowerLimitOptimizer:
    """Profile power limits during training and apply the optimum to every monitored GPU.

    Args:
        monitor: a :class:`~zeus_nb.monitor.ZeusMonitor` (or a replay monitor); its GPUs all
            get the same limit.
        optimum_selector: how to choose; default ``ZeusCost(eta_knob=0.5)``.
        wait_steps: steps to let pass before profiling (e.g. cudnn autotuning).
        warmup_steps: unmeasured steps after each limit change (0 is fine).
        profile_steps: measured steps per limit.
        pl_step: stride in W from the maximum limit down; never outside the GPU's range.
        profile_path: JSON file; if it exists its optimum is applied without profiling, else the
            profile is saved there.
        adaptive: skip limits (and abandon windows) that cannot win for this selector; on the
            shipped real profiling logs it chose as exhaustive profiling did while spending about
            40% less profiling time (``benchmarks/bench_plo.py``). False profiles every limit.
        noise_margin: relative measurement noise adaptive decisions allow for.
        verbose: print one line when profiling starts and when the optimum is applied.
    """

    # Adaptive descent stops after this many limits in a row lost by more than the noise margin.
    patience = 3

    def __init__(
        self,
        monitor,
        optimum_selector: OptimumSelector | None = None,
        wait_steps: int = 1,
        warmup_steps: int = 10,
        profile_steps: int = 40,
        pl_step: int = 25,
        profile_path: str | Path | None = None,
        adaptive: bool = True,
        noise_margin: float = 0.05,
        verbose: bool = True,
    ):
        for name, value, least in (
            ("wait_steps", wait_steps, 0),
            ("warmup_steps", warmup_steps, 0),
            ("profile_steps", profile_steps, 1),
        ):
            if int(value) != value or value < least:
                raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
        if not pl_step > 0:
            raise ValueError(f"pl_step must be > 0 W, got {pl_step!r}")
        if not 0.0 <= noise_margin < 1.0:
            raise ValueError(f"noise_margin must be within [0, 1), got {noise_margin!r}")
        if optimum_selector is None:
            optimum_selector = ZeusCost(eta_knob=0.5)
        if not isinstance(optimum_selector, OptimumSelector):
            raise TypeError(
                "optimum_selector must be an OptimumSelector (Energy(), Time(), ZeusCost(...), "
                f"MaxSlowdownConstraint(...) or your subclass), got {optimum_selector!r}"
            )
        self.monitor = monitor
        self.optimum_selector = optimum_selector
        self.wait_steps = int(wait_steps)
        self.warmup_steps = int(warmup_steps)
        self.profile_steps = int(profile_steps)
        self.pl_step = pl_step
        self.profile_path = Path(profile_path) if profile_path is not None else None
        self.adaptive = bool(adaptive)
        self.noise_margin = float(noise_margin)
        self.verbose = verbose

        self.gpus = list(monitor.gpus)
        if not self.gpus:
            raise ValueError("the monitor measures no GPU")
        self._check_permission()
        lows, highs = zip(*(g.power_limit_constraints() for g in self.gpus), strict=True)
        self.min_limit, self.max_limit = float(max(lows)), float(min(highs))
        if self.min_limit > self.max_limit:
            raise ValueError("the monitored GPUs share no power-limit range; monitor alike GPUs")
        self.power_limits = self._limits()
        self._order = (
            optimum_selector.adaptive_order(self.power_limits) if adaptive else self.power_limits
        )
        self.gpu_model = self.gpus[0].name

        system = getattr(monitor, "system", None)
        self._clock = system.clock if system is not None else None
        self._guard = PowerLimitGuard(
            self.gpus,
            backend=getattr(system, "backend", "auto"),
            persist=getattr(monitor, "persist_power_limits", True),
        )

        self.phase = WAIT
        self.measurements: list[PowerLimitMeasurement] = []
        self.local_measurements: list[PowerLimitMeasurement] = []
        self.abandoned: dict[float, str] = {}  # limit -> why adaptive profiling skipped it
        self.optimal_power_limit: float | None = None
        self.profiling_time = 0.0  # s from the first profiled step to the optimum (this rank)
        self.profiling_energy = 0.0  # J on this rank's GPUs over the same span
        self._applied = False
        self._waited = 0
        self._index = -1
        self._warm = 0
        self._prof = 0
        self._acc = (0.0, 0.0)
        self._window: str | None = None
        self._seg0: tuple[float, float] = (0.0, 0.0)
        self._losses = 0
        self._recent_times: list[float] = []
        self._start: tuple[float, float] | None = None

        if self.profile_path is not None and self.profile_path.exists():
            self._load_profile(self.profile_path)

    # --- setup ----------------------------------------------------------------------------------
    def _check_permission(self) -> None:
        for g in self.gpus:
            ok, why = g.can_set_power_limit()
            if not ok:
                raise PowerLimitPermissionError(
                    f"GPU {g.index}: cannot change its power limit: {why}"
                )
        for g in self.gpus:  # setting the current value changes nothing but proves the right
            lo, hi = g.power_limit_constraints()
            current = g.get_power_limit()
            if lo <= current <= hi:
                g.set_power_limit(current)

    def _limits(self) -> list[float]:
        out = []
        w = self.max_limit
        while w >= self.min_limit - 1e-9:
            out.append(float(round(w, 6)))
            w -= self.pl_step
        return out

    # --- profile file ---------------------------------------------------------------------------
    def _profile_header(self) -> dict[str, Any]:
        return {
            "format": PROFILE_FORMAT,
            "version": 1,
            "gpu_model": self.gpu_model,
            "power_limit_constraints": [self.min_limit, self.max_limit],
            "pl_step": self.pl_step,
        }

    def _load_profile(self, path: Path) -> None:
        try:
            data = json.loads(path.read_text())
            if not isinstance(data, dict) or data.get("format") != PROFILE_FORMAT:
                raise ValueError("not a zeus-nb power-limit profile")
            measurements = [
                PowerLimitMeasurement(
                    float(m["power_limit"]),
                    float(m["energy"]),
                    float(m["time"]),
                    int(m.get("num_gpus", 1)),
                )
                for m in data["measurements"]
            ]
            if not measurements:
                raise ValueError("it holds no measurements")
            model = data["gpu_model"]
            lo, hi = (float(x) for x in data["power_limit_constraints"])
            step = data["pl_step"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ProfileError(
                f"power-limit profile {path} is unreadable ({e}); delete it to profile again"
            ) from None
        if model != self.gpu_model or (lo, hi) != (self.min_limit, self.max_limit):
            raise ProfileError(
                f"power-limit profile {path} was made on {model} with limits [{lo:g}, {hi:g}] W, "
                f"but these GPUs are {self.gpu_model} with [{self.min_limit:g}, "
                f"{self.max_limit:g}] W; use another profile_path or delete the file"
            )
        if step != self.pl_step:
            raise ProfileError(
                f"power-limit profile {path} used pl_step={step}, not {self.pl_step}; "
                "pass the same pl_step or delete the file"
            )
        pruned = data.get("pruned_for")
        if pruned and pruned != repr(self.optimum_selector):
            warnings.warn(
                f"{path} was profiled adaptively for {pruned}; {self.optimum_selector!r} "
                "chooses among the limits it kept only",
                stacklevel=3,
            )
        self.measurements = measurements
        self.optimal_power_limit = float(self.optimum_selector.select(measurements))
        self.phase = DONE

    def _save_profile(self, path: Path) -> None:
        data = self._profile_header()
        data["selector"] = repr(self.optimum_selector)
        data["pruned_for"] = repr(self.optimum_selector) if self.abandoned else None
        data["optimal_power_limit"] = self.optimal_power_limit
        data["measurements"] = [asdict(m) for m in self.measurements]
        data["abandoned"] = {f"{k:g}": v for k, v in self.abandoned.items()}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=1))

    # --- device ---------------------------------------------------------------------------------
    def _set_limit(self, watts: float) -> None:
        self._guard.record()
        for g in self.gpus:
            g.set_power_limit(watts)

    def _read(self) -> tuple[float, float]:
        """(clock s, summed energy J) straight from the GPUs, for partial windows.

        No CUDA sync here: work still queued only makes the partial readings smaller, so they
        stay lower bounds of the full window and adaptive decisions stay on the safe side.
        """
        now = self._clock() if self._clock is not None else 0.0
        return now, sum(g.energy() for g in self.gpus)

    def close(self) -> None:
        """Put every GPU back at the limit it had before this optimizer changed it."""
        self._guard.restore()

    def __enter__(self) -> GlobalPowerLimitOptimizer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def done(self) -> bool:
        """Whether the optimum is known."""
        return self.phase == DONE

    # --- training-loop hooks --------------------------------------------------------------------
    def on_epoch_begin(self) -> None:
        """Call at the start of each epoch."""
        if self.phase == DONE and not self._applied:
            self._apply()

    def on_epoch_end(self) -> None:
        """Call at the end of each epoch: pauses an open profiling window until the next step."""
        if self._window is not None:
            m = self.monitor.end_window(self._window)
            t, e = self._acc
            self._acc = (t + m.time, e + m.total_energy)
            self._window = None

    def on_step_begin(self) -> None:
        """Call before each training step."""
        if self.phase == DONE:
            if not self._applied:
                self._apply()
            return
        if self.phase == WAIT:
            if self._waited < self.wait_steps:
                return
            self._start = self._read()
            if self.verbose:
                print(
                    f"zeus-nb: profiling {len(self.power_limits)} power limits "
                    f"({self.power_limits[0]:g} W down to {self.power_limits[-1]:g} W)",
                    file=sys.stderr,
                )
            self._enter(0)
        if self.phase == PROFILE and self._window is None:
            self._window = f"{WINDOW_PREFIX}{self._order[self._index]:g}"
            self.monitor.begin_window(self._window)
            self._seg0 = self._read() if self.adaptive else (0.0, 0.0)

    def on_step_end(self) -> None:
        """Call after each training step."""
        if self.phase == WAIT:
            self._waited += 1
        elif self.phase == WARMUP:
            self._warm += 1
            if self._warm >= self.warmup_steps:
                self.phase = PROFILE
        elif self.phase == PROFILE and self._window is not None:
            self._prof += 1
            if self._prof >= self.profile_steps:
                m = self.monitor.end_window(self._window)
                self._window = None
                t, e = self._acc
                self._finish(t + m.time, e + m.total_energy, complete=True)
            elif self.adaptive and self.measurements:
                self._check_partial()

    # --- state machine --------------------------------------------------------------------------
    def _enter(self, index: int) -> None:
        self._index = index
        self._warm = self._prof = 0
        self._acc = (0.0, 0.0)
        self._set_limit(self._order[index])
        self.phase = WARMUP if self.warmup_steps > 0 else PROFILE

    def _check_partial(self) -> None:
        now, energy = self._read()
        t0, e0 = self._seg0
        at, ae = self._acc
        time, energy, _ = reduce_time_energy(at + now - t0, ae + energy - e0, len(self.gpus))
        sel, ms, margin = self.optimum_selector, self.measurements, self.noise_margin
        why = None
        if sel.rules_out(ms, energy, time, margin):
            why = "its partial window already lost"
        elif self._prof >= max(1, math.ceil(self.profile_steps / 4)):
            scale = self.profile_steps / self._prof * (1.0 - margin)
            if sel.rules_out(ms, energy * scale, time * scale, margin):
                why = "its partial window, extrapolated, lost"
                time = time * scale
        if why is not None:
            self.monitor.end_window(self._window, cancel=True)
            self._window = None
            self._finish(time, energy, complete=False, why=why)

    def _finish(self, time: float, energy: float, complete: bool, why: str = "") -> None:
        limit = self._order[self._index]
        if complete:
            local = PowerLimitMeasurement(limit, energy, time, len(self.gpus))
            t, e, n = reduce_time_energy(time, energy, len(self.gpus))
            self.local_measurements.append(local)
            measurement = PowerLimitMeasurement(limit, e, t, n)
            time = t
            lost = self.adaptive and self.optimum_selector.rules_out(
                self.measurements, e, t, self.noise_margin
            )
            self.measurements.append(measurement)
        else:
            self.abandoned[limit] = why
            lost = True
        stop = False
        remaining = self._order[self._index + 1 :]
        if self.adaptive:
            if self._index > 0 and limit > self._order[self._index - 1]:
                self._losses = 0  # a new descent starts
            self._losses = self._losses + 1 if lost else 0
            self._recent_times = self._recent_times[-1:] + [time]
            floor = min(self._recent_times) * (1.0 - self.noise_margin)
            time_bound = len(self._recent_times) >= 2 and self.optimum_selector.rules_out(
                self.measurements, 0.0, floor, self.noise_margin
            )
            if self.optimum_selector.settled(self.measurements, remaining):
                stop, why = True, "the choice could no longer change"
            elif self._losses >= self.patience or time_bound:
                stop, why = True, "lower limits could no longer win"
            if stop:
                for w in remaining:
                    self.abandoned[w] = why
        if not stop and remaining:
            self._enter(self._index + 1)
        else:
            self._conclude()

    def _conclude(self) -> None:
        self.optimal_power_limit = float(self.optimum_selector.select(self.measurements))
        self.phase = DONE
        if all(m.time == 0 for m in self.measurements):
            warnings.warn(
                "every profiling window measured 0 s: on the simulated GPU, call "
                "zeus_nb.step() once per training step",
                stacklevel=3,
            )
        self._apply()
        if self._start is not None:
            now, energy = self._read()
            self.profiling_time = now - self._start[0]
            self.profiling_energy = energy - self._start[1]
        dist = initialized_dist()
        if self.profile_path is not None and (dist is None or dist.get_rank() == 0):
            self._save_profile(self.profile_path)

    def _apply(self) -> None:
        self._set_limit(self.optimal_power_limit)
        self._applied = True
        if self.verbose:
            print(
                f"zeus-nb: power limit {self.optimal_power_limit:g} W chosen by "
                f"{self.optimum_selector!r}",
                file=sys.stderr,
            )


def __getattr__(name: str):
    if name == "HFGlobalPowerLimitOptimizer":
        from zeus_nb.optimizer.hf import HFGlobalPowerLimitOptimizer

        return HFGlobalPowerLimitOptimizer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
