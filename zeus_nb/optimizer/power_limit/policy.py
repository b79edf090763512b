"""When adaptive profiling may skip work: a small object that needs no GPU to be tested.

:class:`AdaptivePolicy` answers, given only the selector and the measurements so far, whether
the open window may stop early (:meth:`~AdaptivePolicy.observe`, called after every measured
step), whether a finished limit lost (:meth:`~AdaptivePolicy.finish`) and whether the descent may
stop (:meth:`~AdaptivePolicy.after_limit`).

Its thresholds come from the measurements themselves. Each window's per-step readings give the
step-to-step spread of time and energy, hence a standard error of the window's mean; a limit is
compared with the others by confidence bounds ``z`` standard errors wide:

* it *lost* once its lower bound exceeds the best one by more than ``noise_margin`` beyond the
  best's own bound (only such losses count towards ``patience``, so a plateau never stops the
  descent: real energy curves are not convex);
* it is *indifferent* once its lower bound shows it cannot beat the best by more than
  ``tolerance``: the window stops, but the descent goes on;
* it *won* once its upper bound beats the best and its bound is within ``precision``: the window
  stops and its readings, extrapolated to the full window, stand for it.

Every limit is still visited in these cases; only windows get shorter. With noise estimates the
lowest limit is probed right after the highest (:meth:`~AdaptivePolicy.reorder`). The descent
stops early only when time alone rules out every lower limit (two limits in a row of one
descent, the probe not counted, each slower than the best by more than the margin even at the
lower bound of its time) or after ``patience`` losses in a row. The defaults (``z`` 1.75,
``tolerance`` 2 %, ``precision`` 1.5 %, ``min_steps`` 4) were set on noise seeds 0-29 of the
synthetic family of :mod:`~zeus_nb.optimizer.power_limit.synthetic` and of the V100-shaped
profiles (the V100 power trace's curves with step noise); ``benchmarks/bench_plo.py`` reports the
saving and the worst regret on seeds they were not set on. Readings without
step-to-step spread (a replayed log spreads each window evenly over its steps) carry no noise
estimate, so there the fixed ``noise_margin`` rules apply: a window is abandoned once its partial
readings (lower bounds of the full window) rule the limit out, or once ``min_fraction`` of it,
extrapolated and discounted by the margin, does.

Selectors opt in through :meth:`OptimumSelector.rules_out`, ``wins``, ``adaptive_order`` and
``settled``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from zeus_nb.optimizer.power_limit.selectors import OptimumSelector, PowerLimitMeasurement

__all__ = ["AdaptivePolicy", "Abandon", "WindowStats"]

SETTLED = "the choice could no longer change"
CANNOT_WIN = "lower limits could no longer win"
INDIFFERENT = "it could not beat the best by more than the tolerance"
NO_SPREAD = 1e-9  # relative step-to-step spread below this is rounding: no noise information


def student_t(z: float, dof: int) -> float:
    """The Student-t quantile with ``dof`` degrees of freedom at the normal quantile ``z``
    (Cornish-Fisher expansion): a spread estimated from few steps gets a wider bound."""
    return z + (z**3 + z) / (4 * dof) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * dof**2)


@dataclass(frozen=True)
class Abandon:
    """Stop the open window: why, the time (s) to remember for it (maybe extrapolated), whether
    it lost, and for a window that won early, the extrapolated (energy J, time s) standing for it.
    """

    why: str
    time: float
    lost: bool = True
    estimate: tuple[float, float] | None = None


@dataclass
class WindowStats:
    """Running mean and spread (Welford) of one window's per-step time and energy."""

    steps: int = 0
    last: tuple[float, float] = (0.0, 0.0)
    mean: list[float] = field(default_factory=lambda: [0.0, 0.0])
    m2: list[float] = field(default_factory=lambda: [0.0, 0.0])

    def add(self, time: float, energy: float) -> None:
        """Add one step, given the window's cumulative ``time`` and ``energy`` after it."""
        step = (time - self.last[0], energy - self.last[1])
        self.last = (time, energy)
        self.steps += 1
        for i, x in enumerate(step):
            d = x - self.mean[i]
            self.mean[i] += d / self.steps
            self.m2[i] += d * (x - self.mean[i])

    def spread(self) -> float | None:
        """Relative step-to-step standard deviation (the larger of time's and energy's); None
        without at least two steps or without step-to-step spread."""
        if self.steps < 2 or min(self.mean) <= 0:
            return None
        spread = max(
            math.sqrt(max(m2, 0.0) / (self.steps - 1)) / mean
            for m2, mean in zip(self.m2, self.mean, strict=True)
        )
        return spread if spread > NO_SPREAD else None

    def bound(self, z: float, pooled: float = 0.0) -> float | None:
        """Relative half-width of the mean's confidence bound: ``z`` standard errors, widened
        for a spread estimated from few steps; the spread is at least ``pooled`` (that of the
        windows before), so a window whose first steps happen to agree is not trusted more."""
        spread = self.spread()
        if spread is None:
            return None
        return student_t(z, self.steps - 1) * max(spread, pooled) / math.sqrt(self.steps)


