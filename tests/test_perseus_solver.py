"""The native time–energy frontier solver: its graph routines, its optimality on small DAGs, and
the same frontier as lowtime's on synthetic and random profiles."""

import itertools
import json
import math
from dataclasses import replace

import numpy as np
import pytest

from zeus_nb.cli import main
from zeus_nb.errors import ZeusNbError
from zeus_nb.optimizer.pipeline_frequency import (
    FrequencyPlan,
    InstructionProfile,
    Measurement,
    default_unit_time,
    evaluate,
    frontier_gap,
    solve_frontier,
    synthetic_profile,
)
from zeus_nb.optimizer.pipeline_frequency.activity_graph import ActivityGraph
from zeus_nb.optimizer.pipeline_frequency.cost_model import (
    CandidateOptions,
    instruction_models,
    quantized_options,
)
from zeus_nb.optimizer.pipeline_frequency.min_cut import INFINITE, BoundedCutNetwork
from zeus_nb.optimizer.pipeline_frequency.plan_table import PlanTable
from zeus_nb.optimizer.pipeline_frequency.tradeoff import Activity, tradeoff_durations

TOLERANCE = 0.005  # the frontiers agree within 0.5 % of energy at every iteration time


def random_profile(rng: np.random.Generator, stages: int, clocks: int) -> InstructionProfile:
    """Times grow and power falls as the clock drops, by random amounts with a little noise, so
    some options are not Pareto optimal and stages differ in size."""
    measurements = {}
    for s in range(stages):
        scale = rng.uniform(0.5, 2.0)
        for inst, base in (("forward", 0.01), ("backward", 0.02)):
            freqs = sorted(rng.choice(np.arange(600, 1800, 15), clocks, replace=False))[::-1]
            t = base * scale * np.cumprod(1 + rng.uniform(0.005, 0.06, clocks))
            p = rng.uniform(150, 300) * np.cumprod(1 - rng.uniform(0.0, 0.05, clocks))
            e = t * p * (1 + rng.normal(0, 0.01, clocks))
            measurements[(s, inst)] = [
                Measurement(int(f), float(a), float(b)) for f, a, b in zip(freqs, t, e, strict=True)
            ]
    power = {s: float(rng.uniform(30, 90)) for s in range(stages)}
    return InstructionProfile(measurements, power)


def _assert_same_frontier(profile, stages, mbs):
    native = solve_frontier(profile, stages, mbs)
    reference = solve_frontier(profile, stages, mbs, solver="lowtime")
    unit = native.unit_time
    assert abs(native.fastest().iteration_time - reference.fastest().iteration_time) <= unit
    assert abs(native.points[-1].iteration_time - reference.points[-1].iteration_time) <= unit
    assert frontier_gap(native, reference) <= TOLERANCE
    assert frontier_gap(reference, native) <= TOLERANCE
    return native, reference


@pytest.mark.parametrize(
    "gpu,weights,mbs",
    [
        ("v100", [1.0, 1.5], 3),
        ("v100", [1.0, 1.4, 0.8], 5),
        ("v100", [1.0, 1.0, 1.0, 1.0], 4),
        ("a40", [1.0, 1.2, 0.9, 1.1], 6),
        ("v100", [0.7, 1.3, 1.0, 1.6], 6),
    ],
)
def test_same_frontier_as_lowtime_on_synthetic_profiles(gpu, weights, mbs):
    stages = len(weights)
    native, reference = _assert_same_frontier(synthetic_profile(gpu, stages, weights), stages, mbs)
    assert len(native.points) >= (2 if gpu == "v100" else 1)  # A40: waiting costs too much
    assert native.cost_models.keys() == reference.cost_models.keys()


@pytest.mark.parametrize("seed", range(8))
def test_same_frontier_as_lowtime_on_random_profiles(seed):
    rng = np.random.default_rng(seed)
    stages = int(rng.integers(2, 5))
    mbs = int(rng.integers(stages, 2 * stages + 2))
    _assert_same_frontier(random_profile(rng, stages, int(rng.integers(3, 12))), stages, mbs)


def test_frontier_gap_measures_the_energy_difference():
    frontier = solve_frontier(synthetic_profile("v100", 2, [1, 1.5]), 2, 3)
    assert frontier_gap(frontier, frontier) == 0
    worse = replace(frontier, points=[replace(p, energy=p.energy * 1.01) for p in frontier.points])
    assert frontier_gap(worse, frontier) == pytest.approx(0.01)
    assert frontier_gap(frontier, worse) == pytest.approx(0.01 / 1.01)


