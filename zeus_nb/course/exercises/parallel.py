"""Exercises on several GPUs: combining data-parallel ranks (05), the energy of a pipeline
iteration and the plan for a deadline (06)."""

from __future__ import annotations

from collections.abc import Sequence
from statistics import mean
from typing import Any

from zeus_nb.course.exercises.base import Case, Mistake, draw, rng, separating

SLOWEST = "ranks run side by side: the job lasts as long as its slowest rank"
SUM = "every rank's GPU draws power: the job's energy is the sum over ranks"
JOB = "the job's time is its slowest rank's and its energy the sum over its ranks"


def aggregate_ref(times: list[float], energies: list[float]) -> tuple[float, float]:
    return max(times), sum(energies)


def aggregate_cases() -> list[Case]:
    r = rng("aggregate_data_parallel")

    def ranks(r: Any) -> tuple[list[float], list[float]]:
        n = r.randint(4, 8)
        return (
            [round(r.uniform(1, 20), 2) for _ in range(n)],
            [round(r.uniform(10, 900), 1) for _ in range(n)],
        )

    def slowest_inside(case: tuple[list[float], list[float]]) -> bool:
        times = case[0]
        return times.index(max(times)) not in (0, len(times) - 1) and telling(case)

    cases = [
        Case("two ranks", ([1.0, 1.5], [100.0, 120.0]), JOB),
        Case("one rank", ([2.0], [50.0]), "one rank's time and energy are the job's"),
        Case("a straggler among four", ([2.0, 3.1, 2.1, 1.9], [80.0, 95.0, 81.0, 79.0]), JOB),
    ]
    telling = separating(
        [c.args for c in cases], [aggregate_ref, *(m.fn for m in aggregate_mistakes())]
    )
    return [*cases, Case("random ranks", draw(r, ranks, slowest_inside), JOB)]


def aggregate_mistakes() -> list[Mistake]:
    return [
        Mistake(
            "times added up",
            lambda ts, es: (sum(ts), sum(es)),
            "ranks run at the same time, not one after another: the job's time is the slowest "
            "rank's (max), not the sum",
        ),
        Mistake("mean time", lambda ts, es: (mean(ts), sum(es)), SLOWEST + " (max, not the mean)"),
        Mistake("fastest rank", lambda ts, es: (min(ts), sum(es)), SLOWEST + " (max, not min)"),
        Mistake("most energy", lambda ts, es: (max(ts), max(es)), SUM + " (not the largest)"),
        Mistake("mean energy", lambda ts, es: (max(ts), mean(es)), SUM + " (not the mean)"),
        Mistake(
            "rank 0 only",
            lambda ts, es: (ts[0], es[0]),
            "rank 0 is one GPU of several: combine every rank",
        ),
        Mistake(
            "energy first",
            lambda ts, es: (sum(es), max(ts)),
            "return (time, energy) in that order",
        ),
    ]


def iteration_energy_ref(
    busy_energy: Sequence[float],
    busy_time: Sequence[float],
    iteration_time: float,
    blocking_power: Sequence[float],
) -> float:
    return sum(
        e + p * (iteration_time - t)
        for e, t, p in zip(busy_energy, busy_time, blocking_power, strict=True)
    )


