"""Exercises on choosing a power limit: the Zeus cost (02), the energy-optimal limit (02) and the
lowest limit within a slowdown budget (05)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from zeus_nb.course.exercises.base import Case, Mistake, draw, rng, separating
from zeus_nb.optimizer.power_limit.selectors import PowerLimitMeasurement as M

WEIGHTS = "the cost is eta x energy + (1 - eta) x max_power x time, both terms in joules"


def zeus_cost_cases() -> list[Case]:
    r = rng("zeus_cost")
    return [
        Case("eta between 0 and 1", (1000.0, 10.0, 0.5, 300.0), WEIGHTS),
        Case(
            "eta = 1 (only energy)",
            (1000.0, 12.0, 1.0, 300.0),
            "with eta = 1 the cost is the energy alone",
        ),
        Case(
            "eta = 0 (only time)",
            (50.0, 2.0, 0.0, 250.0),
            "with eta = 0 the cost is max_power x time alone",
        ),
        Case(
            "random energy, time and eta",
            (
                round(r.uniform(100, 1e5), 1),
                round(r.uniform(1, 500), 2),
                round(r.uniform(0.1, 0.9), 2),
                float(r.choice((250, 300, 400))),
            ),
            WEIGHTS,
        ),
    ]


def zeus_cost_mistakes() -> list[Mistake]:
    return [
        Mistake(
            "weights swapped",
            lambda e, t, eta, p: (1 - eta) * e + eta * p * t,
            "eta weighs the energy and (1 - eta) the time, not the other way round",
        ),
        Mistake(
            "time not in joules",
            lambda e, t, eta, p: eta * e + (1 - eta) * t,
            "seconds and joules do not add up: multiply the time by max_power first",
        ),
        Mistake(
            "no weights",
            lambda e, t, eta, p: e + p * t,
            "weigh the two terms: eta weighs the energy and (1 - eta) the time term",
        ),
        Mistake("energy only", lambda e, t, eta, p: e, "the cost also counts time unless eta = 1"),
    ]


def _profile(limits: Sequence[float], times: Sequence[float], energies: Sequence[float]) -> Any:
    import pandas as pd

    return pd.DataFrame(
        {"power_limit": list(limits), "time_s": list(times), "energy_j": list(energies)}
    ).set_index("power_limit")


def energy_optimal_ref(profile: Any) -> float:
    return float(profile.energy_j.idxmin())


def _shortcuts(profile: Any) -> list[Any]:
    """Answers that ignore the energy column: highest, lowest, first, last, fastest, slowest."""
    index = list(profile.index)
    times = profile.time_s
    return [max(index), min(index), index[0], index[-1], times.idxmin(), times.idxmax()]


def _u_shaped(r: Any, limits: list[float]) -> Any:
    """Times that grow faster below a random turning point, so energy falls and then rises."""
    turn = r.randrange(2, len(limits) - 2)
    times = [
        round(10.0 * (1 + 0.01 * i + (0.2 * (i - turn) ** 2 if i > turn else 0)), 3)
        for i in range(len(limits))
    ]
    power = [w * r.uniform(0.7, 0.9) for w in limits]
    return _profile(limits, times, [round(t * p, 1) for t, p in zip(times, power, strict=True)])


def _row(profile: Any) -> int:
    return int(profile.energy_j.to_numpy().argmin())


def energy_optimal_cases() -> list[Case]:
    r = rng("energy_optimal_limit")
    which = "the answer is the limit (the index) of the row with the least energy_j"
    limits = [300.0, 275.0, 250.0, 225.0, 200.0, 175.0, 150.0, 125.0]
    u = draw(  # 200 W is the next case's answer: one remembered number passes one case only
        r,
        lambda r: _u_shaped(r, limits),
        lambda p: energy_optimal_ref(p) not in [*_shortcuts(p), 200.0] and _row(p) != 2,
    )

    def scattered(r: Any) -> Any:
        shuffled = [w + 5 for w in limits]
        r.shuffle(shuffled)
        return _profile(
            shuffled,
            [round(r.uniform(8, 30), 2) for _ in limits],
            [round(r.uniform(1000, 9000), 1) for _ in limits],
        )

    falling = _profile([300.0, 250.0, 200.0], [10.0, 10.5, 11.0], [3000.0, 2600.0, 2200.0])
    telling = separating(
        [(u,), (falling,)], [energy_optimal_ref, *(m.fn for m in energy_optimal_mistakes())]
    )

    def fresh(p: Any) -> bool:
        best = energy_optimal_ref(p)
        return (
            telling((p,))
            and best not in _shortcuts(p)
            and best - 5 != energy_optimal_ref(u)
            and _row(p) not in (2, _row(u))  # the row of the least energy moves too
        )

    return [
        Case(
            "a U-shaped profile",
            (u,),
            "the least energy can lie between the highest and the lowest limit",
        ),
        Case("energy falling with the limit", (falling,), which),
        Case(
            "limits in no order (another GPU's)",
            (draw(r, scattered, fresh),),
            which + ", wherever the row sits in a table in no order",
        ),
    ]


def energy_optimal_mistakes() -> list[Mistake]:
    return [
        Mistake(
            "highest limit",
            lambda p: float(p.index.max()),
            "the highest limit is the fastest, not the most frugal: find the least energy_j",
        ),
        Mistake(
            "lowest limit",
            lambda p: float(p.index.min()),
            "the lowest limit is not always the least energy: below the optimum energy rises again",
        ),
        Mistake(
            "least time",
            lambda p: float(p.time_s.idxmin()),
            "that is the limit with the least time; this one asks for the least energy (energy_j)",
        ),
        Mistake(
            "the energy itself",
            lambda p: float(p.energy_j.min()),
            "that is the least energy in J: return its power limit (the row's index label)",
        ),
        Mistake(
            "row position",
            lambda p: int(p.energy_j.to_numpy().argmin()),
            "argmin gives the row's position; the power limit is the row's index label",
        ),
        Mistake(
            "most energy",
            lambda p: float(p.energy_j.idxmax()),
            "idxmax finds the most energy: look for the least (min, not max)",
        ),
        Mistake(
            "first row",
            lambda p: float(p.index[0]),
            "the first row is not special: compare the energy of every row",
        ),
        Mistake(
            "last row",
            lambda p: float(p.index[-1]),
            "the last row is not special: compare the energy of every row",
        ),
    ]


def slowdown_limit_ref(profile: Sequence[Any], max_slowdown: float) -> float:
    reference = max(profile, key=lambda m: m.power_limit).time
    return min(m.power_limit for m in profile if m.time <= max_slowdown * reference)


def _slowdown_shortcuts(profile: Sequence[Any]) -> list[float]:
    limits = [m.power_limit for m in profile]
    least_energy = min(profile, key=lambda m: m.energy).power_limit
    return [max(limits), min(limits), limits[0], limits[-1], least_energy]


def slowdown_limit_cases() -> list[Case]:
    r = rng("slowdown_limit")
    budget = (
        "the answer is the lowest limit whose time is at most max_slowdown x the time at the "
        "highest limit"
    )

    def shuffled(r: Any) -> tuple[list[Any], float]:
        limits = [float(w) for w in range(r.choice((275, 325, 350)), 99, -25)]
        times, t = [], r.uniform(5, 50)
        for _ in limits:
            times.append(round(t, 3))
            t *= r.uniform(1.0, 1.12)
        ms = [M(w, round(r.uniform(1e3, 1e4), 1), t) for w, t in zip(limits, times, strict=True)]
        r.shuffle(ms)
        return ms, round(r.uniform(1.05, 1.4), 2)

    def fresh(case: tuple[list[Any], float]) -> bool:
        answer = slowdown_limit_ref(*case)
        ms, f = case
        least_energy = min(ms, key=lambda m: m.energy).power_limit
        return (
            telling(case)
            and answer not in _slowdown_shortcuts(ms)
            and answer not in (175.0, 200.0, 225.0, 250.0)
            and least_energy != min(m.power_limit for m in ms)
        )

    fixed = [
        Case(
            "energy that keeps falling",
            (
                [
                    M(200.0, 2500.0, 11.5),
                    M(300.0, 3000.0, 10.0),
                    M(250.0, 2700.0, 10.5),
                    M(150.0, 2400.0, 14.0),
                ],
                1.1,
            ),
            budget,
        ),
        Case(
            "every limit within the budget",
            ([M(250.0, 2500.0, 10.2), M(175.0, 2600.0, 10.9), M(275.0, 3000.0, 10.0)], 1.5),
            budget + ", even when that is the lowest limit measured",
        ),
        Case(
            "a time exactly on the budget",
            (
                [
                    M(250.0, 2800.0, 9.0),
                    M(300.0, 3000.0, 8.0),
                    M(175.0, 2450.0, 11.0),
                    M(200.0, 2600.0, 10.0),
                    M(150.0, 2700.0, 12.0),
                ],
                1.25,
            ),
            "a time equal to the budget is within it",
        ),
        Case(
            "the highest limit is not the fastest",
            (
                [
                    M(275.0, 2850.0, 10.0),
                    M(300.0, 3000.0, 10.4),
                    M(225.0, 2600.0, 11.2),
                    M(250.0, 2700.0, 10.9),
                    M(200.0, 2550.0, 12.5),
                ],
                1.1,
            ),
            "the budget is measured from the time at the highest limit, even when a lower "
            "limit happened to run faster",
        ),
    ]
    telling = separating(
        [c.args for c in fixed], [slowdown_limit_ref, *(m.fn for m in slowdown_limit_mistakes())]
    )
    return [
        *fixed,
        Case("limits in no order", draw(r, shuffled, fresh), budget + ", in a list in no order"),
    ]


def slowdown_limit_mistakes() -> list[Mistake]:
    return [
        Mistake(
            "least energy",
            lambda ms, f: min(ms, key=lambda m: m.energy).power_limit,
            "the least energy is not the answer: take the lowest limit within the slowdown budget",
        ),
        Mistake(
            "highest limit",
            lambda ms, f: max(m.power_limit for m in ms),
            "the highest limit is always within the budget: look for the lowest one that still is",
        ),
        Mistake(
            "lowest limit",
            lambda ms, f: min(m.power_limit for m in ms),
            "the lowest limit may be too slow: keep only limits whose time is within "
            "max_slowdown x the time at the highest limit",
        ),
        Mistake(
            "first measurement as the reference",
            lambda ms, f: min(m.power_limit for m in ms if m.time <= f * ms[0].time),
            "the list is not sorted: the reference time is the time at the highest limit",
        ),
        Mistake(
            "strictly within",
            lambda ms, f: min(
                m.power_limit for m in ms if m.time < f * max(ms, key=lambda m: m.power_limit).time
            ),
            "a time equal to the budget is within it (<=, not <)",
        ),
        Mistake(
            "fastest time as the reference",
            lambda ms, f: min(m.power_limit for m in ms if m.time <= f * min(x.time for x in ms)),
            "the budget is max_slowdown x the time at the highest limit, not x the fastest time: "
            "a lower limit may run a little faster by chance",
        ),
        Mistake(
            "first measurement",
            lambda ms, f: ms[0].power_limit,
            "the first measurement is not special (the list is in no order): keep the lowest "
            "limit whose time is within the budget",
        ),
    ]