def test_unknown_solver_is_refused():
    profile = synthetic_profile("v100", 2, [1, 1.5])
    with pytest.raises(ZeusNbError, match="solver 'fast' is not one of native, lowtime"):
        solve_frontier(profile, 2, 3, solver="fast")
    with pytest.raises(ValueError):
        solve_frontier(profile, 2, 3, solver="fast")


def test_cli_solver_flag_gives_the_same_frontier(tmp_path, capsys):
    path = synthetic_profile("v100", 2, [1, 1.5]).to_csv(tmp_path / "prof.csv")
    frontiers = {}
    for solver in ("native", "lowtime"):
        argv = ["perseus", "plan", str(path), "--stages", "2", "--microbatches", "3"]
        assert main([*argv, "--solver", solver, "--json"]) == 0
        frontiers[solver] = json.loads(capsys.readouterr().out)
    for a, b in zip(frontiers["native"], frontiers["lowtime"], strict=True):
        assert a["iteration_time"] == pytest.approx(b["iteration_time"])
        assert a["energy"] == pytest.approx(b["energy"], rel=TOLERANCE)
    with pytest.raises(SystemExit):
        main(
            ["perseus", "plan", str(path), "--stages", "2", "--microbatches", "3", "--solver", "x"]
        )


def test_plan_table_evaluates_like_evaluate_bit_for_bit():
    rng = np.random.default_rng(1)
    profile = random_profile(rng, 3, 6)
    table = PlanTable(3, 5)
    plans = [
        FrequencyPlan.from_choice(
            3, 5, lambda op: rng.choice([m.frequency for m in profile.options(op[0], op[1])])
        )
        for _ in range(20)
    ]
    times, energies = table.evaluate(profile, np.array([table.row(p) for p in plans]))
    for plan, t, e in zip(plans, times, energies, strict=True):
        tl = evaluate(plan, profile)
        assert (float(t), float(e)) == (tl.iteration_time, tl.energy)
        assert table.plan(table.row(plan)) == plan
    with pytest.raises(KeyError, match="not profiled at 1 MHz"):
        table.evaluate(profile, np.ones((1, len(table.ops)), int))


def test_options_round_up_to_the_quantum_and_the_slowest_fitting_clock_is_chosen():
    profile = synthetic_profile("v100", 2, [1, 1.5])
    unit = default_unit_time(profile)
    for (s, inst), (cands, _) in instruction_models(profile, unit).items():
        for o in quantized_options(profile, s, inst, unit):
            time = profile.at(s, inst, o.knob).time
            assert o.quant_time == math.ceil(time / unit - 1e-9) >= time / unit - 1e-9
        times = [o.quant_time for o in cands.options]
        assert times == sorted(times, reverse=True) and len(set(times)) == len(times)
        for q in range(cands.min_quant_time, cands.max_quant_time + 1):
            chosen = profile.at(s, inst, cands.knob_for(q)).time
            assert chosen <= (q + 1e-9) * unit  # never longer than the solver assumed
            slower = [o for o in cands.options if o.quant_time <= q]
            assert cands.knob_for(q) == slower[0].knob  # the slowest that fits


def test_candidate_options_keep_pareto_optimal_ones():
    opts = [
        *quantized_options(synthetic_profile("v100", 1), 0, "forward", 1e-3),
    ]
    dominated = replace(opts[0], real_time=opts[-1].real_time + 1e-3, cost=opts[0].cost + 1)
    kept = CandidateOptions.select([*opts, dominated]).options
    assert dominated not in kept
    assert all(not (p.real_time < o.real_time and p.cost < o.cost) for o in kept for p in kept)


def _random_dag(rng, n):
    return [
        sorted(rng.choice(v, size=min(v, int(rng.integers(0, 3))), replace=False).tolist())
        if v
        else []
        for v in range(n)
    ]


def test_longest_paths_match_a_plain_recurrence():
    rng = np.random.default_rng(2)
    for _ in range(20):
        n = int(rng.integers(1, 30))
        preds = _random_dag(rng, n)
        lengths = np.concatenate([[0], rng.integers(0, 9, n), [0]])
        start, tail, total = ActivityGraph.from_predecessors(preds).longest_paths(lengths)
        es = [0] * n
        for v in range(n):
            es[v] = max((es[u] + lengths[u + 1] for u in preds[v]), default=0)
        lt = [0] * n
        for u in reversed(range(n)):
            succ = [lt[v] for v in range(n) if u in preds[v]]
            lt[u] = lengths[u + 1] + max(succ, default=0)
        assert list(start[1:-1]) == es and list(tail[1:-1]) == lt
        assert total == max(e + lengths[v + 1] for v, e in enumerate(es))


