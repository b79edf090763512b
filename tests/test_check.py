"""Exercise checks: short feedback, no leaked answers, constants fail, strict vs lenient."""

from __future__ import annotations

import math
import re

import pytest

from zeus_nb.course import check
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
    "should_stop_early": lambda c, best, beta: False,
    "aggregate_data_parallel": lambda ts, es: (1.5, 220.0),
    "iteration_energy": lambda es, ts, it, ps: 72.0,
    "least_cost_config": lambda cs, eta: (64, 250.0),
    "thompson_pick": lambda post, z: 256,
    "slowdown_limit": lambda prof, f: 250.0,
    "plan_within": lambda pts, d: 1,
}


def _lowest_within(prof, f, strict=False):
    top = max(prof, key=lambda m: m.power_limit).time
    return min(m.power_limit for m in prof if (m.time < f * top if strict else m.time <= f * top))


def _front_keeping_equal_energy(pts):
    out = []
    for t, e in sorted(pts):
        if not out or e <= out[-1][1]:
            out.append((t, e))
    return out


def _front_by_time_only(pts):
    out = []
    for t, e in sorted(pts, key=lambda p: p[0]):
        if not out or e < out[-1][1]:
            out.append((t, e))
    return out


def _draws(post, z):
    return [m + s * x for (m, s), x in zip(post.values(), z, strict=True)]


