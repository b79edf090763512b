"""The time–energy frontier of one pipeline iteration, solved with ``lowtime``.

Each instruction's profiled (time, energy) options become a ``lowtime`` operation whose cost is
``energy - blocking_power x time``: for a fixed iteration time the total energy is the sum of the
instructions' energies plus each GPU's blocking power over its idle time, so minimizing this cost
minimizes total energy, and slowing an instruction down is not mistaken for free (Perseus,
SOSP '24, Section 4). An exponential cost model is fitted per instruction, and the
Phillips–Dessouky solver shortens the iteration one time quantum at a time from the all-slowest
plan to the fastest, yielding one plan per step. Option times are rounded *up* to the quantum,
so a plan never runs longer than the solver assumed. Every plan is then evaluated on the profile
itself (:func:`~zeus_nb.optimizer.pipeline_frequency.schedule.evaluate`); the frontier keeps the
points where a longer iteration buys strictly less energy.
"""

from __future__ import annotations

import logging
import math
import warnings
from dataclasses import dataclass, field

import numpy as np

from zeus_nb.errors import InputError, ZeusNbError
from zeus_nb.optimizer.pipeline_frequency.profile import InstructionProfile
from zeus_nb.optimizer.pipeline_frequency.schedule import (
    FrequencyPlan,
    Op,
    Timeline,
    dependencies,
    evaluate,
)

logger = logging.getLogger(__name__)


class DeadlineError(ZeusNbError, ValueError):
    """No plan meets the requested iteration time."""


@dataclass(frozen=True)
class FrontierPoint:
    iteration_time: float
    energy: float
    plan: FrequencyPlan

    def to_json(self) -> dict:
        return {
            "iteration_time": self.iteration_time,
            "energy": self.energy,
            "plan": self.plan.to_json(),
        }


@dataclass
class Frontier:
    """Frontier points from fastest to slowest, and the all-max-clock reference."""

    points: list[FrontierPoint]
    max_clock: FrontierPoint
    unit_time: float
    profile: InstructionProfile
    cost_models: dict = field(default_factory=dict, repr=False)

    def fastest(self) -> FrontierPoint:
        return self.points[0]

    def for_deadline(self, seconds: float) -> FrontierPoint:
        """The least-energy plan whose iteration time is at most ``seconds``."""
        fits = [p for p in self.points if p.iteration_time <= seconds * (1 + 1e-9)]
        if not fits:
            raise DeadlineError(
                f"no plan finishes an iteration within {seconds:g} s; the fastest takes "
                f"{self.points[0].iteration_time:g} s"
            )
        return min(fits, key=lambda p: p.energy)

    def timeline(self, point: FrontierPoint | None = None) -> Timeline:
        return evaluate((point or self.max_clock).plan, self.profile)

    def to_json(self) -> list[dict]:
        return [p.to_json() for p in self.points]


def _convex_fallback(quant_times: np.ndarray, costs: np.ndarray):
    """Piecewise-linear cost through the lower convex hull (few options, or a failed fit)."""
    from lowtime.cost_model import CostModel

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
    hx, hy = xs[hull], ys[hull]

    class _Hull(CostModel):
        def __call__(self, quant_time: int) -> float:
            return float(np.interp(quant_time, hx, hy))

    return _Hull()


def _cost_model(options):
    """lowtime's exponential model fitted from a data-driven guess; convex fallback otherwise."""
    from lowtime.cost_model import ExponentialModel
    from scipy.optimize import OptimizeWarning

    q = np.array([o.quant_time for o in options.options], float)
    c = np.array([o.cost for o in options.options], float)
    if len(q) >= 3 and np.ptp(c) > 0:
        c0 = c.min() - 0.05 * np.ptp(c)
        slope, intercept = np.polyfit(q, np.log(c - c0), 1)
        try:
            with warnings.catch_warnings():  # the fit's covariance is never used
                warnings.simplefilter("ignore", OptimizeWarning)
                model = ExponentialModel(options, initial_guess=(math.exp(intercept), slope, c0))
            a, b, _ = model.coefficients
            if a > 0 and b < 0 and np.all(np.isfinite(model.coefficients)):
                return model
        except (ValueError, RuntimeError) as e:
            logger.debug("exponential fit failed (%s); using the convex hull", e)
    return _convex_fallback(q, c)


