"""The time–cost tradeoff of a DAG of activities, by Phillips and Dessouky's successive min cuts.

Every activity runs for a whole number of quanta between its shortest and longest duration, at a
convex cost. Starting with every activity at its longest duration, each step shortens the DAG's
longest path by one quantum at the least extra cost: on the *critical* activities and precedences
(those on a longest path, in activity-on-arc form), a minimum cut whose forward activities are
shortened (each at the cost of one quantum faster) and whose backward activities are lengthened
(each saving the cost of one quantum slower) (Phillips and Dessouky, "Solving the project
time/cost tradeoff problem using the minimal cut concept", Management Science 24(4), 1977). The
cut is found on flow bounds: lower bound the saving of slowing down, upper bound the cost of
speeding up. The steps stop when the cut would shorten something that cannot be shortened, when no
flow meets the bounds, or when a step saves nothing.

This follows ``lowtime``'s ``PhillipsDessouky`` step for step (its capacities, rounded down to
``1e-6`` J, or coarser where their sum would not fit scipy's 32-bit capacities; the same unbounded
arcs, stopping rules and residual threshold), so both produce the same sequence of plans up to
ties between equally cheap cuts; longest paths, max flows and the reachability search run in
scipy's compiled graph routines on arrays instead of Python graphs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from zeus_nb.optimizer.pipeline_frequency.activity_graph import ActivityGraph
from zeus_nb.optimizer.pipeline_frequency.min_cut import (
    FINITE_TOTAL_LIMIT,
    INFINITE,
    BoundedCutNetwork,
)

logger = logging.getLogger(__name__)

FP_ERROR = 1e-6  # lowtime's capacity resolution and tolerance (J)


@dataclass(frozen=True)
class Activity:
    """Shortest and longest duration (quanta) and the cost model over durations."""

    shortest: int
    longest: int
    cost: Callable[[int], float]


def _free(duration: int) -> float:
    return 0.0


_DUMMY = Activity(0, 0, _free)


@dataclass
class _Tables:
    """Per activity and duration: flow bounds (integer units) and one-quantum cost changes."""

    base: np.ndarray  # activity x at duration d sits at base[x] + d
    shortest: np.ndarray
    longest: np.ndarray
    lower: np.ndarray
    upper: np.ndarray  # INFINITE: unbounded
    faster: np.ndarray  # cost(d - 1) - cost(d), in J
    slower: np.ndarray  # cost(d) - cost(d + 1), in J
    resolution: float


def _activity_rows(act: Activity) -> tuple[list[float], list[float], list[float], list[float]]:
    """lowtime's lower and upper flow bound (J) at each duration, and the two cost changes."""
    lo, hi = act.shortest, act.longest
    cost = {d: act.cost(d) for d in range(lo, hi + 1)}
    lowers, uppers, faster, slower = [], [], [], []
    for d in range(lo, hi + 1):
        up = abs(cost[d - 1] - cost[d]) if d > lo else 0.0
        down = abs(cost[d] - cost[d + 1]) if d < hi else 0.0
        if lo == hi:
            lb, ub = 0.0, np.inf
        elif d == lo:
            lb, ub = down, np.inf
        elif d == hi:
            lb, ub = 0.0, up
        else:  # room for an almost linear cost
            lb, ub = down, up + FP_ERROR
        lowers.append(lb)
        uppers.append(ub)
        faster.append(up)
        slower.append(down)
    return lowers, uppers, faster, slower


