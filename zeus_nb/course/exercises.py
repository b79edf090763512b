"""The exercises the notebooks check: each one's reference answer and its cases.

A case has fixed inputs that show a concept (units, which energy, which sign) and random ones
drawn from the notebook's seed (:func:`use_seed`), so one memorized number cannot pass.
:mod:`zeus_nb.course.check` runs them and words the feedback; it never shows a reference answer.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from zeus_nb.monitor import Measurement
from zeus_nb.runner import setup
from zeus_nb.tradeoff import zeus_cost as _zeus_cost


@dataclass(frozen=True)
class Case:
    """One input of a check: ``kind`` names it for people, ``hint`` points at the concept."""

    kind: str
    args: tuple
    hint: str


def use_seed(seed: int) -> None:
    """Seed the random cases (``notebook_setup`` sets the notebook's seed the same way)."""
    setup._seed = int(seed)


def _rng(name: str) -> random.Random:
    return random.Random(f"{name}:{setup.notebook_seed()}")


def _average_power_ref(m: Measurement) -> float:
    return m.total_energy / m.time if m.time > 0 else 0.0


def _average_power_cases() -> list[Case]:
    r = _rng("average_power")
    units = "power (W) is energy (J) divided by time (s)"
    t, e = round(r.uniform(0.5, 30), 3), round(r.uniform(50, 9000), 1)
    e2 = round(r.uniform(50, 9000), 1)
    return [
        Case("one GPU", (Measurement(t, {0: e}),), units),
        Case(
            "two GPUs",
            (Measurement(t, {0: e, 1: e2}),),
            "count the energy of every GPU: measurement.total_energy",
        ),
        Case("an empty window (0 s)", (Measurement(0.0, {0: 0.0}),), "0 s of time means 0 W"),
        Case(
            "a random window",
            (Measurement(round(r.uniform(0.1, 5), 3), {0: round(r.uniform(1, 500), 1)}),),
            units,
        ),
    ]


def _energy_per_step_ref(m: Measurement, steps: int) -> float:
    return m.total_energy / steps


def _energy_per_step_cases() -> list[Case]:
    r = _rng("energy_per_step")
    per = "joules per step: the window's energy over the number of steps"
    return [
        Case("one GPU", (Measurement(10.0, {0: round(r.uniform(100, 900), 1)}), 50), per),
        Case(
            "two GPUs",
            (Measurement(3.0, {0: round(r.uniform(50, 150), 1), 1: 30.0}), 4),
            "count the energy of every GPU: measurement.total_energy",
        ),
        Case(
            "a random window",
            (Measurement(r.uniform(1, 9), {0: round(r.uniform(10, 5000), 1)}), r.randint(2, 99)),
            per + " (time plays no part)",
        ),
    ]


def _zeus_cost_cases() -> list[Case]:
    r = _rng("zeus_cost")
    weights = "eta weighs energy, (1 - eta) weighs max_power x time (both in joules)"
    return [
        Case("eta between 0 and 1", (1000.0, 10.0, 0.5, 300.0), weights),
        Case(
            "eta = 1 (only energy)", (1000.0, 10.0, 1.0, 300.0), "with eta = 1 only energy counts"
        ),
        Case(
            "eta = 0 (only time)",
            (50.0, 2.0, 0.0, 250.0),
            "with eta = 0 the cost is max_power x time",
        ),
        Case(
            "random energy, time and eta",
            (
                round(r.uniform(100, 1e5), 1),
                round(r.uniform(1, 500), 2),
                round(r.uniform(0, 1), 2),
                float(r.choice((250, 300, 400))),
            ),
            weights,
        ),
    ]


def _pareto_ref(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    front: list[tuple[float, float]] = []
    for t, e in sorted(points, key=lambda p: (p[0], p[1])):
        if not front or e < front[-1][1]:
            front.append((t, e))
    return front


def _pareto_cases() -> list[Case]:
    r = _rng("pareto_front")
    keep = "keep a point unless another is no slower and uses less energy"
    random_points = [(round(r.uniform(1, 100), 2), round(r.uniform(1, 100), 2)) for _ in range(12)]
    return [
        Case("a mixed set", ([(1.0, 10.0), (2.0, 5.0), (3.0, 6.0), (4.0, 1.0)],), keep),
        Case("a single point", ([(5.0, 5.0)],), "one point is its own front"),
        Case(
            "ties in time or energy",
            ([(2.0, 3.0), (1.0, 4.0), (1.0, 5.0), (3.0, 3.0)],),
            "of two points with the same time keep the lower energy; sort by time",
        ),
        Case("random points", (random_points,), keep + "; sort the result by time"),
    ]


def _should_stop_ref(cost: float, best: float | None, beta: float) -> bool:
    if best is None or math.isinf(beta):
        return False
    return cost > beta * best


def _should_stop_cases() -> list[Case]:
    r = _rng("should_stop_early")
    best = round(r.uniform(50, 500), 1)
    beta = round(r.uniform(1.2, 3), 2)
    past = "stop once the cost passes beta x the best cost (strictly more)"
    return [
        Case("a cost past beta x best", (round(best * beta * 1.3, 1), best, beta), past),
        Case("a cost below beta x best", (round(best * beta * 0.7, 1), best, beta), past),
        Case("a cost exactly beta x best", (200.0, 100.0, 2.0), "at exactly beta x best, go on"),
        Case("beta = inf", (1e9, 100.0, math.inf), "beta = inf means never stop"),
        Case("no best cost yet", (500.0, None, 2.0), "with no successful run yet, never stop"),
    ]


def _aggregate_ref(times: list[float], energies: list[float]) -> tuple[float, float]:
    return max(times), sum(energies)


def _aggregate_cases() -> list[Case]:
    r = _rng("aggregate_data_parallel")
    n = r.randint(3, 8)
    times = [round(r.uniform(1, 20), 2) for _ in range(n)]
    energies = [round(r.uniform(10, 900), 1) for _ in range(n)]
    parallel = "ranks run side by side: the job lasts as long as its slowest rank"
    return [
        Case("two ranks", ([1.0, 1.5], [100.0, 120.0]), parallel),
        Case("one rank", ([2.0], [50.0]), "one rank's time and energy are the job's"),
        Case(
            "random ranks",
            (times, energies),
            "every rank's GPU draws power: the job's energy is the sum over ranks",
        ),
    ]


def _energy_optimal_ref(profile: Any) -> float:
    return float(profile.energy_j.idxmin())


def _profile(limits: Sequence[float], times: Sequence[float], energies: Sequence[float]) -> Any:
    import pandas as pd

    return pd.DataFrame(
        {"power_limit": list(limits), "time_s": list(times), "energy_j": list(energies)}
    ).set_index("power_limit")


def _energy_optimal_cases() -> list[Case]:
    r = _rng("energy_optimal_limit")
    which = "the least *energy* (column energy_j), not the least time or the lowest limit"
    limits = [300.0, 275.0, 250.0, 225.0, 200.0, 175.0, 150.0, 125.0]
    # below a random limit, time grows faster than power falls: energy is U-shaped
    turn = r.randrange(2, len(limits) - 2)
    times = [10.0 * (1 + 0.01 * i + (0.2 * (i - turn) ** 2 if i > turn else 0)) for i in range(8)]
    power = [w * r.uniform(0.7, 0.9) for w in limits]
    energies = [round(t * p, 1) for t, p in zip(times, power, strict=True)]
    random_energy = [round(r.uniform(1000, 9000), 1) for _ in limits]
    return [
        Case(
            "a U-shaped profile",
            (_profile(limits, times, energies),),
            "the lowest limit is not the answer: below the optimum, energy rises again",
        ),
        Case(
            "energy falling with the limit",
            (_profile([300.0, 250.0, 200.0], [10.0, 10.5, 11.0], [3000.0, 2600.0, 2200.0]),),
            which,
        ),
        Case("a random profile", (_profile(limits, times, random_energy),), which),
        Case(
            "another GPU's limits",  # other limits: one remembered number cannot pass both
            (_profile([w + 5 for w in limits], times, random_energy[::-1]),),
            which,
        ),
    ]


def _iteration_energy_ref(
    busy_energy: Sequence[float],
    busy_time: Sequence[float],
    iteration_time: float,
    blocking_power: Sequence[float],
) -> float:
    return sum(
        e + p * (iteration_time - t)
        for e, t, p in zip(busy_energy, busy_time, blocking_power, strict=True)
    )


def _iteration_energy_cases() -> list[Case]:
    r = _rng("iteration_energy")
    blocking = (
        "every GPU draws power the whole iteration: its instructions' energy plus its blocking "
        "power while it waits (iteration time minus its busy time)"
    )
    n = r.randint(3, 6)
    busy = [round(r.uniform(0.1, 1.0), 3) for _ in range(n)]
    iteration = round(max(busy) * r.uniform(1.0, 1.5), 3)
    return [
        Case("two stages", ([10.0, 12.0], [1.0, 1.5], 2.0, [50.0, 60.0]), blocking),
        Case("a stage that never waits", ([5.0], [2.0], 2.0, [40.0]), "no wait, no blocking"),
        Case(
            "random stages",
            (
                [round(r.uniform(1, 50), 2) for _ in range(n)],
                busy,
                iteration,
                [round(r.uniform(20, 90), 1) for _ in range(n)],
            ),
            blocking,
        ),
    ]


def _least_cost_ref(
    configs: Sequence[tuple[int, float, float, float]], eta_knob: float
) -> tuple[int, float]:
    max_power = max(c[1] for c in configs)
    best = min(configs, key=lambda c: _zeus_cost(c[3], c[2], eta_knob, max_power))
    return best[0], best[1]


def _least_cost_cases() -> list[Case]:
    r = _rng("least_cost_config")
    cost = (
        "cost = eta x energy + (1 - eta) x MaxPower x time; keep the configuration that costs least"
    )
    mp = "MaxPower is the highest power limit in the table, the same for every configuration"
    configs = [
        (
            r.choice((32, 64, 128, 256, 512)),
            float(r.randrange(100, 301, 25)),
            round(r.uniform(100, 5000), 1),
            round(r.uniform(1e4, 1e6), 1),
        )
        for _ in range(8)
    ]
    return [
        Case(
            "eta = 1 (least energy)",
            (
                [(32, 300.0, 10.0, 3000.0), (64, 250.0, 12.0, 2500.0), (128, 200.0, 20.0, 2600.0)],
                1.0,
            ),
            "with eta = 1 only energy counts",
        ),
        Case(
            "eta = 0 (least time)",
            ([(32, 300.0, 9.0, 3000.0), (64, 250.0, 12.0, 2500.0)], 0.0),
            "with eta = 0 only time counts",
        ),
        Case(
            "a low limit that looks cheap",
            ([(64, 300.0, 10.0, 3000.0), (128, 150.0, 14.0, 2000.0)], 0.5),
            mp,
        ),
        Case("a random table", (configs, round(r.uniform(0.1, 0.9), 2)), cost),
    ]


def _thompson_pick_ref(posterior: dict[int, tuple[float, float]], z: Sequence[float]) -> int:
    draws = {b: m + s * x for (b, (m, s)), x in zip(posterior.items(), z, strict=True)}
    return min(draws, key=draws.__getitem__)


def _thompson_pick_cases() -> list[Case]:
    r = _rng("thompson_pick")
    draw = "draw each arm's cost as mean + std x z (its own z), then run the cheapest draw"
    arms = sorted(r.sample((32, 64, 96, 128, 192, 256, 360, 512), 5))
    posterior = {b: (round(r.uniform(1e4, 2e4), 1), round(r.uniform(100, 3000), 1)) for b in arms}
    return [
        Case(
            "a cheap mean that draws high",
            ({128: (100.0, 10.0), 256: (95.0, 5.0)}, [0.2, 1.5]),
            "pick the cheapest draw, not the cheapest mean: " + draw,
        ),
        Case(
            "an arm with no spread (std 0)",
            ({64: (50.0, 0.0), 128: (52.0, 4.0)}, [3.0, 0.1]),
            "with std 0 an arm always draws its mean",
        ),
        Case(
            "draws below the mean",
            ({192: (60.0, 2.0), 256: (70.0, 8.0), 360: (80.0, 20.0)}, [0.5, -1.0, -1.2]),
            "a negative z draws below the mean: " + draw,
        ),
        Case(
            "a random posterior",
            (posterior, [round(r.gauss(0, 1), 3) for _ in arms]),
            draw + "; return the batch size",
        ),
    ]


def _slowdown_limit_ref(profile: Sequence[Any], max_slowdown: float) -> float:
    reference = max(profile, key=lambda m: m.power_limit).time
    return min(m.power_limit for m in profile if m.time <= max_slowdown * reference)


def _slowdown_limit_cases() -> list[Case]:
    from zeus_nb.optimizer.power_limit.selectors import PowerLimitMeasurement as M

    r = _rng("slowdown_limit")
    budget = (
        "the budget is max_slowdown x the time at the highest limit; "
        "keep the lowest limit within it"
    )
    limits = [float(w) for w in range(r.choice((250, 300, 350)), 99, -25)]
    times, t = [], r.uniform(5, 50)
    for _ in limits:
        times.append(round(t, 3))
        t *= r.uniform(1.0, 1.12)
    shuffled = [M(w, round(r.uniform(1e3, 1e4), 1), t) for w, t in zip(limits, times, strict=True)]
    r.shuffle(shuffled)
    return [
        Case(
            "energy that keeps falling",
            (
                [
                    M(300.0, 3000.0, 10.0),
                    M(250.0, 2700.0, 10.5),
                    M(200.0, 2500.0, 11.5),
                    M(150.0, 2400.0, 14.0),
                ],
                1.1,
            ),
            "the least energy is not the answer: the limit must stay within the slowdown budget",
        ),
        Case(
            "every limit within the budget",
            ([M(300.0, 3000.0, 10.0), M(250.0, 2700.0, 10.2), M(175.0, 2600.0, 10.9)], 1.5),
            budget,
        ),
        Case(
            "a time exactly on the budget",
            ([M(300.0, 3000.0, 8.0), M(250.0, 2800.0, 9.0), M(200.0, 2600.0, 10.0)], 1.25),
            "a time equal to the budget is within it",
        ),
        Case(
            "limits in no order",
            (shuffled, round(r.uniform(1.05, 1.4), 2)),
            "the reference time is the time at the highest limit; the list is not sorted",
        ),
    ]


def _plan_within_ref(points: Sequence[tuple[float, float]], deadline: float) -> int:
    fits = [i for i, (t, _) in enumerate(points) if t <= deadline]
    return min(fits, key=lambda i: points[i][1])


def _plan_within_cases() -> list[Case]:
    r = _rng("plan_within")
    least = "of the plans that finish by the deadline, return the index of the least-energy one"
    points = [(round(r.uniform(1, 3), 4), round(r.uniform(50, 150), 2)) for _ in range(10)]
    frontier = [(1.0, 100.0), (1.2, 90.0), (1.5, 85.0), (2.0, 84.0)]
    return [
        Case(
            "a deadline between two plans",
            (frontier, 1.4),
            "only plans that take at most the deadline count",
        ),
        Case(
            "a deadline exactly on a plan's time",
            (frontier, 1.5),
            "a plan that takes exactly the deadline meets it",
        ),
        Case(
            "plans in no order",
            ([(2.0, 55.0), (1.0, 80.0), (3.0, 40.0), (1.5, 50.0)], 2.5),
            "the slowest plan that fits is not always the cheapest: " + least,
        ),
        Case(
            "random plans",
            (points, round(sorted(t for t, _ in points)[r.randrange(3, 9)] + 1e-3, 4)),
            least,
        ),
    ]


EXERCISES: dict[str, tuple[Callable, Callable[[], list[Case]]]] = {
    "average_power": (_average_power_ref, _average_power_cases),
    "energy_per_step": (_energy_per_step_ref, _energy_per_step_cases),
    "zeus_cost": (_zeus_cost, _zeus_cost_cases),
    "energy_optimal_limit": (_energy_optimal_ref, _energy_optimal_cases),
    "pareto_front": (_pareto_ref, _pareto_cases),
    "should_stop_early": (_should_stop_ref, _should_stop_cases),
    "aggregate_data_parallel": (_aggregate_ref, _aggregate_cases),
    "iteration_energy": (_iteration_energy_ref, _iteration_energy_cases),
    "least_cost_config": (_least_cost_ref, _least_cost_cases),
    "thompson_pick": (_thompson_pick_ref, _thompson_pick_cases),
    "slowdown_limit": (_slowdown_limit_ref, _slowdown_limit_cases),
    "plan_within": (_plan_within_ref, _plan_within_cases),
}