def _brute_force_cut(n, frm, to, lower, upper, source, sink):
    best = None
    others = [v for v in range(n) if v not in (source, sink)]
    for bits in itertools.product([False, True], repeat=len(others)):
        side = np.zeros(n, bool)
        side[source] = True
        side[others] = bits
        fwd, bwd = side[frm] & ~side[to], ~side[frm] & side[to]
        value = upper[fwd].sum() - lower[bwd].sum()
        if best is None or value < best[0] or (value == best[0] and side.sum() < best[1].sum()):
            best = (value, side)
    return best


def _circulation_exists(n, frm, to, lower, upper, source, sink):
    """Hoffman: with an unbounded arc sink -> source, some flow meets all bounds iff no node set
    must take in more (lower bounds) than it can send out (upper bounds)."""
    frm, to = np.append(frm, sink), np.append(to, source)
    lower, upper = np.append(lower, 0), np.append(upper, INFINITE)
    for bits in itertools.product([False, True], repeat=n):
        inside = np.array(bits)
        if lower[~inside[frm] & inside[to]].sum() > upper[inside[frm] & ~inside[to]].sum():
            return False
    return True


def test_min_cut_is_the_smallest_minimum_cut_under_lower_bounds():
    rng = np.random.default_rng(3)
    outcomes = set()
    for _ in range(80):
        n = int(rng.integers(4, 8))
        pairs = [(0, 1)] + [
            (u, v) for u in range(1, n) for v in range(u + 1, n) if rng.random() < 0.5
        ]
        frm, to = (np.array(x) for x in zip(*pairs, strict=True))
        lower = rng.integers(0, 4, len(frm)) * (rng.random(len(frm)) < 0.5)
        upper = lower + rng.integers(0, 6, len(frm))
        upper[0] = INFINITE
        cut = BoundedCutNetwork(n, frm, to, 0, n - 1).min_cut(lower, upper)
        feasible = _circulation_exists(n, frm, to, lower, upper, 0, n - 1)
        assert (cut.source_side is not None) == feasible
        outcomes.add(feasible)
        if feasible:
            value, side = _brute_force_cut(n, frm, to, lower, upper, 0, n - 1)
            fwd = cut.source_side[frm] & ~cut.source_side[to]
            bwd = ~cut.source_side[frm] & cut.source_side[to]
            assert upper[fwd].sum() - lower[bwd].sum() == value
            assert (cut.source_side == side).all()
    assert outcomes == {True, False}


def test_min_cut_reports_bounds_no_flow_meets():
    # source -> a -> b -> sink: at least 5 must enter b, at most 4 may leave it
    frm, to = np.array([0, 1, 2]), np.array([1, 2, 3])
    net = BoundedCutNetwork(4, frm, to, 0, 3)
    lower, upper = np.array([0, 5, 0]), np.array([INFINITE, INFINITE, 4])
    cut = net.min_cut(lower, upper)
    assert cut.source_side is None and "lower bounds" in cut.reason
    # short by one unit: within a tolerance of one (lowtime's resolution), the cut is b -> sink
    cut = net.min_cut(lower, upper, tolerance=1)
    assert cut.source_side.tolist() == [True, True, True, False]
    assert net.min_cut(lower, upper - 1, tolerance=1).source_side is None


def test_each_step_is_optimal_on_small_dags():
    """Against all duration combinations: every step is the cheapest plan at its length, each
    step shortens the longest path by one quantum, and the last one reaches the shortest."""
    rng = np.random.default_rng(4)
    for _ in range(40):
        n = int(rng.integers(2, 6))
        preds = _random_dag(rng, n)
        acts = []
        for _v in range(n):
            lo = int(rng.integers(1, 5))
            a, b, c = rng.uniform(0.5, 5), -rng.uniform(0.1, 0.8), rng.uniform(0, 2)
            acts.append(
                Activity(
                    lo,
                    lo + int(rng.integers(0, 4)),
                    lambda d, a=a, b=b, c=c: a * math.exp(b * d) + c,
                )
            )
        graph = ActivityGraph.from_predecessors(preds)

        def length(ds, graph=graph):
            return graph.longest_paths(np.concatenate([[0], ds, [0]]))[2]

        cheapest: dict[int, float] = {}
        for ds in itertools.product(*[range(x.shortest, x.longest + 1) for x in acts]):
            t = length(np.array(ds))
            cheapest[t] = min(
                cheapest.get(t, math.inf), sum(x.cost(d) for x, d in zip(acts, ds, strict=True))
            )
        plans = tradeoff_durations(preds, acts)
        for k, ds in enumerate(plans):
            t = length(ds)
            best = min(c for length_, c in cheapest.items() if length_ <= t)
            assert sum(x.cost(int(d)) for x, d in zip(acts, ds, strict=True)) <= best + 1e-6
            if k:
                assert t == length(plans[k - 1]) - 1
        assert length(plans[-1]) == min(cheapest)