def _tables(activities: Sequence[Activity | None]) -> _Tables:
    """``None`` stands for a zero-length dummy (the source and sink) that never changes."""
    base, lo_all, hi_all, lowers, uppers, faster, slower = [], [], [], [], [], [], []
    offset = 0
    memo: dict[int, tuple] = {}  # activities of one kind share their model
    for act in activities:
        act = act or _DUMMY
        rows = memo.get(id(act)) or memo.setdefault(id(act), _activity_rows(act))
        base.append(offset - act.shortest)
        lo_all.append(act.shortest)
        hi_all.append(act.longest)
        for acc, row in zip((lowers, uppers, faster, slower), rows, strict=True):
            acc.extend(row)
        offset += act.longest - act.shortest + 1
    lower, upper = np.array(lowers), np.array(uppers)
    # the finite capacities of any cut sum to at most the largest per activity, summed
    finite = np.where(np.isfinite(upper), upper, 0.0)
    per_activity = [
        finite[b + lo : b + hi + 1].max() for b, lo, hi in zip(base, lo_all, hi_all, strict=True)
    ]
    resolution = max(FP_ERROR, 2 * float(np.sum(per_activity)) / FINITE_TOTAL_LIMIT)
    lower_units = np.floor_divide(lower, resolution).astype(np.int64)
    upper_units = np.where(
        np.isfinite(upper), np.floor_divide(finite, resolution), INFINITE
    ).astype(np.int64)
    return _Tables(
        np.array(base, np.int64),
        np.array(lo_all, np.int64),
        np.array(hi_all, np.int64),
        lower_units,
        upper_units,
        np.array(faster),
        np.array(slower),
        resolution,
    )


def _step(
    graph: ActivityGraph, net: BoundedCutNetwork, tab: _Tables, dummy: np.ndarray, d: np.ndarray
) -> str | None:
    """Shorten the longest path by one quantum in place; the reason to stop instead, if any."""
    crit_act, crit_arc, _ = graph.critical(d)
    at = tab.base + d
    crit = np.concatenate([crit_act, crit_arc])
    size, arcs = graph.size, len(crit_arc)
    # precedences: [0, unbounded]; off the longest paths: [0, 0], no arc
    lower = np.concatenate([tab.lower[at], np.zeros(arcs, np.int64)]) * crit
    upper = np.concatenate([tab.upper[at], np.full(arcs, INFINITE)]) * crit
    unit = int(FP_ERROR // tab.resolution)  # lowtime's tolerance, in capacity units
    cut = net.min_cut(lower, upper, threshold=unit, tolerance=unit)
    if cut.source_side is None:
        return cut.reason
    tail_in, head_in = cut.source_side[net.frm], cut.source_side[net.to]
    forward = crit & tail_in & ~head_in
    backward = crit & head_in & ~tail_in
    act_fwd, arc_fwd = forward[:size], forward[size:]
    slow = backward[:size] & ~dummy
    if not act_fwd.any() and not arc_fwd.any():
        return "the cut shortens nothing"
    if arc_fwd.any() or (act_fwd & (dummy | (d <= tab.shortest))).any():
        return "the cut shortens something that cannot be shortened"
    if (d[slow] >= tab.longest[slow]).any():
        return "the cut lengthens something that cannot be lengthened"
    change = tab.faster[at[act_fwd]].sum() - tab.slower[at[slow]].sum()
    if abs(change) < FP_ERROR:
        return "a step saves nothing"
    d[act_fwd] -= 1
    d[slow] += 1
    return None


def tradeoff_durations(
    predecessors: Sequence[Sequence[int]], activities: Sequence[Activity]
) -> list[np.ndarray]:
    """Durations of every activity, from all longest to the fastest the steps reach.

    ``predecessors[v]`` lists the activities that must finish before ``v`` starts, all earlier in
    the order. Entry ``k`` of the result is the plan after ``k`` steps.
    """
    graph = ActivityGraph.from_predecessors(predecessors)
    tab = _tables([None, *activities, None])
    frm, to = graph.arc_nodes()
    net = BoundedCutNetwork(2 * graph.size, frm, to, source=0, sink=2 * graph.size - 1)
    dummy = np.zeros(graph.size, bool)
    dummy[[0, -1]] = True
    d = tab.longest.copy()
    t_min, t_max = (int(graph.longest_paths(x)[2]) for x in (tab.shortest, d))
    logger.info("time-cost tradeoff: %d to %d quanta", t_max, t_min)
    plans = [d[1:-1].copy()]
    limit = 2 * (t_max - t_min) + 100  # each step shortens by one quantum: a guard, not a rule
    while (reason := _step(graph, net, tab, dummy, d)) is None:
        plans.append(d[1:-1].copy())
        if len(plans) > limit:
            reason = f"{limit} steps"
            break
    logger.info("time-cost tradeoff stops after %d steps: %s", len(plans) - 1, reason)
    return plans
