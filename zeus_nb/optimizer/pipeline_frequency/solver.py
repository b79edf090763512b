"""The time–energy frontier of one pipeline iteration.

Each instruction's profiled (time, energy) options get the cost ``energy - blocking_power x
time``: for a fixed iteration time the total energy is the sum of the instructions' energies plus
each GPU's blocking power over its idle time, so minimizing this cost minimizes total energy, and
slowing an instruction down is not mistaken for free (Perseus, SOSP '24, Section 4). An
exponential cost model is fitted per instruction
(:mod:`~zeus_nb.optimizer.pipeline_frequency.cost_model`), and a Phillips–Dessouky solver shortens
the iteration one time quantum at a time from the all-slowest plan to the fastest, yielding one
plan per step: by default this package's own
(:mod:`~zeus_nb.optimizer.pipeline_frequency.tradeoff`, on scipy's compiled graph routines), or
with ``solver="lowtime"`` the ``lowtime`` package's, which it follows step for step. Option times
are rounded *up* to the quantum, so a plan never runs longer than the solver assumed. Every plan
is then evaluated on the profile itself (the arithmetic of
:func:`~zeus_nb.optimizer.pipeline_frequency.schedule.evaluate`, for all plans at once in
:class:`~zeus_nb.optimizer.pipeline_frequency.plan_table.PlanTable`); the frontier keeps the
points where a longer iteration buys strictly less energy.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from zeus_nb.errors import InputError, ZeusNbError
from zeus_nb.inputs.validate import DURATION, integer, number
from zeus_nb.optimizer.pipeline_frequency.cost_model import cost_scale, instruction_models
from zeus_nb.optimizer.pipeline_frequency.plan_table import PlanTable, pareto_rows
from zeus_nb.optimizer.pipeline_frequency.profile import InstructionProfile
from zeus_nb.optimizer.pipeline_frequency.schedule import FrequencyPlan, Timeline, evaluate
from zeus_nb.optimizer.pipeline_frequency.tradeoff import Activity, tradeoff_durations

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
    cost_scale: float = 1.0  # the solvers' cost units per joule (cost_model.cost_scale)

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


def frontier_gap(a: Frontier, b: Frontier) -> float:
    """Largest relative energy difference between two frontiers at matched iteration times.

    At the iteration time of every point of either frontier that both can meet, each frontier's
    least-energy plan within that time (:meth:`Frontier.for_deadline`) is compared; the result
    is ``max |E_a - E_b| / E_b``. Times only one frontier can meet (below the other's fastest
    point) are left out.
    """
    floor = max(a.fastest().iteration_time, b.fastest().iteration_time)
    times = sorted({p.iteration_time for p in a.points + b.points if p.iteration_time >= floor})
    gaps = [
        abs(a.for_deadline(t).energy - b.for_deadline(t).energy) / b.for_deadline(t).energy
        for t in times
    ]
    return max(gaps, default=0.0)


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


def max_unit_time(profile: InstructionProfile) -> float:
    """The coarsest time quantum that means anything: half the widest span of one instruction's
    times over its clocks, so that instruction's slowest and fastest clocks lie at least two
    quanta apart whatever the rounding. Much coarser, every instruction's clocks round to the
    same number of quanta and the frontier collapses to one point."""
    spans = []
    for s in range(profile.num_stages):
        for i in ("forward", "backward"):
            times = [m.time for m in profile.options(s, i)]
            spans.append(max(times) - min(times))
    return max(spans) / 2


def check_unit_time(profile: InstructionProfile, unit: float) -> float:
    """``unit`` if it lies in (0, :func:`max_unit_time`], else a one-line error naming the range."""
    unit = number(unit, "the time quantum (unit_time)", DURATION)
    most = max_unit_time(profile)
    if unit > most:
        raise InputError(
            f"a time quantum (--unit-time, unit_time=) of {unit:.3g} s is longer than any "
            f"instruction's time varies with its clock (at most {most:.3g} s), so the frontier "
            f"would be one point; give one in (0, {most:.3g}] s (default "
            f"{default_unit_time(profile):.3g} s)"
        )
    return unit


SOLVERS = ("native", "lowtime")

#: Bounds on one plan's work (about 10 s each on one core): the solver takes one step per time
#: quantum between the all-slowest and the fastest iteration, and each step touches every
#: instruction. ``--microbatches 200`` or ``--unit-time 1e-6`` once ran for minutes.
MAX_PLAN_STEPS = 20_000
MAX_PLAN_WORK = 5e6  # steps x instructions


def planning_work(
    profile: InstructionProfile, stages: int, microbatches: int, unit: float
) -> tuple[float, float]:
    """(solver steps, steps x instructions) a frontier takes, estimated without building it.

    An iteration of 1F1B lasts about (microbatches + stages - 1) x the slowest stage's
    forward + backward; the frontier spans that at the lowest clocks down to the highest.
    """

    def per_stage(pick) -> float:
        m = profile.measurements
        return max(pick(m[(s, "forward")]) + pick(m[(s, "backward")]) for s in range(stages))

    slow = per_stage(lambda ms: max(m.time for m in ms))
    fast = per_stage(lambda ms: min(m.time for m in ms))
    steps = (microbatches + stages - 1) * max(slow - fast, unit) / unit
    return steps, steps * 2 * stages * microbatches


def check_planning_work(
    profile: InstructionProfile, stages: int, microbatches: int, unit: float
) -> None:
    """Refuse a frontier whose work is past the bounds, naming what to change."""
    steps, work = planning_work(profile, stages, microbatches, unit)
    if steps <= MAX_PLAN_STEPS and work <= MAX_PLAN_WORK:
        return
    least_unit = unit * max(steps / MAX_PLAN_STEPS, work / MAX_PLAN_WORK)
    fix = f"use a time quantum of at least {least_unit:.3g} s (--unit-time, unit_time=)"
    if steps <= MAX_PLAN_STEPS:  # the instructions are what is too many
        per_mb = work / microbatches**2  # work grows with the square of the microbatches
        most_mb = max(1, int((MAX_PLAN_WORK / per_mb) ** 0.5))
        fix += f" or at most {most_mb} microbatches (the frontier's shape repeats with more)"
    raise InputError(
        f"planning {stages} stages x {microbatches} microbatches at a time quantum of "
        f"{unit:.3g} s takes about {steps:.3g} solver steps over {2 * stages * microbatches} "
        f"instructions ({work:.3g}; the bounds are {MAX_PLAN_STEPS} steps and {MAX_PLAN_WORK:g}, "
        f"about 10 s); {fix}"
    )


class SolverChoiceError(ZeusNbError, ValueError):
    """An unknown solver name was asked for."""


def _native_clocks(profile: InstructionProfile, table: PlanTable, unit: float, scale: float):
    """Clock rows (all-slowest first, then one per step) from this package's own solver."""
    models = instruction_models(profile, unit, scale)
    kinds = {
        key: Activity(cands.min_quant_time, cands.max_quant_time, model)
        for key, (cands, model) in models.items()
    }
    durations = np.array(
        tradeoff_durations(table.predecessors, [kinds[(s, i)] for s, i, _ in table.ops])
    )
    clocks = np.empty_like(durations)
    for (s, inst), (cands, _) in models.items():
        lo, hi = cands.min_quant_time, cands.max_quant_time
        knobs = np.array([cands.knob_for(q) for q in range(lo, hi + 1)], np.int64)
        cols = table.columns_of(s, inst)
        clocks[:, cols] = knobs[durations[:, cols] - lo]
    return clocks, models


