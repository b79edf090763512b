"""Exercise checks: short feedback, no leaked answers, constants fail, strict vs lenient."""

from __future__ import annotations

import math
import re

import pytest

from zeus_nb import check
from zeus_nb.monitor import Measurement


def _front(points):
    out = []
    for t, e in sorted(points):
        if not out or e < out[-1][1]:
            out.append((t, e))
    return out


def _least_cost(configs, eta):
    top = max(p for _, p, _, _ in configs)
    costs = [eta * e + (1 - eta) * top * t for _, _, t, e in configs]
    b, p, _, _ = configs[costs.index(min(costs))]
    return b, p


def _slowdown(profile, factor):
    by_limit = sorted(profile, key=lambda m: m.power_limit)
    budget = factor * by_limit[-1].time
    return next(m.power_limit for m in by_limit if m.time <= budget)


# Right, partly right (a typical mistake that gets some cases) and constant answers per exercise.
RIGHT = {
    "average_power": lambda m: m.total_energy / m.time if m.time else 0.0,
    "energy_per_step": lambda m, n: m.total_energy / n,
    "zeus_cost": lambda e, t, eta, p: eta * e + (1 - eta) * p * t,
    "energy_optimal_limit": lambda profile: float(profile.energy_j.idxmin()),
    "pareto_front": _front,
    "should_stop_early": lambda c, best, beta: best is not None and c > beta * best,
    "aggregate_data_parallel": lambda ts, es: (max(ts), sum(es)),
    "iteration_energy": lambda es, ts, it, ps: sum(
        e + p * (it - t) for e, t, p in zip(es, ts, ps, strict=True)
    ),
    "least_cost_config": _least_cost,
    "thompson_pick": lambda post, z: sorted(
        (m + s * x, b) for (b, (m, s)), x in zip(post.items(), z, strict=True)
    )[0][1],
    "slowdown_limit": _slowdown,
    "plan_within": lambda pts, d: sorted((e, i) for i, (t, e) in enumerate(pts) if t <= d)[0][1],
}
PARTLY = {
    # only GPU 0's energy: right for one GPU, wrong for two
    "average_power": lambda m: m.gpu_energy[0] / m.time if m.time else 0.0,
    "energy_per_step": lambda m, n: m.gpu_energy[0] / n,
    # ignores eta: right only where eta weighs nothing in particular... (eta=1 case)
    "zeus_cost": lambda e, t, eta, p: e,
    # the lowest limit: right only where energy keeps falling
    "energy_optimal_limit": lambda profile: float(profile.index.min()),
    # forgets ties: sorted but keeps equal-time points
    "pareto_front": lambda pts: sorted(pts)[:1],
    # stops at equality too
    "should_stop_early": lambda c, best, beta: best is not None and c >= beta * best,
    # adds times up
    "aggregate_data_parallel": lambda ts, es: (sum(ts), sum(es)),
    # forgets the blocking power while a stage waits
    "iteration_energy": lambda es, ts, it, ps: sum(es),
    # weighs time by each configuration's own limit instead of the table's highest one
    "least_cost_config": lambda cs, eta: min(
        cs, key=lambda c: eta * c[3] + (1 - eta) * c[1] * c[2]
    )[:2],
    # the cheapest mean: ignores the draw
    "thompson_pick": lambda post, z: min(post, key=lambda b: post[b][0]),
    # takes the first measurement as the reference, as if the list were sorted
    "slowdown_limit": lambda prof, f: min(
        m.power_limit for m in prof if m.time <= f * prof[0].time
    ),
    # the slowest plan that fits: right on a frontier only
    "plan_within": lambda pts, d: max((t, i) for i, (t, e) in enumerate(pts) if t <= d)[1],
}
CONSTANT = {
    "average_power": lambda m: 38.2,
    "energy_per_step": lambda m, n: 10.0,
    "zeus_cost": lambda e, t, eta, p: 1650.0,
    "energy_optimal_limit": lambda profile: 200.0,
    "pareto_front": lambda pts: [(1.0, 10.0), (2.0, 5.0), (4.0, 1.0)],
    "should_stop_early": lambda c, best, beta: True,
    "aggregate_data_parallel": lambda ts, es: (1.5, 220.0),
    "iteration_energy": lambda es, ts, it, ps: 72.0,
    "least_cost_config": lambda cs, eta: (64, 250.0),
    "thompson_pick": lambda post, z: 256,
    "slowdown_limit": lambda prof, f: 250.0,
    "plan_within": lambda pts, d: 1,
}


@pytest.fixture(autouse=True)
def _lenient(monkeypatch):
    monkeypatch.setenv("ZEUS_NB_CHECKS", "lenient")
    check.use_seed(0)