def iteration_energy_cases() -> list[Case]:
    r = rng("iteration_energy")
    blocking = (
        "each GPU's energy is its instructions' energy plus its blocking power x its wait "
        "(iteration time minus its busy time), summed over the stages"
    )
    n = r.randint(3, 6)
    busy = [round(r.uniform(0.1, 1.0), 3) for _ in range(n)]
    iteration = round(max(busy) * r.uniform(1.1, 1.5), 3)
    return [
        Case("two stages", ([10.0, 12.0], [1.0, 1.5], 2.0, [50.0, 60.0]), blocking),
        Case(
            "a stage that never waits",
            ([5.0], [2.0], 2.0, [40.0]),
            "a stage busy for the whole iteration adds no blocking energy",
        ),
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


def iteration_energy_mistakes() -> list[Mistake]:
    def total(term: Any) -> Any:
        return lambda es, ts, it, ps: sum(
            term(e, t, it, p) for e, t, p in zip(es, ts, ps, strict=True)
        )

    return [
        Mistake(
            "no waiting",
            total(lambda e, t, it, p: e),
            "a waiting GPU still draws its blocking power: add blocking power x (iteration time "
            "- busy time) per stage",
        ),
        Mistake(
            "blocking for the whole iteration",
            total(lambda e, t, it, p: e + p * it),
            "a GPU blocks only while it waits: iteration time minus its busy time",
        ),
        Mistake(
            "blocking while busy",
            total(lambda e, t, it, p: e + p * t),
            "blocking power counts while the GPU waits (iteration time - busy time), not while "
            "it computes",
        ),
        Mistake(
            "first stage only",
            lambda es, ts, it, ps: es[0] + ps[0] * (it - ts[0]),
            "add up every stage, not only the first",
        ),
    ]


def plan_within_ref(points: Sequence[tuple[float, float]], deadline: float) -> int:
    fits = [i for i, (t, _) in enumerate(points) if t <= deadline]
    return min(fits, key=lambda i: points[i][1])


def _plan_shortcuts(points: Sequence[tuple[float, float]], deadline: float) -> list[int]:
    """Answers that skip a step: first, last, least energy overall, fastest, slowest in time."""
    fits = [i for i, (t, _) in enumerate(points) if t <= deadline]
    by_energy = sorted(fits, key=lambda i: points[i][1])
    return [
        0,
        len(points) - 1,
        min(range(len(points)), key=lambda i: points[i][1]),
        min(range(len(points)), key=lambda i: points[i][0]),
        max(fits, key=lambda i: points[i][0]),
        fits.index(by_energy[0]),
    ]


def plan_within_cases() -> list[Case]:
    r = rng("plan_within")
    least = (
        "the answer is the index of the least-energy plan among those that take at most the "
        "deadline"
    )

    def scattered(r: Any) -> tuple[list[tuple[float, float]], float]:
        points = [(round(r.uniform(1, 3), 4), round(r.uniform(50, 150), 2)) for _ in range(10)]
        return points, round(sorted(t for t, _ in points)[r.randrange(3, 9)] + 1e-3, 4)

    def fresh(case: tuple[list, float]) -> bool:
        answer = plan_within_ref(*case)
        return answer not in _plan_shortcuts(*case) and answer not in (1, 2, 3) and telling(case)

    cases = [
        Case(
            "a deadline between two plans",
            ([(1.0, 100.0), (1.2, 90.0), (1.3, 92.0), (2.0, 84.0)], 1.4),
            least + ", so a cheaper plan past the deadline does not count",
        ),
        Case(
            "a deadline exactly on a plan's time",
            ([(2.0, 84.0), (1.0, 100.0), (1.2, 90.0), (1.5, 85.0), (2.5, 80.0)], 1.5),
            "a plan that takes exactly the deadline meets it",
        ),
        Case(
            "plans in no order",
            ([(3.0, 40.0), (2.0, 55.0), (1.5, 50.0), (1.0, 80.0)], 2.5),
            least + ", wherever it sits in the list",
        ),
    ]
    telling = separating(
        [c.args for c in cases], [plan_within_ref, *(m.fn for m in plan_within_mistakes())]
    )
    return [*cases, Case("random plans", draw(r, scattered, fresh), least)]


def plan_within_mistakes() -> list[Mistake]:
    def fits(ps: Sequence[tuple[float, float]], d: float) -> list[int]:
        return [i for i, (t, _) in enumerate(ps) if t <= d]

    return [
        Mistake(
            "ignores the deadline",
            lambda ps, d: min(range(len(ps)), key=lambda i: ps[i][1]),
            "only plans that take at most the deadline count",
        ),
        Mistake(
            "slowest plan that fits",
            lambda ps, d: max(fits(ps, d), key=lambda i: ps[i][0]),
            "the slowest plan that fits is not always the cheapest: compare the energies",
        ),
        Mistake(
            "strictly before the deadline",
            lambda ps, d: min((i for i, (t, _) in enumerate(ps) if t < d), key=lambda i: ps[i][1]),
            "a plan that takes exactly the deadline meets it (<=, not <)",
        ),
        Mistake(
            "fastest plan",
            lambda ps, d: min(range(len(ps)), key=lambda i: ps[i][0]),
            "the fastest plan meets every deadline but costs the most: look for the least energy",
        ),
        Mistake(
            "index among the fitting plans",
            lambda ps, d: sorted(range(len(fits(ps, d))), key=lambda k: ps[fits(ps, d)[k]][1])[0],
            "return the plan's index in the list you were given, not in a filtered list",
        ),
        Mistake(
            "the plan instead of its index",
            lambda ps, d: ps[min(fits(ps, d), key=lambda i: ps[i][1])],
            "return the plan's index (an int), not the plan itself",
        ),
        Mistake(
            "the most energy",
            lambda ps, d: max(fits(ps, d), key=lambda i: ps[i][1]),
            "that is the plan with the most energy among those in time: look for the least "
            "(min, not max)",
        ),
        Mistake(
            "the last plan in time",
            lambda ps, d: max(fits(ps, d)),
            "the last plan in the list that meets the deadline is not the cheapest: the plans "
            "come in no order, so compare the energies of every plan in time",
        ),
    ]
