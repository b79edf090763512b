"""Notebook 03's exercises: the Pareto front and the least-cost configuration."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from zeus_nb.course.exercises.base import Case, Mistake, draw, rng, separating
from zeus_nb.tradeoff import zeus_cost

KEEP = (
    "the front keeps every point that no other point beats (no slower and less energy), "
    "sorted by time"
)


def pareto_ref(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    front: list[tuple[float, float]] = []
    for t, e in sorted(points, key=lambda p: (p[0], p[1])):
        if not front or e < front[-1][1]:
            front.append((t, e))
    return front


def _walk(points: Sequence[tuple[float, float]], strict: bool) -> list[tuple[float, float]]:
    """The usual loop over points in the given order (``strict=False``: keeps equal energies)."""
    front: list[tuple[float, float]] = []
    for t, e in points:
        if not front or e < front[-1][1] or (not strict and e == front[-1][1]):
            front.append((t, e))
    return front


def _walk_up(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The loop with its comparison the wrong way round: keeps each point of higher energy."""
    front: list[tuple[float, float]] = []
    for t, e in sorted(points):
        if not front or e > front[-1][1]:
            front.append((t, e))
    return front


def pareto_cases() -> list[Case]:
    r = rng("pareto_front")

    def scattered(r: Any) -> list[tuple[float, float]]:
        return [(round(r.uniform(1, 100), 2), round(r.uniform(1, 100), 2)) for _ in range(12)]

    fixed = [
        Case("a mixed set", ([(3.0, 6.0), (1.0, 10.0), (4.0, 1.0), (2.0, 5.0)],), KEEP),
        Case("a single point", ([(5.0, 5.0)],), "one point is its own front"),
        Case(
            "ties in time or energy",
            ([(2.0, 3.0), (1.0, 5.0), (1.0, 4.0), (3.0, 3.0)],),
            "of two points with the same time only the lower energy is on the front, and of two "
            "with the same energy only the faster",
        ),
    ]
    apart = separating([c.args for c in fixed], [pareto_ref, *(m.fn for m in pareto_mistakes())])

    def telling(points: list[tuple[float, float]]) -> bool:
        return len(pareto_ref(points)) >= 3 and apart((points,))

    return [*fixed, Case("random points", (draw(r, scattered, telling),), KEEP)]


def pareto_mistakes() -> list[Mistake]:
    return [
        Mistake(
            "not sorted by time",
            lambda ps: [p for p in ps if p in pareto_ref(ps)],
            "the right points, in the wrong order: sort the front by time",
        ),
        Mistake(
            "every point",
            lambda ps: sorted(ps),
            "drop every point that another point dominates (no slower and less energy)",
        ),
        Mistake(
            "sorted by time only",
            lambda ps: _walk(sorted(ps, key=lambda p: p[0]), strict=True),
            "of two points with the same time only the one with less energy is on the front",
        ),
        Mistake(
            "keeps equal energies",
            lambda ps: _walk(sorted(ps), strict=False),
            "a slower point with the same energy as a faster one is dominated: keep it only if "
            "its energy is strictly lower",
        ),
        Mistake(
            "only one point",
            lambda ps: [min(ps, key=lambda p: p[1])],
            "the front holds every point no other beats, not only the best one",
        ),
        Mistake(
            "sorted by energy",
            lambda ps: sorted(pareto_ref(ps), key=lambda p: p[1]),
            "sort the front by time (fastest first)",
        ),
        Mistake(
            "unsorted loop",
            lambda ps: _walk(ps, strict=True),
            "the loop compares each point with the last one kept, which works only when the "
            "points come in order of time: sort them by time (then energy) before the loop",
        ),
        Mistake(
            "comparison the wrong way round",
            _walk_up,
            "the comparison goes the wrong way: a slower point joins the front only when its "
            "energy is lower than the last point kept, not higher",
        ),
    ]


def least_cost_ref(
    configs: Sequence[tuple[int, float, float, float]], eta_knob: float
) -> tuple[int, float]:
    max_power = max(c[1] for c in configs)
    best = min(configs, key=lambda c: zeus_cost(c[3], c[2], eta_knob, max_power))
    return best[0], best[1]


def _config_shortcuts(configs: Sequence[tuple[int, float, float, float]]) -> list[tuple]:
    """Answers that ignore the cost: first, last, least energy, least time, highest or lowest
    limit, smallest or largest batch size."""
    pick = [
        configs[0],
        configs[-1],
        min(configs, key=lambda c: c[3]),
        min(configs, key=lambda c: c[2]),
        max(configs, key=lambda c: c[1]),
        min(configs, key=lambda c: c[1]),
        min(configs, key=lambda c: c[0]),
        max(configs, key=lambda c: c[0]),
    ]
    return [(c[0], c[1]) for c in pick]