def _expected_values(name: str) -> set[str]:
    """Every expected answer of every case, written as a student would see a number."""
    reference, make_cases = check.EXERCISES[name]
    shown = set()
    for case in make_cases():
        value = reference(*case.args)
        for v in value if isinstance(value, (tuple, list)) else [value]:
            for x in v if isinstance(v, tuple) else [v]:
                if isinstance(x, float) and not math.isinf(x) and x not in (0.0, 1.0):
                    shown |= {repr(x), f"{x:.1f}", f"{x:.2f}"}
    return {v for v in shown if len(v) >= 3}


@pytest.mark.parametrize("name", sorted(check.EXERCISES))
def test_right_answer_passes_and_is_kept(name, capsys):
    fn = RIGHT[name]
    assert getattr(check, name)(fn) is fn
    out = capsys.readouterr().out
    assert out.startswith(check.PASSED_MARK) and "cases right" in out


@pytest.mark.parametrize("name", sorted(check.EXERCISES))
@pytest.mark.parametrize("answers", [PARTLY, CONSTANT], ids=["partly", "constant"])
def test_wrong_answers_get_short_feedback_without_expected_values(name, answers, capsys):
    reference = check.EXERCISES[name][0]
    got = getattr(check, name)(answers[name])
    assert got is reference  # the notebook goes on with the reference answer
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "Traceback" not in out
    assert out.startswith(check.FAILED_MARK)
    m = re.search(r"(\d+) of (\d+) cases right", out)
    assert m, out
    outcome = check.judge(name, answers[name])
    assert (int(m[1]), int(m[2])) == (outcome.right, outcome.total)
    assert outcome.right < outcome.total and "Hint:" in out
    for value in _expected_values(name):
        shown = re.search(rf"(?<![\d.]){re.escape(value)}(?!\d)", out)
        assert not shown, f"{name} feedback shows an expected value {value}: {out}"


@pytest.mark.parametrize("name", sorted(check.EXERCISES))
def test_constants_never_pass_for_any_seed(name):
    for seed in range(5):
        check.use_seed(seed)
        assert not check.judge(name, CONSTANT[name]).passed


def test_partial_progress_is_counted():
    outcome = check.judge("average_power", PARTLY["average_power"])
    assert 0 < outcome.right < outcome.total
    assert "two GPUs" in outcome.message and "every GPU" in outcome.message


def test_random_cases_follow_the_seed():
    check.use_seed(1)
    a = [c.args for c in check.EXERCISES["zeus_cost"][1]()]
    check.use_seed(2)
    b = [c.args for c in check.EXERCISES["zeus_cost"][1]()]
    check.use_seed(1)
    assert a != b and a == [c.args for c in check.EXERCISES["zeus_cost"][1]()]


def test_student_stub_reads_as_not_done(capsys):
    def stub(*_):
        raise NotImplementedError("your turn")

    assert check.pareto_front(stub) is check.EXERCISES["pareto_front"][0]
    out = capsys.readouterr().out
    assert out.startswith(check.NOT_DONE_MARK) and check.NOT_DONE in out


def test_stub_is_not_an_error_even_when_strict(monkeypatch, capsys):
    monkeypatch.setenv("ZEUS_NB_CHECKS", "strict")

    def stub(*_):
        raise NotImplementedError

    check.average_power(stub)
    assert check.NOT_DONE in capsys.readouterr().out


def test_strict_mode_raises_on_a_wrong_answer(monkeypatch):
    monkeypatch.setenv("ZEUS_NB_CHECKS", "strict")
    with pytest.raises(check.CheckError, match=r"of \d+ cases right") as info:
        check.zeus_cost(CONSTANT["zeus_cost"])
    assert "1650" not in str(info.value) or "1650.0" not in _expected_values("zeus_cost")


def test_crash_is_named_with_a_hint_not_a_traceback(capsys):
    check.average_power(lambda m: m.total_energy / m.time)  # ZeroDivisionError on 0 s
    out = capsys.readouterr().out
    assert "raised ZeroDivisionError" in out and "Hint:" in out and "Traceback" not in out


def test_not_a_function_is_explained(capsys):
    check.energy_per_step(Measurement(1.0, {0: 1.0}))
    assert "expected a function" in capsys.readouterr().out


def test_thompson_pick_follows_the_draws_not_the_means():
    # the same posterior with the draws swapped picks the other arm
    post = {64: (10.0, 1.0), 128: (10.5, 1.0)}
    assert check.EXERCISES["thompson_pick"][0](post, [2.0, -2.0]) == 128
    assert check.EXERCISES["thompson_pick"][0](post, [-2.0, 2.0]) == 64


def test_deeper_cases_follow_the_seed():
    for name in ("least_cost_config", "thompson_pick", "slowdown_limit", "plan_within"):
        check.use_seed(3)
        a = repr([c.args for c in check.EXERCISES[name][1]()])
        check.use_seed(4)
        assert a != repr([c.args for c in check.EXERCISES[name][1]()]), name
