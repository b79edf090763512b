"""Checks for the notebook exercises: run a student's function on small inputs, say what is wrong.

Each ``check.<exercise>(fn)`` calls ``fn`` on a few cases, compares with the reference answer and
raises :class:`CheckError` (an AssertionError) naming the failing input, the expected and the actual
value. On success it prints one line and returns True, so a notebook cell shows the result.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from zeus_nb.monitor import Measurement
from zeus_nb.tradeoff import zeus_cost as _zeus_cost


class CheckError(AssertionError):
    """A student's answer differs from the reference."""


def _close(a: Any, b: Any, rel: float = 1e-6) -> bool:
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_close(x, y, rel) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b or a == b
    try:
        return math.isclose(float(a), float(b), rel_tol=rel, abs_tol=1e-9)
    except (TypeError, ValueError):
        return False


def _run(name: str, fn: Callable, cases: Sequence[tuple[tuple, Any]], hint: str) -> bool:
    if not callable(fn):
        raise CheckError(f"{name}: expected a function, got {type(fn).__name__}")
    for args, expected in cases:
        shown = ", ".join(repr(a) for a in args)
        try:
            got = fn(*args)
        except NotImplementedError:
            raise
        except Exception as e:
            raise CheckError(f"{name}({shown}) raised {type(e).__name__}: {e}. Hint: {hint}") from e
        if not _close(got, expected):
            raise CheckError(
                f"{name}({shown}) returned {got!r}, expected {expected!r}. Hint: {hint}"
            )
    print(f"✓ {name}: all {len(cases)} cases correct")
    return True


def average_power(fn: Callable[[Measurement], float]) -> bool:
    """fn(measurement) -> average power in W over the window (0 for an empty window)."""
    cases = [
        ((Measurement(2.0, {0: 100.0, 1: 300.0}),), 200.0),
        ((Measurement(0.5, {0: 60.0}),), 120.0),
        ((Measurement(0.0, {0: 0.0}),), 0.0),
    ]
    return _run(
        "average_power", fn, cases, "total energy (all GPUs) divided by time; 0 if time is 0"
    )


def energy_per_step(fn: Callable[[Measurement, int], float]) -> bool:
    """fn(measurement, steps) -> joules per training step."""
    cases = [
        ((Measurement(10.0, {0: 500.0}), 50), 10.0),
        ((Measurement(3.0, {0: 90.0, 1: 30.0}), 4), 30.0),
    ]
    return _run("energy_per_step", fn, cases, "use measurement.total_energy over the step count")


def zeus_cost(fn: Callable[[float, float, float, float], float]) -> bool:
    """fn(energy J, time s, eta, max_power W) -> eta*E + (1-eta)*MaxPower*T."""
    cases = [
        (args, _zeus_cost(*args))
        for args in (
            (1000.0, 10.0, 0.5, 300.0),
            (1000.0, 10.0, 1.0, 300.0),
            (50.0, 2.0, 0.0, 250.0),
        )
    ]
    return _run("zeus_cost", fn, cases, "eta weighs energy, (1 - eta) weighs max_power x time")


def _pareto(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    front: list[tuple[float, float]] = []
    for t, e in sorted(points, key=lambda p: (p[0], p[1])):
        if not front or e < front[-1][1]:
            front.append((t, e))
    return front


def pareto_front(fn: Callable[[list[tuple[float, float]]], list[tuple[float, float]]]) -> bool:
    """fn(list of (time, energy)) -> the non-dominated points sorted by time."""
    sets = [
        [(1.0, 10.0), (2.0, 5.0), (3.0, 6.0), (4.0, 1.0)],
        [(5.0, 5.0)],
        [(2.0, 3.0), (1.0, 4.0), (1.0, 5.0), (3.0, 3.0)],
    ]
    cases = [((list(s),), _pareto(s)) for s in sets]
    return _run(
        "pareto_front",
        fn,
        cases,
        "keep a point unless another is no slower and uses less energy; sort by time",
    )


def should_stop_early(fn: Callable[[float, float | None, float], bool]) -> bool:
    """fn(cost so far, best cost so far or None, beta) -> whether to stop this recurrence."""
    cases = [
        ((250.0, 100.0, 2.0), True),
        ((150.0, 100.0, 2.0), False),
        ((200.0, 100.0, 2.0), False),
        ((1e9, 100.0, math.inf), False),
        ((500.0, None, 2.0), False),
    ]
    return _run(
        "should_stop_early",
        fn,
        cases,
        "stop once the cost passes beta x best cost; never with no best cost or with beta=inf",
    )


def aggregate_data_parallel(fn: Callable[[list[float], list[float]], tuple[float, float]]) -> bool:
    """fn(per-rank times, per-rank energies) -> (time, energy) of the whole job."""
    cases = [
        (([1.0, 1.5], [100.0, 120.0]), (1.5, 220.0)),
        (([2.0], [50.0]), (2.0, 50.0)),
    ]
    return _run(
        "aggregate_data_parallel",
        fn,
        cases,
        "ranks run in parallel: the job takes the slowest rank's time and all ranks' energy",
    )


def _iteration_energy(
    busy_energy: Sequence[float],
    busy_time: Sequence[float],
    iteration_time: float,
    blocking_power: Sequence[float],
) -> float:
    return sum(
        e + p * (iteration_time - t)
        for e, t, p in zip(busy_energy, busy_time, blocking_power, strict=True)
    )


def iteration_energy(
    fn: Callable[[list[float], list[float], float, list[float]], float],
) -> bool:
    """fn(per-stage busy energy J, busy time s, iteration time s, blocking power W) -> J."""
    sets = [
        ([10.0, 12.0], [1.0, 1.5], 2.0, [50.0, 60.0]),
        ([5.0], [2.0], 2.0, [40.0]),
        ([1.0, 1.0, 1.0], [0.5, 0.2, 0.1], 1.0, [10.0, 20.0, 30.0]),
    ]
    cases = [
        ((list(b), list(t), it, list(p)), _iteration_energy(b, t, it, p)) for b, t, it, p in sets
    ]
    return _run(
        "iteration_energy",
        fn,
        cases,
        "every GPU draws power the whole iteration: its instructions' energy plus its blocking "
        "power while it waits (iteration time minus its busy time)",
    )