# Mistakes students make, written as they would write them -> words the hint must contain.
KNOWN_MISTAKES = {
    "average_power": [
        (lambda m: m.gpu_energy[0] / m.time if m.time else 0.0, "every GPU"),
        (lambda m: m.time / m.total_energy if m.total_energy else 0.0, "not time divided by"),
        (lambda m: m.total_energy, "divide it by the time"),
        (
            lambda m: m.total_energy / m.time / len(m.gpu_energy) if m.time else 0.0,
            "number of GPUs",
        ),
    ],
    "energy_per_step": [
        (lambda m, n: m.gpu_energy[0] / n, "every GPU"),
        (lambda m, n: m.total_energy / m.time, "energy per second"),
        (lambda m, n: n / m.total_energy, "not steps divided by energy"),
        (lambda m, n: m.total_energy, "divide it by the number of steps"),
    ],
    "zeus_cost": [
        (lambda e, t, eta, p: (1 - eta) * e + eta * p * t, "not the other way round"),
        (lambda e, t, eta, p: eta * e + (1 - eta) * t, "multiply the time by max_power"),
        (lambda e, t, eta, p: e + p * t, "weigh the two terms"),
        (lambda e, t, eta, p: e, "also counts time"),
    ],
    "energy_optimal_limit": [
        (lambda df: float(df.index.max()), "highest limit is the fastest"),
        (lambda df: float(df.index.min()), "lowest limit is not always"),
        (lambda df: float(df.time_s.idxmin()), "least time"),
        (lambda df: float(df.energy_j.min()), "return its power limit"),
        (lambda df: int(df.energy_j.values.argmin()), "row's position"),
        (lambda df: float(df.energy_j.idxmax()), "idxmax"),
    ],
    "pareto_front": [
        (lambda pts: [p for p in pts if p in _front(pts)], "sort the front by time"),
        (lambda pts: sorted(pts), "drop every point that another point dominates"),
        (_front_keeping_equal_energy, "strictly lower"),
        (_front_by_time_only, "same time only the one with less energy"),
        (lambda pts: [min(pts, key=lambda p: p[1])], "not only the best one"),
        (lambda pts: sorted(_front(pts), key=lambda p: p[1]), "sort the front by time"),
    ],
    "should_stop_early": [
        (lambda c, b, beta: b is not None and c >= beta * b, "strictly more"),
        (lambda c, b, beta: b is not None and c > b, "not the best cost itself"),
        (lambda c, b, beta: b is not None and c < beta * b, "not less"),
        (lambda c, b, beta: c > beta * b, "raised TypeError: unsupported operand"),  # None
        (lambda c, b, beta: True, "same answer whatever the input"),
        (lambda c, b, beta: False, "same answer whatever the input"),
    ],
    "aggregate_data_parallel": [
        (lambda ts, es: (sum(ts), sum(es)), "not the sum"),
        (lambda ts, es: (sum(ts) / len(ts), sum(es)), "not the mean"),
        (lambda ts, es: (min(ts), sum(es)), "not min"),
        (lambda ts, es: (max(ts), max(es)), "not the largest"),
        (lambda ts, es: (max(ts), sum(es) / len(es)), "sum over ranks (not the mean)"),
        (lambda ts, es: (ts[0], es[0]), "combine every rank"),
        (lambda ts, es: (sum(es), max(ts)), "in that order"),
    ],
    "iteration_energy": [
        (lambda es, ts, it, ps: sum(es), "still draws its blocking power"),
        (
            lambda es, ts, it, ps: sum(e + p * it for e, p in zip(es, ps, strict=True)),
            "only while it waits",
        ),
        (
            lambda es, ts, it, ps: sum(e + p * t for e, t, p in zip(es, ts, ps, strict=True)),
            "not while it",
        ),
        (lambda es, ts, it, ps: es[0] + ps[0] * (it - ts[0]), "every stage"),
    ],
    "least_cost_config": [
        (PARTLY["least_cost_config"], "same for every configuration"),
        (lambda cs, eta: min(cs, key=lambda c: c[3])[:2], "only with eta = 1"),
        (lambda cs, eta: min(cs, key=lambda c: c[2])[:2], "only with eta = 0"),
        (
            lambda cs, eta: min(cs, key=lambda c: eta * c[3] + (1 - eta) * c[2])[:2],
            "multiply the time by MaxPower",
        ),
        (
            lambda cs, eta: min(cs, key=lambda c: _cost(c, 1 - eta, max(x[1] for x in cs)))[:2],
            "not the other way round",
        ),
        (
            lambda cs, eta: min(cs, key=lambda c: _cost(c, eta, max(x[1] for x in cs))),
            "not the whole row",
        ),
        (lambda cs, eta: cs[0][:2], "compare the cost of every one"),
    ],
    "thompson_pick": [
        (lambda post, z: min(post, key=lambda b: post[b][0]), "not the cheapest mean"),
        (
            lambda post, z: list(post)[max(range(len(z)), key=lambda i: _draws(post, z)[i])],
            "not the most expensive",
        ),
        (
            lambda post, z: list(post)[
                min(
                    range(len(z)),
                    key=lambda i: list(post.values())[i][0] - list(post.values())[i][1] * z[i],
                )
            ],
            "mean + std x z (plus)",
        ),
        (lambda post, z: min(_draws(post, z)), "not its drawn cost"),
        (lambda post, z: min(range(len(z)), key=lambda i: _draws(post, z)[i]), "not its position"),
        (lambda post, z: list(post)[z.index(min(z))], "z alone is not the cost"),
        (lambda post, z: next(iter(post)), "draw a cost for every one"),
        (lambda post, z: 128, "same answer whatever the input"),
    ],
    "slowdown_limit": [
        (lambda prof, f: min(prof, key=lambda m: m.energy).power_limit, "least energy is not"),
        (lambda prof, f: max(m.power_limit for m in prof), "always within the budget"),
        (lambda prof, f: min(m.power_limit for m in prof), "may be too slow"),
        (PARTLY["slowdown_limit"], "the list is not sorted"),
        (lambda prof, f: _lowest_within(prof, f, strict=True), "(<=, not <)"),
        (lambda prof, f: _lowest_within(prof, f) if False else None, "returned None"),
    ],
    "plan_within": [
        (lambda pts, d: min(range(len(pts)), key=lambda i: pts[i][1]), "at most the deadline"),
        (PARTLY["plan_within"], "compare the energies"),
        (
            lambda pts, d: sorted((e, i) for i, (t, e) in enumerate(pts) if t < d)[0][1],
            "(<=, not <)",
        ),
        (lambda pts, d: min(range(len(pts)), key=lambda i: pts[i][0]), "costs the most"),
        (
            lambda pts, d: sorted((e, k) for k, (t, e) in enumerate(p for p in pts if p[0] <= d))[
                0
            ][1],
            "not in a filtered list",
        ),
        (lambda pts, d: sorted((e, (t, e)) for t, e in pts if t <= d)[0][1], "not the plan itself"),
    ],
}


