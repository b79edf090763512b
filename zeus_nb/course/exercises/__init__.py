"""The exercises the notebooks check: each one's reference answer, its cases and known mistakes.

A case has fixed inputs that show a concept (units, which energy, which sign) and random ones
drawn from the notebook's seed (:func:`use_seed`), so one memorized number cannot pass. Cases are
laid out so that no shortcut (a constant, the first or last element, the highest or lowest limit,
the wrong column) is right on more than one of them. Each exercise also lists its common mistakes,
so :mod:`zeus_nb.course.check` can give the hint that fits the mistake made; it never shows a
reference answer.
"""

from __future__ import annotations

from collections.abc import Callable

from zeus_nb.course.exercises import batch_size, measuring, parallel, power_limit, tradeoff
from zeus_nb.course.exercises.base import Case, Mistake, use_seed
from zeus_nb.tradeoff import zeus_cost

__all__ = ["EXERCISES", "MISTAKES", "UNITS", "Case", "Mistake", "use_seed"]

# name -> (reference answer, cases); the cases are drawn afresh for the current seed
EXERCISES: dict[str, tuple[Callable, Callable[[], list[Case]]]] = {
    "average_power": (measuring.average_power_ref, measuring.average_power_cases),
    "energy_per_step": (measuring.energy_per_step_ref, measuring.energy_per_step_cases),
    "zeus_cost": (zeus_cost, power_limit.zeus_cost_cases),
    "energy_optimal_limit": (power_limit.energy_optimal_ref, power_limit.energy_optimal_cases),
    "pareto_front": (tradeoff.pareto_ref, tradeoff.pareto_cases),
    "should_stop_early": (batch_size.should_stop_ref, batch_size.should_stop_cases),
    "aggregate_data_parallel": (parallel.aggregate_ref, parallel.aggregate_cases),
    "iteration_energy": (parallel.iteration_energy_ref, parallel.iteration_energy_cases),
    "least_cost_config": (tradeoff.least_cost_ref, tradeoff.least_cost_cases),
    "thompson_pick": (batch_size.thompson_pick_ref, batch_size.thompson_pick_cases),
    "slowdown_limit": (power_limit.slowdown_limit_ref, power_limit.slowdown_limit_cases),
    "plan_within": (parallel.plan_within_ref, parallel.plan_within_cases),
}

# name -> the common mistakes, each with the hint that fits it
MISTAKES: dict[str, Callable[[], list[Mistake]]] = {
    "average_power": measuring.average_power_mistakes,
    "energy_per_step": measuring.energy_per_step_mistakes,
    "zeus_cost": power_limit.zeus_cost_mistakes,
    "energy_optimal_limit": power_limit.energy_optimal_mistakes,
    "pareto_front": tradeoff.pareto_mistakes,
    "should_stop_early": batch_size.should_stop_mistakes,
    "aggregate_data_parallel": parallel.aggregate_mistakes,
    "iteration_energy": parallel.iteration_energy_mistakes,
    "least_cost_config": tradeoff.least_cost_mistakes,
    "thompson_pick": batch_size.thompson_pick_mistakes,
    "slowdown_limit": power_limit.slowdown_limit_mistakes,
    "plan_within": parallel.plan_within_mistakes,
}

REFERENCES = frozenset(reference for reference, _ in EXERCISES.values())

# name -> the unit of the answer, for the exercises whose answer is one physical quantity: a
# wrong answer off by a power of 1000 (or by 3600) is named as a unit slip in this unit
UNITS: dict[str, str] = {
    "average_power": "W",
    "energy_per_step": "J",
    "zeus_cost": "J",
    "iteration_energy": "J",
}