@dataclass
class AdaptivePolicy:
    """Adaptive stopping rules for one profiling run (it keeps the run's loss streak)."""

    selector: OptimumSelector
    noise_margin: float = 0.05
    patience: int = 3
    min_fraction: float = 0.25  # of the window run before extrapolating from it (no spread)
    z: float = 1.75  # confidence bounds, in standard errors (Student-t corrected)
    tolerance: float = 0.02  # a limit that cannot beat the best by more stops early
    precision: float = 0.015  # a winning window stops once its bound is this tight
    min_steps: int = 4  # steps before a window's spread is trusted
    losses: int = 0
    recent_times: list[float] = field(default_factory=list)
    last_limit: float | None = None
    window: WindowStats = field(default_factory=WindowStats)
    window_limit: float = 0.0
    bounds: dict[float, float | None] = field(default_factory=dict)  # limit -> half-width
    pooled: tuple[float, int] = (0.0, 0)  # earlier windows: sum of (steps - 1) x spread², dof

    def order(self, limits: list[float]) -> list[float]:
        """The order to measure ``limits`` (given highest first) in."""
        return self.selector.adaptive_order(limits)

    # --- the open window ------------------------------------------------------------------------
    def _pooled(self) -> float:
        """The step-to-step spread pooled over the windows measured before (0 if none)."""
        total, dof = self.pooled
        return math.sqrt(total / dof) if dof else 0.0

    def _pool(self) -> None:
        spread = self.window.spread()
        if spread is not None:
            total, dof = self.pooled
            self.pooled = (total + (self.window.steps - 1) * spread**2, dof + self.window.steps - 1)

    def start_window(self, limit: float) -> None:
        """A window at ``limit`` opens (its first step comes next)."""
        self.window, self.window_limit = WindowStats(), limit

    def _margin(self, measurements: Sequence[PowerLimitMeasurement]) -> float | None:
        """The widest bound of ``measurements``; None if one has no spread."""
        bounds = [self.bounds.get(m.power_limit) for m in measurements]
        if not bounds or any(b is None for b in bounds):
            return None
        return max(bounds)

    def observe(
        self,
        measurements: Sequence[PowerLimitMeasurement],
        time: float,
        energy: float,
        steps_done: int,
        steps_total: int,
    ) -> Abandon | None:
        """Record a step (``time``, ``energy``: the window so far); whether the window may stop."""
        self.window.add(time, energy)
        if not measurements:
            return None
        verdict = self.abandon_partial(measurements, time, energy, steps_done, steps_total)
        if verdict is None:
            verdict = self._bounded(measurements, time, energy, steps_done, steps_total)
        if verdict is not None:
            self._pool()
        return verdict

    def _bounded(self, measurements, time, energy, steps_done, steps_total) -> Abandon | None:
        """The rules from confidence bounds (None where the readings have no spread)."""
        width, margin = self.window.bound(self.z, self._pooled()), self._margin(measurements)
        if width is None or margin is None or steps_done < self.min_steps:
            return None
        sel = self.selector
        scale = steps_total / steps_done
        e_hat, t_hat = energy * scale, time * scale
        lo, hi = 1.0 - width, 1.0 + width
        # A stopped window's time for the descent's time bound is a lower bound, not a guess.
        if sel.rules_out(measurements, e_hat * lo, t_hat * lo, margin + self.noise_margin):
            return Abandon("its partial window lost beyond its noise", t_hat * lo)
        if sel.cannot_gain(measurements, e_hat * lo, t_hat * lo, margin, self.tolerance):
            return Abandon(INDIFFERENT, t_hat * lo, lost=False)
        if width <= self.precision and sel.wins(measurements, e_hat * hi, t_hat * hi, margin):
            self.bounds[self.window_limit] = width
            return Abandon("its partial window won", t_hat, lost=False, estimate=(e_hat, t_hat))
        return None

    def abandon_partial(
        self,
        measurements: Sequence[PowerLimitMeasurement],
        time: float,
        energy: float,
        steps_done: int,
        steps_total: int,
    ) -> Abandon | None:
        """The fixed-margin rules: whether a window ``steps_done`` of ``steps_total`` steps in
        can already be dropped."""
        sel, margin = self.selector, self.noise_margin
        if not measurements:
            return None
        if sel.rules_out(measurements, energy, time, margin):
            return Abandon("its partial window already lost", time)
        if steps_done >= max(1, math.ceil(steps_total * self.min_fraction)):
            scale = steps_total / steps_done * (1.0 - margin)
            if sel.rules_out(measurements, energy * scale, time * scale, margin):
                return Abandon("its partial window, extrapolated, lost", time * scale)
        return None

    def finish(
        self,
        measurements: Sequence[PowerLimitMeasurement],
        limit: float,
        time: float,
        energy: float,
    ) -> bool:
        """A full window at ``limit`` (``time``, ``energy``: its totals): remember its
        precision; whether it lost."""
        self.window.add(time, energy)  # the last step, read when the window closed
        width = self.bounds[limit] = self.window.bound(self.z, self._pooled())
        self._pool()
        margin = self._margin(measurements)
        if width is None or margin is None:
            return self.lost(measurements, time, energy)
        lo = 1.0 - width
        return self.selector.rules_out(
            measurements, energy * lo, time * lo, margin + self.noise_margin
        )

    def lost(
        self, measurements: Sequence[PowerLimitMeasurement], time: float, energy: float
    ) -> bool:
        """Whether a fully measured limit lost to ``measurements`` by more than the margin."""
        return self.selector.rules_out(measurements, energy, time, self.noise_margin)

    # --- between limits -------------------------------------------------------------------------
    def after_limit(
        self,
        measurements: Sequence[PowerLimitMeasurement],
        limit: float,
        time: float,
        lost: bool,
        remaining: list[float],
    ) -> str | None:
        """Record the outcome at ``limit``; the reason to skip all ``remaining`` limits, or None."""
        if self.last_limit is not None and limit > self.last_limit:
            # A new descent starts (after the probe of the bottom): neither its losses nor its
            # times say anything about the limits between the probe and the one above.
            self.losses, self.recent_times = 0, []
        self.last_limit = limit
        # A loss says the descent went past the optimum only if the choice lies above: one that
        # lost to a lower limit (the probed bottom) lies on the way down to it.
        rising = lost and bool(measurements) and self.selector.select(measurements) > limit
        self.losses = self.losses + 1 if rising else 0
        self.recent_times = [*self.recent_times[-1:], time]
        floor = min(self.recent_times) * (1.0 - self.noise_margin)
        time_bound = len(self.recent_times) >= 2 and self.selector.rules_out(
            measurements, 0.0, floor, self.noise_margin
        )
        if self.selector.settled(measurements, remaining):
            return SETTLED
        if self.losses >= self.patience or time_bound:
            return CANNOT_WIN
        return None

    def reorder(self, measurements: Sequence[PowerLimitMeasurement], rest: list[float]) -> list:
        """After the first limit: with noise estimates, probe the lowest limit next.

        If the optimum is low, every limit above it then loses to it quickly; if it is high, the
        lowest limit loses quickly. Without noise estimates the order stays as it was.
        """
        if len(rest) < 2 or self._margin(measurements) is None:
            return rest
        lowest = min(rest)
        return [lowest, *(w for w in rest if w != lowest)]