# Near misses: right except on the one detail their hint names (a second GPU, a boundary, ties,
# the order of the result, eta at 0 or 1), so they may be right on more than one case. Every
# other known mistake is right on at most one.
NEAR_MISSES = {
    "average_power": {"every GPU", "number of GPUs"},
    "energy_per_step": {"every GPU"},
    "least_cost_config": {"multiply the time by MaxPower"},
    "pareto_front": {"sort the front by time", "strictly lower", "same time only"},
    "plan_within": {"(<=, not <)"},
    "should_stop_early": {"strictly more", "raised TypeError"},
    "slowdown_limit": {"(<=, not <)"},
}


def _cost(config, eta, top):
    return eta * config[3] + (1 - eta) * top * config[2]


# Shortcuts that must never be right on more than one case, whatever the seed.
def _first(xs):
    return xs[0]


SHORTCUTS = {
    "average_power": [lambda m: m.time, lambda m: m.total_energy, lambda m: 0.0],
    "energy_per_step": [lambda m, n: m.total_energy, lambda m, n: m.total_energy / m.time],
    "zeus_cost": [
        lambda e, t, eta, p: e,
        lambda e, t, eta, p: p * t,
        lambda e, t, eta, p: e + t,
        lambda e, t, eta, p: eta * e,
    ],
    "energy_optimal_limit": [
        lambda df: float(df.index.max()),
        lambda df: float(df.index.min()),
        lambda df: float(df.index[0]),
        lambda df: float(df.index[-1]),
        lambda df: float(df.time_s.idxmin()),
        lambda df: float(df.time_s.idxmax()),
    ],
    "pareto_front": [
        lambda pts: pts,
        lambda pts: sorted(pts),
        lambda pts: [pts[0]],
        lambda pts: [pts[-1]],
        lambda pts: [min(pts)],
        lambda pts: [],
    ],
    "should_stop_early": [lambda c, b, beta: True, lambda c, b, beta: False],
    "aggregate_data_parallel": [
        lambda ts, es: (ts[0], es[0]),
        lambda ts, es: (ts[-1], es[-1]),
        lambda ts, es: (max(ts), max(es)),
        lambda ts, es: (sum(ts), sum(es)),
        lambda ts, es: (min(ts), min(es)),
    ],
    "iteration_energy": [
        lambda es, ts, it, ps: sum(es),
        lambda es, ts, it, ps: es[0],
        lambda es, ts, it, ps: sum(ps) * it,
    ],
    "least_cost_config": [
        lambda cs, eta: cs[0][:2],
        lambda cs, eta: cs[-1][:2],
        lambda cs, eta: min(cs, key=lambda c: c[3])[:2],
        lambda cs, eta: min(cs, key=lambda c: c[2])[:2],
        lambda cs, eta: max(cs, key=lambda c: c[1])[:2],
        lambda cs, eta: min(cs, key=lambda c: c[1])[:2],
        lambda cs, eta: max(cs, key=lambda c: c[0])[:2],
        lambda cs, eta: min(cs, key=lambda c: c[0])[:2],
    ],
    "thompson_pick": [
        lambda post, z: next(iter(post)),
        lambda post, z: list(post)[-1],
        lambda post, z: min(post),
        lambda post, z: max(post),
        lambda post, z: min(post, key=lambda b: post[b][0]),
        lambda post, z: min(post, key=lambda b: post[b][1]),
        lambda post, z: list(post)[z.index(min(z))],
    ],
    "slowdown_limit": [
        lambda prof, f: prof[0].power_limit,
        lambda prof, f: prof[-1].power_limit,
        lambda prof, f: max(m.power_limit for m in prof),
        lambda prof, f: min(m.power_limit for m in prof),
        lambda prof, f: min(prof, key=lambda m: m.energy).power_limit,
        lambda prof, f: min(prof, key=lambda m: m.time).power_limit,
    ],
    "plan_within": [
        lambda pts, d: 0,
        lambda pts, d: len(pts) - 1,
        lambda pts, d: min(range(len(pts)), key=lambda i: pts[i][1]),
        lambda pts, d: min(range(len(pts)), key=lambda i: pts[i][0]),
        lambda pts, d: max(range(len(pts)), key=lambda i: pts[i][0]),
    ],
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


def test_every_exercise_has_its_tables():
    names = set(check.EXERCISES)
    assert set(KNOWN_MISTAKES) == set(SHORTCUTS) == set(check.MISTAKES) == names


@pytest.mark.parametrize("name", sorted(check.EXERCISES))
def test_known_mistakes_get_the_hint_that_fits(name):
    for seed in range(3):
        check.use_seed(seed)
        for fn, words in KNOWN_MISTAKES[name]:
            outcome = check.judge(name, fn)
            assert outcome.status == "failed", (name, words, seed)
            assert words in outcome.message, f"seed {seed}, expected {words!r}: {outcome.message}"
            if not any(near in words for near in NEAR_MISSES.get(name, ())):
                assert outcome.right <= 1, f"seed {seed}: {outcome.message}"


@pytest.mark.parametrize("name", sorted(check.EXERCISES))
def test_no_shortcut_or_remembered_answer_is_right_on_more_than_one_case(name):
    for seed in range(12):
        check.use_seed(seed)
        reference, make_cases = check.EXERCISES[name]
        remembered = [reference(*args) for case in make_cases() for args in case.calls]
        constants = [(lambda *_, v=v: v) for v in remembered]
        for fn in [*SHORTCUTS[name], CONSTANT[name], *constants]:
            outcome = check.judge(name, fn)
            assert outcome.right <= 1, f"seed {seed}: {outcome.message}"


@pytest.mark.parametrize("name", sorted(check.EXERCISES))
def test_a_function_without_return_is_told_so(name):
    def forgot_return(*args):
        _ = args

    outcome = check.judge(name, forgot_return)
    assert outcome.right == 0 and "returned None" in outcome.message
    assert check.NONE_HINT in outcome.message


def test_a_constant_is_told_that_it_ignores_its_input():
    outcome = check.judge("energy_optimal_limit", lambda df: 250.0)
    assert check.CONSTANT_HINT in outcome.message


def test_the_student_function_gets_copies_of_the_inputs():
    """A function that sorts its list in place cannot change the expected answer."""

    def sorts_in_place(pts, d):
        pts.sort()
        return 0

    assert check.judge("plan_within", sorts_in_place).right <= 1


def test_whose_names_the_reference_only_when_the_exercise_is_unsolved(capsys):
    mine = check.pareto_front(_front)
    assert check.whose(mine, "pareto_front") == "your pareto_front"

    def stub(points):
        raise NotImplementedError

    ref = check.pareto_front(stub)
    assert (
        check.is_reference(ref) and check.whose(ref, "pareto_front") == "the reference pareto_front"
    )
    assert not check.is_reference(_front) and not check.is_reference({})


# --- hints chosen by the mistake they name ----------------------------------------------------


@pytest.mark.parametrize("name", sorted(check.EXERCISES))
def test_every_registered_mistake_fails_and_gets_its_own_hint(name):
    """Each known mistake, as the registry computes it, is told its own hint on every seed: the
    cases tell every two mistakes apart (the random case is drawn to)."""
    for seed in range(8):
        check.use_seed(seed)
        for mistake in check.MISTAKES[name]():
            outcome = check.judge(name, mistake.fn)
            assert not outcome.passed, f"seed {seed}: {mistake.name} passes every case"
            assert outcome.message.endswith(mistake.hint), (
                f"seed {seed}, {mistake.name}: {outcome.message}"
            )


@pytest.mark.parametrize("name", sorted(check.EXERCISES))
def test_case_rules_are_no_mistakes_advice(name):
    """What a case checks is a rule of the exercise, never one mistake's hint."""
    hints = {m.hint for m in check.MISTAKES[name]()}
    for seed in range(3):
        check.use_seed(seed)
        for case in check.EXERCISES[name][1]():
            assert case.hint not in hints, (name, case.kind)


def _off(value):
    """A wrong answer no known mistake gives: a little off, or one item short."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value * 1.03 + 0.5
    if isinstance(value, tuple):
        return (*value[:-1], _off(value[-1]))
    if isinstance(value, list):
        return value[:-1] if len(value) > 1 else [(value[0][0] + 1.0, value[0][1])]
    raise TypeError(value)


@pytest.mark.parametrize("name", sorted(check.EXERCISES))
def test_an_unexplained_wrong_answer_is_told_what_differs_not_another_mistake(name):
    reference = check.EXERCISES[name][0]
    hints = [m.hint for m in check.MISTAKES[name]()]
    for seed in range(4):
        check.use_seed(seed)
        outcome = check.judge(name, lambda *args: _off(reference(*args)))
        assert outcome.status == "failed"
        hint = outcome.message.split("Hint: ", 1)[1]
        assert not [h for h in hints if h in hint], f"seed {seed}: {outcome.message}"
        if hint != check.CONSTANT_HINT:
            assert "your answer" in hint and "checks that" in hint, outcome.message


def test_the_mistakes_students_made_get_their_own_hints():
    check.use_seed(0)
    off_by_one = check.judge("energy_per_step", lambda m, n: m.total_energy / (n - 1))
    assert "not by one less" in off_by_one.message and "per second" not in off_by_one.message

    def unsorted_loop(points):
        front = []
        for t, e in points:
            if not front or e < front[-1][1]:
                front.append((t, e))
        return front

    loop = check.judge("pareto_front", unsorted_loop)
    assert "sort them by time" in loop.message and "not only the best one" not in loop.message
    first = check.judge("slowdown_limit", lambda profile, f: profile[0].power_limit)
    assert "first measurement is not special" in first.message
    assert "least energy is not the answer" not in first.message


def test_slowdown_budget_from_the_fastest_time_is_wrong():
    """The specification measures the budget from the time at the highest limit."""

    def fastest(profile, factor):
        budget = factor * min(m.time for m in profile)
        return min(m.power_limit for m in profile if m.time <= budget)

    for seed in range(5):
        check.use_seed(seed)
        outcome = check.judge("slowdown_limit", fastest)
        assert not outcome.passed and "not x the fastest time" in outcome.message


@pytest.mark.parametrize(
    ("answer", "expected", "words"),
    [
        (7.5, 7.3, "a little too high"),
        (5.0, 7.3, "too low (by 10 % to half)"),
        (-3.0, 7.3, "wrong sign"),
        (30.0, 7.3, "far too high"),
        ((1.0, 2.0), 3.0, "a tuple of 2 where a number"),
        ((2.0, 4.1), (2.0, 4.0), "its first value is right, and its second value is a little"),
        ([(2.0, 1.0), (1.0, 2.0)], [(1.0, 2.0), (2.0, 1.0)], "right items in another order"),
        ([(1.0, 2.0)], [(1.0, 2.0), (2.0, 1.0)], "misses some"),
        (True, False, "is True where the right answer is False"),
        (128, 64, "is not the right one"),
    ],
)
def test_what_differs_is_said_without_the_expected_value(answer, expected, words):
    from zeus_nb.course.differ import describe

    text = describe(answer, expected)
    assert words in text
    if isinstance(expected, float):
        assert f"{expected:g}" not in text


# --- what students typed (the JupyterLab report): each gets a hint that names its mistake -------

_IN_W = {  # the right answers, then off by a unit: W -> kW, J -> kJ, J -> Wh
    "average_power": RIGHT["average_power"],
    "energy_per_step": RIGHT["energy_per_step"],
    "zeus_cost": RIGHT["zeus_cost"],
    "iteration_energy": RIGHT["iteration_energy"],
}


@pytest.mark.parametrize("name", sorted(_IN_W))
@pytest.mark.parametrize(
    ("factor", "words"),
    [
        (1e-3, "1,000x too low, a slip of units: the answer is in {unit}, not k{unit}"),
        (1e3, "1,000x too high, a slip of units: the answer is in {unit}, not m{unit}"),
        (1e-6, "1,000,000x too low, a slip of units: the answer is in {unit}, not M{unit}"),
        (1 / 3600, "3,600x too low, a slip of units: the answer is in {unit}"),
    ],
)
def test_a_unit_slip_is_named_with_the_unit_expected(name, factor, words):
    unit = check.UNITS[name]
    right = _IN_W[name]
    for seed in range(3):
        check.use_seed(seed)
        outcome = check.judge(name, lambda *args: right(*args) * factor)
        assert outcome.status == "failed"
        assert words.format(unit=unit) in outcome.message, outcome.message
        assert "the window's energy (J) divided" not in outcome.message  # not the task's formula


def test_energy_divided_by_3600_is_named_as_watt_hours():
    outcome = check.judge("energy_per_step", lambda m, n: m.total_energy / n / 3600)
    assert "in J, not Wh, so do not divide by 3600" in outcome.message


def test_a_wrong_attribute_shows_the_exception_message_to_student_and_teacher(capsys):
    from zeus_nb.course.feedback import for_teacher

    check.average_power(lambda m: m.energy / m.time)
    out = capsys.readouterr().out
    assert "raised AttributeError: 'Measurement' object has no attribute 'energy'" in out
    assert "attribute the object does not have" in out and "Traceback" not in out
    assert "'energy'" in for_teacher(out.strip()[1:])  # what `course grade` writes


def test_a_long_exception_message_is_cut_to_one_line():
    def raises(m):
        raise ValueError("word\n" * 200)

    message = check.judge("average_power", raises).message
    assert "\n" not in message and "ValueError: word word" in message and "..." in message


@pytest.mark.parametrize(
    ("name", "fn", "words"),
    [
        (  # max for min
            "least_cost_config",
            lambda cs, eta: max(cs, key=lambda c: _cost(c, eta, max(x[1] for x in cs)))[:2],
            "highest cost: look for the least (min, not max)",
        ),
        (
            "plan_within",
            lambda pts, d: max((e, i) for i, (t, e) in enumerate(pts) if t <= d)[1],
            "the most energy among those in time: look for the least",
        ),
        (  # as if the plans were sorted by time
            "plan_within",
            lambda pts, d: [i for i, (t, e) in enumerate(pts) if t <= d][-1],
            "the plans come in no order",
        ),
        (
            "pareto_front",
            lambda pts: [
                p
                for k, p in enumerate(sorted(pts))
                if k == 0 or p[1] > max(q[1] for q in sorted(pts)[:k])
            ],
            "the comparison goes the wrong way",
        ),
    ],
)
def test_direction_and_order_mistakes_are_named(name, fn, words):
    for seed in range(4):
        check.use_seed(seed)
        outcome = check.judge(name, fn)
        assert outcome.status == "failed"
        assert words in outcome.message, f"seed {seed}: {outcome.message}"
        assert "past the deadline does not count" not in outcome.message


def test_composed_hints_are_sentences():
    """An answer no known mistake explains is told what differs in whole clauses."""
    outcome = check.judge("least_cost_config", lambda cs, eta: (cs[1][0], cs[1][1] * 1.5))
    hint = outcome.message.split("Hint: ", 1)[1]
    assert "your answer its" not in hint and "your answer the" not in hint
    assert re.search(r"the (first|second) value of your answer (is|is not)", hint), hint
    assert ". The case '" in hint


@pytest.mark.parametrize("name", sorted(check.EXERCISES))
def test_no_hint_hands_over_the_answer(name):
    """A hint names the concept, never the expression that answers the exercise."""
    answers = {"total_energy", "idxmin", "beta * best", "eta * energy + (1 - eta)"}
    hints = [m.hint for m in check.MISTAKES[name]()] + list(check.RAISED_HINTS.values())
    for hint in hints:
        assert not [a for a in answers if a in hint], (name, hint)