def least_cost_cases() -> list[Case]:
    r = rng("least_cost_config")
    cost = (
        "the answer is the configuration with the least eta x energy + (1 - eta) x MaxPower x time"
    )
    mp = "MaxPower is the highest power limit in the table, the same for every configuration"

    def table(r: Any) -> tuple[list[tuple[int, float, float, float]], float]:
        configs = [
            (
                r.choice((32, 64, 128, 256, 512)),
                float(r.randrange(100, 301, 25)),
                round(r.uniform(100, 5000), 1),
                round(r.uniform(1e4, 1e6), 1),
            )
            for _ in range(8)
        ]
        return configs, round(r.uniform(0.2, 0.8), 2)

    fixed = {(64, 250.0), (32, 300.0), (64, 300.0)}

    def fresh(case: tuple[list, float]) -> bool:
        answer = least_cost_ref(*case)
        configs, eta = case
        near_misses = [m.fn(configs, eta) for m in least_cost_mistakes()[:3]]
        return answer not in [*_config_shortcuts(configs), *fixed, *near_misses] and telling(case)

    cases = [
        Case(
            "eta = 1 (least energy)",
            (
                [(32, 300.0, 10.0, 3000.0), (64, 250.0, 12.0, 2500.0), (128, 200.0, 20.0, 2600.0)],
                1.0,
            ),
            "with eta = 1 the cost is the energy alone",
        ),
        Case(
            "eta = 0 (least time)",
            (
                [(64, 250.0, 12.0, 2400.0), (32, 300.0, 9.0, 3000.0), (128, 150.0, 10.0, 2600.0)],
                0.0,
            ),
            "with eta = 0 the cost is MaxPower x time alone",
        ),
        Case(
            "a low limit that looks cheap",
            (
                [
                    (32, 300.0, 9.5, 4500.0),
                    (64, 300.0, 10.0, 3000.0),
                    (128, 150.0, 14.0, 2000.0),
                ],
                0.4,
            ),
            mp,
        ),
    ]
    telling = separating(
        [c.args for c in cases], [least_cost_ref, *(m.fn for m in least_cost_mistakes())]
    )
    return [*cases, Case("a random table", draw(r, table, fresh), cost)]


def max_limit(configs: Sequence[tuple[int, float, float, float]]) -> float:
    return max(c[1] for c in configs)


def least_cost_mistakes() -> list[Mistake]:
    def by(cost: Any) -> Any:
        return lambda cs, eta: tuple(min(cs, key=lambda c: cost(c, eta, max(x[1] for x in cs)))[:2])

    return [
        Mistake(
            "own limit as MaxPower",
            by(lambda c, eta, top: eta * c[3] + (1 - eta) * c[1] * c[2]),
            "MaxPower is the highest power limit in the table, the same for every configuration: "
            "a low limit does not make time cheaper",
        ),
        Mistake(
            "weights swapped",
            by(lambda c, eta, top: (1 - eta) * c[3] + eta * top * c[2]),
            "eta weighs the energy and (1 - eta) the time, not the other way round",
        ),
        Mistake(
            "time not in joules",
            by(lambda c, eta, top: eta * c[3] + (1 - eta) * c[2]),
            "seconds and joules do not add up: multiply the time by MaxPower",
        ),
        Mistake(
            "least energy",
            by(lambda c, eta, top: c[3]),
            "the least energy wins only with eta = 1: weigh time in too",
        ),
        Mistake(
            "least time",
            by(lambda c, eta, top: c[2]),
            "the least time wins only with eta = 0: weigh energy in too",
        ),
        Mistake(
            "first row",
            lambda cs, eta: tuple(cs[0][:2]),
            "the first configuration is not special: compare the cost of every one",
        ),
        Mistake(
            "the whole row",
            lambda cs, eta: min(
                cs, key=lambda c: zeus_cost(c[3], c[2], eta, max(x[1] for x in cs))
            ),
            "return only (batch_size, power_limit), not the whole row",
        ),
        Mistake(
            "the highest cost",
            lambda cs, eta: tuple(
                max(cs, key=lambda c: zeus_cost(c[3], c[2], eta, max(x[1] for x in cs)))[:2]
            ),
            "that is the configuration with the highest cost: look for the least (min, not max)",
        ),
    ]