def solve_frontier(
    profile: InstructionProfile,
    stages: int,
    microbatches: int,
    unit_time: float | None = None,
    solver: str = "native",
) -> Frontier:
    """The whole time–energy frontier of a (stages, microbatches) 1F1B iteration.

    ``solver``: ``"native"`` (default) runs this package's Phillips–Dessouky solver on scipy's
    compiled graph routines; ``"lowtime"`` runs the ``lowtime`` package's, which it follows.
    """
    if solver not in SOLVERS:
        raise SolverChoiceError(
            f"solver {solver!r} is not one of {', '.join(SOLVERS)}; pass one of those"
        )
    profile.check_stages(stages)
    microbatches = integer(microbatches, "microbatches", 1, 10**6)
    unit = default_unit_time(profile) if unit_time is None else unit_time
    unit = check_unit_time(profile, unit)
    check_planning_work(profile, stages, microbatches, unit)
    table = PlanTable(stages, microbatches)
    scale = cost_scale(profile)
    if solver == "lowtime":
        from zeus_nb.optimizer.pipeline_frequency.lowtime_backend import lowtime_clocks

        clocks, models = lowtime_clocks(profile, table, unit, scale)
    else:
        clocks, models = _native_clocks(profile, table, unit, scale)
    max_plan = FrequencyPlan.max_clock(profile, microbatches)
    max_tl = evaluate(max_plan, profile)
    fastest = _tighten(table.plan(clocks[-1]), profile, max_tl.iteration_time + unit)
    clocks[-1] = table.row(fastest)
    times, energies = table.evaluate(profile, clocks)
    points = [
        FrontierPoint(float(times[k]), float(energies[k]), table.plan(clocks[k]))
        for k in pareto_rows(times, energies)
    ]
    max_point = FrontierPoint(max_tl.iteration_time, max_tl.energy, max_plan)
    return Frontier(points, max_point, unit, profile, models, scale)