def _build_dag(profile: InstructionProfile, microbatches: int, unit: float):
    import networkx as nx
    from lowtime.graph_utils import add_sink_node, add_source_node
    from lowtime.operation import CandidateExecutionOptions, ExecutionOption, OperationSpec
    from lowtime.perseus.instruction import Backward, Forward

    stages = profile.num_stages
    specs, models = {}, {}
    for s in range(stages):
        p_block = profile.blocking_power[s]
        for inst in ("forward", "backward"):
            opts = [
                ExecutionOption(
                    real_time=(math.ceil(m.time / unit - 1e-9) + 0.5) * unit,
                    unit_time=unit,
                    cost=m.energy - p_block * m.time,
                    knob=m.frequency,
                )
                for m in profile.options(s, inst)
            ]
            cands = CandidateExecutionOptions(options=opts)
            model = _cost_model(cands)
            specs[(s, inst)] = OperationSpec(options=cands, cost_model=model)
            models[(s, inst)] = (cands, model)
    deps = dependencies(stages, microbatches)
    ids = {op: i for i, op in enumerate(deps)}
    dag = nx.DiGraph()
    for op, i in ids.items():
        s, inst, j = op
        cls = Forward if inst == "forward" else Backward
        dag.add_node(i, op=cls(spec=specs[(s, inst)], stage_id=s, micro_batch_id=j))
    for op, preds in deps.items():
        for p in preds:
            dag.add_edge(ids[p], ids[op])
    source, sink = len(ids), len(ids) + 1
    add_source_node(dag, source)
    add_sink_node(dag, sink)
    dag.graph["source_node"], dag.graph["sink_node"] = source, sink
    return dag, ids, models


def _snapshot(dag, ids: dict[Op, int], stages: int, microbatches: int) -> FrequencyPlan:
    return FrequencyPlan.from_choice(
        stages, microbatches, lambda op: dag.nodes[ids[op]]["op"].assigned_knob
    )


def _tighten(plan: FrequencyPlan, profile: InstructionProfile, target: float) -> FrequencyPlan:
    """Speed up critical instructions one clock step at a time until ``plan`` meets ``target``."""
    clocks = dict(((s, i, j), f) for s, st in enumerate(plan.stages) for i, j, f in st)
    timeline = evaluate(plan, profile)
    while timeline.iteration_time > target:
        changed = False
        for s, inst, j in timeline.critical_path:
            faster = [
                m.frequency
                for m in profile.options(s, inst)
                if m.time < profile.at(s, inst, clocks[(s, inst, j)]).time
            ]
            if faster:
                clocks[(s, inst, j)] = min(faster)  # the slowest clock that is faster
                changed = True
        if not changed:
            break
        plan = FrequencyPlan.from_choice(plan.num_stages, plan.num_microbatches, clocks.get)
        timeline = evaluate(plan, profile)
    return plan


def default_unit_time(profile: InstructionProfile) -> float:
    """1/25 of the shortest instruction at its fastest clock: 4 % time resolution.

    The solver takes one step per quantum between the all-slowest and the fastest iteration, so
    a finer quantum gives finer plans at a proportionally longer planning time.
    """
    return (
        min(
            profile.fastest(s, i).time
            for s in range(profile.num_stages)
            for i in ("forward", "backward")
        )
        / 25
    )


def solve_frontier(
    profile: InstructionProfile,
    stages: int,
    microbatches: int,
    unit_time: float | None = None,
) -> Frontier:
    """The whole time–energy frontier of a (stages, microbatches) 1F1B iteration."""
    from lowtime.solver import PhillipsDessouky

    profile.check_stages(stages)
    if microbatches < 1:
        raise InputError(f"microbatches must be >= 1, got {microbatches}")
    unit = default_unit_time(profile) if unit_time is None else float(unit_time)
    if unit <= 0:
        raise InputError(f"the time quantum must be > 0 s, got {unit}")
    dag, ids, models = _build_dag(profile, microbatches, unit)
    plans = [_snapshot(dag, ids, stages, microbatches)]  # all-slowest: the solver's start
    for _ in PhillipsDessouky(dag).run():
        plans.append(_snapshot(dag, ids, stages, microbatches))
    max_plan = FrequencyPlan.max_clock(profile, microbatches)
    max_tl = evaluate(max_plan, profile)
    plans[-1] = _tighten(plans[-1], profile, max_tl.iteration_time + unit)
    evaluated: dict[FrequencyPlan, FrontierPoint] = {}
    for plan in plans:
        if plan not in evaluated:
            tl = evaluate(plan, profile)
            evaluated[plan] = FrontierPoint(tl.iteration_time, tl.energy, plan)
    points: list[FrontierPoint] = []
    for p in sorted(evaluated.values(), key=lambda p: (p.iteration_time, p.energy)):
        if not points or (
            p.iteration_time > points[-1].iteration_time and p.energy < points[-1].energy
        ):
            points.append(p)
    max_point = FrontierPoint(max_tl.iteration_time, max_tl.energy, max_plan)
    return Frontier(points, max_point, unit, profile, models)
