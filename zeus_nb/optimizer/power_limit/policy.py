"""When adaptive profiling may skip work: a small object that needs no GPU to be tested.

:class:`AdaptivePolicy` answers three questions for :class:`GlobalPowerLimitOptimizer`, given only
the selector and the measurements so far:

* :meth:`~AdaptivePolicy.abandon_partial`: may the open window stop early? Yes once its partial
  readings (lower bounds of the full window) already rule the limit out, or once a quarter of the
  window has run and its readings, extrapolated to the full window and discounted by the noise
  margin, rule it out.
* :meth:`~AdaptivePolicy.lost`: did a finished limit lose by more than the noise margin?
* :meth:`~AdaptivePolicy.after_limit`: may the descent stop? Yes once the selector says the
  choice is settled, once ``patience`` limits in a row lost, or once time alone (which only grows
  as the limit falls) rules out every lower limit.

Selectors opt in through :meth:`OptimumSelector.rules_out`, ``adaptive_order`` and ``settled``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from zeus_nb.optimizer.power_limit.selectors import OptimumSelector, PowerLimitMeasurement

__all__ = ["AdaptivePolicy", "Abandon"]

SETTLED = "the choice could no longer change"
CANNOT_WIN = "lower limits could no longer win"


@dataclass(frozen=True)
class Abandon:
    """Stop the open window: why, and the time (s) to remember for it (maybe extrapolated)."""

    why: str
    time: float


@dataclass
class AdaptivePolicy:
    """Adaptive stopping rules for one profiling run (it keeps the run's loss streak)."""

    selector: OptimumSelector
    noise_margin: float = 0.05
    patience: int = 3
    min_fraction: float = 0.25  # of the window run before extrapolating from it
    losses: int = 0
    recent_times: list[float] = field(default_factory=list)
    last_limit: float | None = None

    def order(self, limits: list[float]) -> list[float]:
        """The order to measure ``limits`` (given highest first) in."""
        return self.selector.adaptive_order(limits)

    def abandon_partial(
        self,
        measurements: Sequence[PowerLimitMeasurement],
        time: float,
        energy: float,
        steps_done: int,
        steps_total: int,
    ) -> Abandon | None:
        """Whether a window ``steps_done`` of ``steps_total`` steps in can already be dropped."""
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

    def lost(
        self, measurements: Sequence[PowerLimitMeasurement], time: float, energy: float
    ) -> bool:
        """Whether a fully measured limit lost to ``measurements`` by more than the margin."""
        return self.selector.rules_out(measurements, energy, time, self.noise_margin)

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
            self.losses = 0  # a new descent starts (e.g. after MaxSlowdown's probe of the bottom)
        self.last_limit = limit
        self.losses = self.losses + 1 if lost else 0
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
