"""Optimum selectors: how the power-limit optimizer chooses among the profiled limits.

A selector sees only :class:`PowerLimitMeasurement` values, so it can be tried on saved profiles
without a GPU. Adaptive profiling asks a selector three more questions (``rules_out``,
``adaptive_order``, ``settled``); a custom selector that answers none of them is simply profiled
exhaustively.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

from zeus_nb.errors import InputError
from zeus_nb.utils.metric import check_eta, zeus_cost

__all__ = [
    "Energy",
    "MaxSlowdownConstraint",
    "OptimumSelector",
    "PowerLimitMeasurement",
    "Time",
    "ZeusCost",
]


@dataclass(frozen=True)
class PowerLimitMeasurement:
    """One profiled power limit: W, J summed over every GPU of the job, s of the slowest one."""

    power_limit: float
    energy: float
    time: float
    num_gpus: int = 1


def _descending(measurements: Sequence[PowerLimitMeasurement]) -> list[PowerLimitMeasurement]:
    if not measurements:
        raise InputError("no power-limit measurements to select from")
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

    def wins(
        self,
        measurements: Sequence[PowerLimitMeasurement],
        energy: float,
        time: float,
        margin: float,
    ) -> bool:
        """Whether a limit below all measured ones, using at most ``energy`` J and ``time`` s,
        would be chosen over them even if they were off by ``margin`` (relative).

        Adaptive profiling stops a winning window early only for selectors that override this.
        """
        return False

    def cannot_gain(
        self,
        measurements: Sequence[PowerLimitMeasurement],
        energy: float,
        time: float,
        margin: float,
        tolerance: float,
    ) -> bool:
        """Whether a limit using at least ``energy`` J and ``time`` s could improve on the
        measurements' choice by ``tolerance`` (relative) at most, with them off by ``margin``.

        A selector with no criterion to be ``tolerance`` worse on answers as :meth:`rules_out`.
        """
        return self.rules_out(measurements, energy, time, margin)

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

    def cannot_gain(self, measurements, energy, time, margin, tolerance) -> bool:
        return self.rules_out(measurements, energy, time, margin - tolerance)

    def wins(self, measurements, energy, time, margin) -> bool:
        if not measurements:
            return False
        best = min(self.score(m.energy, m.time, measurements) for m in measurements)
        return self.score(energy, time, measurements) < best * (1.0 - margin)


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
            raise InputError(
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
            raise InputError(f"factor must be >= 1 (1.1 allows 10% slowdown), got {factor}")
        self.factor = factor

    def _budget(self, measurements) -> float:
        return self.factor * _descending(measurements)[0].time

    def select(self, measurements: Sequence[PowerLimitMeasurement]) -> float:
        budget = self._budget(measurements)
        return min(m.power_limit for m in measurements if m.time <= budget)

    def rules_out(self, measurements, energy, time, margin) -> bool:
        return bool(measurements) and time > self._budget(measurements) * (1.0 + margin)

    def wins(self, measurements, energy, time, margin) -> bool:
        # Below every measured limit, meeting the constraint is enough to be chosen.
        return bool(measurements) and time < self._budget(measurements) * (1.0 - margin)

    def adaptive_order(self, limits: list[float]) -> list[float]:
        # After the reference (highest) limit, try the lowest: if it meets the constraint it is
        # the answer and nothing else needs measuring; if not, it is abandoned early.
        if len(limits) <= 2:
            return list(limits)
        return [limits[0], limits[-1], *limits[1:-1]]

    def settled(self, measurements, remaining) -> bool:
        # Only a lower limit that meets the constraint could displace the current choice.
        return bool(measurements) and all(w > self.select(measurements) for w in remaining)
