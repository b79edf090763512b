"""Each instruction's time options on the solver's quantum, and the convex cost fitted through them.

The solver works in whole time quanta. An option's time is rounded *up* to the quantum, so a plan
never runs longer than the solver assumed; its cost is ``energy - blocking_power x time`` (see
:mod:`~zeus_nb.optimizer.pipeline_frequency.solver`). Of the options, only the time–cost Pareto
optimal ones are kept, one per quantized time (the costliest, whose true time is closest to the
rounded one), slowest first. The same selection and the same exponential fit as ``lowtime`` (its
``CandidateExecutionOptions`` and ``ExponentialModel`` with an initial guess) are used, so both
solvers optimize the same model; where fewer than three options remain or the fit is not a
decreasing convex exponential, the lower convex hull of the options stands in.
"""

from __future__ import annotations

import logging
import math
import warnings
from dataclasses import dataclass

import numpy as np

from zeus_nb.optimizer.pipeline_frequency.profile import InstructionProfile

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class QuantizedOption:
    """One clock of one instruction: time rounded up to the quantum, and its cost (J)."""

    real_time: float
    unit_time: float
    cost: float
    knob: int

    @property
    def quant_time(self) -> int:
        return int(self.real_time // self.unit_time)


def cost_scale(profile: InstructionProfile) -> float:
    """Cost units per joule for the solvers: the largest instruction cost is at least 10 units.

    Both solvers round every cost change per time quantum to 1e-6 (absolute), as ``lowtime``
    does. Instructions of a small model cost about a millijoule, so their per-quantum changes
    vanish in that rounding and the solver stops at once with a one-point frontier. Scaling every
    cost by one positive factor keeps the same plans optimal and lifts the changes above it.
    """
    largest = max(
        abs(m.energy - profile.blocking_power[s] * m.time)
        for s in range(profile.num_stages)
        for inst in ("forward", "backward")
        for m in profile.options(s, inst)
    )
    return max(1.0, 10.0 / largest) if largest > 0 else 1.0


def quantized_options(
    profile: InstructionProfile, stage: int, instruction: str, unit: float, scale: float = 1.0
) -> list[QuantizedOption]:
    """Every profiled clock of ``(stage, instruction)`` as a quantized option.

    The real time is placed mid-quantum after rounding up, so that flooring it back (what the
    quantized time is) gives the rounded-up count however the division rounds. Costs are in
    joules times ``scale`` (:func:`cost_scale`).
    """
    p_block = profile.blocking_power[stage]
    return [
        QuantizedOption(
            real_time=(math.ceil(m.time / unit - 1e-9) + 0.5) * unit,
            unit_time=unit,
            cost=scale * (m.energy - p_block * m.time),
            knob=m.frequency,
        )
        for m in profile.options(stage, instruction)
    ]


@dataclass(frozen=True)
class CandidateOptions:
    """Pareto-optimal options, one per quantized time, slowest first."""

    options: tuple[QuantizedOption, ...]

    @classmethod
    def select(cls, options: list[QuantizedOption]) -> CandidateOptions:
        slowest_first = sorted(options, key=lambda o: o.real_time, reverse=True)
        pareto = [
            o
            for o in slowest_first
            if not any(p.real_time < o.real_time and p.cost < o.cost for p in slowest_first)
        ]
        pareto.sort(key=lambda o: o.cost, reverse=True)
        kept: list[QuantizedOption] = []
        seen: set[int] = set()
        for o in pareto:
            if o.quant_time not in seen:
                kept.append(o)
                seen.add(o.quant_time)
        kept.sort(key=lambda o: o.quant_time, reverse=True)
        return cls(tuple(kept))

    @property
    def min_quant_time(self) -> int:
        return self.options[-1].quant_time

    @property
    def max_quant_time(self) -> int:
        return self.options[0].quant_time

    def knob_for(self, quant_time: int) -> int:
        """The slowest clock that runs within ``quant_time`` (the fastest one if none does)."""
        for o in self.options:
            if o.quant_time <= quant_time:
                return o.knob
        return self.options[-1].knob


class ExponentialModel:
    """``cost = a * exp(b * t) + c`` over quantized time ``t``, fitted by least squares."""

    def __init__(self, a: float, b: float, c: float) -> None:
        self.coefficients = (a, b, c)

    def __call__(self, quant_time: float) -> float:
        a, b, c = self.coefficients
        return float(a * np.exp(b * quant_time) + c)


class ConvexHullModel:
    """Piecewise-linear cost through the lower convex hull of the options."""

    def __init__(self, xs: np.ndarray, ys: np.ndarray) -> None:
        self.xs, self.ys = xs, ys

    def __call__(self, quant_time: float) -> float:
        return float(np.interp(quant_time, self.xs, self.ys))


def _exponential(t, a, b, c):
    return a * np.exp(b * t) + c


def convex_hull_model(quant_times: np.ndarray, costs: np.ndarray) -> ConvexHullModel:
    """The lower convex hull through (quant_time, cost) points."""
    order = np.argsort(quant_times)
    xs, ys = quant_times[order].astype(float), costs[order].astype(float)
    hull: list[int] = []
    for i in range(len(xs)):
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            if (ys[b] - ys[a]) * (xs[i] - xs[a]) >= (ys[i] - ys[a]) * (xs[b] - xs[a]):
                hull.pop()
            else:
                break
        hull.append(i)
    return ConvexHullModel(xs[hull], ys[hull])


def initial_guess(quant_times: np.ndarray, costs: np.ndarray) -> tuple[float, float, float]:
    """A log-linear first guess of (a, b, c) for the exponential fit."""
    c0 = costs.min() - 0.05 * np.ptp(costs)
    slope, intercept = np.polyfit(quant_times, np.log(costs - c0), 1)
    return math.exp(intercept), slope, c0


def fit_cost_model(cands: CandidateOptions) -> ExponentialModel | ConvexHullModel:
    """The exponential model if it fits as a decreasing convex curve; the convex hull otherwise."""
    from scipy.optimize import OptimizeWarning, curve_fit

    q = np.array([o.quant_time for o in cands.options])
    c = np.array([o.cost for o in cands.options], float)
    if len(q) >= 3 and np.ptp(c) > 0:
        try:
            with warnings.catch_warnings():  # the fit's covariance is never used
                warnings.simplefilter("ignore", OptimizeWarning)
                coef, pcov = curve_fit(
                    _exponential, q, c, p0=initial_guess(q.astype(float), c), maxfev=50000
                )
            if np.inf in pcov:
                raise ValueError("the initial guess failed to fit")
            a, b, _ = coef
            if a > 0 and b < 0 and np.all(np.isfinite(coef)):
                return ExponentialModel(*coef)
        except (ValueError, RuntimeError) as e:
            logger.debug("exponential fit failed (%s); using the convex hull", e)
    return convex_hull_model(q.astype(float), c)


def instruction_models(
    profile: InstructionProfile, unit: float, scale: float = 1.0
) -> dict[tuple[int, str], tuple[CandidateOptions, ExponentialModel | ConvexHullModel]]:
    """Per (stage, instruction): its candidate options and the cost model fitted through them."""
    models = {}
    for s in range(profile.num_stages):
        for inst in ("forward", "backward"):
            cands = CandidateOptions.select(quantized_options(profile, s, inst, unit, scale))
            models[(s, inst)] = (cands, fit_cost_model(cands))
    return models
