"""Pipeline frequency planning: profiles, the 1F1B DAG, the frontier, applying plans."""

import pytest

from zeus_nb import device
from zeus_nb.device.frequency import calibrate
from zeus_nb.optimizer.pipeline_frequency import (
    DeadlineError,
    FrequencyPlan,
    PipelineFrequencyOptimizer,
    evaluate,
    load_profile,
    solve_frontier,
    stage_order,
    stage_works,
    synthetic_profile,
)

STAGES, MBS = 3, 4
WEIGHTS = [1.0, 1.4, 0.8]  # unbalanced: stage 1 is the bottleneck


@pytest.fixture(scope="module")
def profile():
    return synthetic_profile("v100", STAGES, WEIGHTS)


@pytest.fixture(scope="module")
def frontier(profile):
    return solve_frontier(profile, STAGES, MBS)


def _max_clock_time(profile, stages, mbs):
    """Independent 1F1B simulation at every stage's fastest clock: round-robin over stages,
    each running its next instruction once its input is ready."""
    t = {(s, i): profile.fastest(s, i).time for s in range(stages) for i in ("forward", "backward")}
    queues = {s: list(stage_order(s, stages, mbs)) for s in range(stages)}
    free = dict.fromkeys(range(stages), 0.0)
    done = {}
    while any(queues.values()):
        for s in range(stages):
            if not queues[s]:
                continue
            inst, j = queues[s][0]
            dep = (s - 1, "forward", j) if inst == "forward" else (s + 1, "backward", j)
            if 0 <= dep[0] < stages and dep not in done:
                continue
            start = max(free[s], done.get(dep, 0.0))
            done[(s, inst, j)] = free[s] = start + t[(s, inst)]
            queues[s].pop(0)
    return max(done.values())


def test_1f1b_order():
    assert stage_order(0, 2, 3) == [
        ("forward", 0),
        ("forward", 1),
        ("backward", 0),
        ("forward", 2),
        ("backward", 1),
        ("backward", 2),
    ]
    last = stage_order(1, 2, 3)
    assert last[:2] == [("forward", 0), ("backward", 0)] and len(last) == 6


def test_frontier_time_increases_and_energy_never_does(frontier):
    pts = frontier.points
    assert len(pts) >= 5
    for a, b in zip(pts, pts[1:], strict=False):
        assert b.iteration_time > a.iteration_time
        assert b.energy <= a.energy
    for p in pts:  # reported numbers are the plan's own, evaluated on the profile
        tl = evaluate(p.plan, frontier.profile)
        assert tl.iteration_time == pytest.approx(p.iteration_time)
        assert tl.energy == pytest.approx(p.energy)


def test_fastest_point_matches_max_clocks_and_saves_energy(profile, frontier):
    t_max = _max_clock_time(profile, STAGES, MBS)
    assert frontier.max_clock.iteration_time == pytest.approx(t_max)
    fastest = frontier.fastest()
    assert t_max - 1e-12 <= fastest.iteration_time <= t_max + frontier.unit_time
    assert fastest.energy < frontier.max_clock.energy
    # something off the critical path really runs slower than max clock
    top = max(profile.fastest(s, "forward").frequency for s in range(STAGES))
    assert any(f < top for s in range(STAGES) for f in fastest.plan.frequencies(s))


def test_energy_counts_blocking_power(profile):
    plan = FrequencyPlan.max_clock(profile, MBS)
    tl = evaluate(plan, profile)
    compute = sum(profile.at(s, i, f).energy for (s, i, _), (_, _, f) in tl.spans.items())
    busy = [0.0] * STAGES
    for (s, _, _), (a, b, _) in tl.spans.items():
        busy[s] += b - a
    blocking = sum(profile.blocking_power[s] * (tl.iteration_time - busy[s]) for s in range(STAGES))
    assert blocking > 0
    assert tl.energy == pytest.approx(compute + blocking)
    assert profile.blocking_power[0] == pytest.approx(calibrate("v100").model.static_power)


def test_deadline_picks_least_energy_plan_in_time(frontier):
    t0 = frontier.fastest().iteration_time
    point = frontier.for_deadline(1.1 * t0)
    assert point.iteration_time <= 1.1 * t0
    assert point.energy == min(p.energy for p in frontier.points if p.iteration_time <= 1.1 * t0)
    with pytest.raises(DeadlineError, match="fastest takes"):
        frontier.for_deadline(0.5 * t0)


def test_profile_roundtrips_through_csv(tmp_path, profile):
    path = profile.to_csv(tmp_path / "p.csv")
    back = load_profile(path)
    assert back.blocking_power == pytest.approx(profile.blocking_power)
    for key, ms in profile.measurements.items():
        assert sorted(back.measurements[key], key=lambda m: m.frequency) == sorted(
            ms, key=lambda m: m.frequency
        )
    assert back.metadata and "synthetic" in back.metadata[0]


def test_stage_count_must_match(profile):
    with pytest.raises(ValueError, match="3 stage"):
        solve_frontier(profile, 4, MBS)


def test_optimizer_applies_plan_per_instruction(frontier):
    system = device.use_simulated("v100", num_gpus=STAGES)
    plan = frontier.fastest().plan
    for s in range(STAGES):
        gpu = system.gpu(s)
        with PipelineFrequencyOptimizer(plan, s, gpu) as opt:
            opt.on_step_begin()
            for inst, _j, f in plan.stages[s]:
                opt.on_instruction_begin(inst)
                assert gpu.locked_clocks() == (f, f)
                opt.on_instruction_end(inst)
            opt.on_step_end()
            assert [f for _, f in opt.applied] == plan.frequencies(s)
        assert gpu.locked_clocks() is None  # given back on exit
    opt = PipelineFrequencyOptimizer(plan, 0, system.gpu(0))
    opt.on_step_begin()
    with pytest.raises(RuntimeError, match="plan and schedule must both be 1F1B"):
        opt.on_instruction_begin("backward")


def test_plan_json_roundtrip(frontier):
    plan = frontier.fastest().plan
    assert FrequencyPlan.from_json(plan.to_json()) == plan
    assert plan.num_microbatches == MBS and plan.num_stages == STAGES


def test_simulated_stage_runs_what_the_synthetic_profile_says(profile):
    """A simulated GPU locked to a profiled clock runs a stage's instruction in the profiled
    time and energy (what a live simulated pipeline charges per instruction)."""
    works = stage_works("v100", STAGES, WEIGHTS)
    system = device.use_simulated("v100", num_gpus=1)
    gpu = system.gpu(0)
    for s in range(STAGES):
        for inst in ("forward", "backward"):
            for m in profile.options(s, inst)[::5]:
                gpu.set_locked_clocks(m.frequency, m.frequency)
                e0 = gpu.energy()
                assert system.run_work(works[s][inst], [0]) == pytest.approx(m.time)
                assert gpu.energy() - e0 == pytest.approx(m.energy)
    assert works[1]["forward"].time_at_max > works[0]["forward"].time_at_max  # weight 1.4 > 1
    assert works[0]["backward"].compute_share > works[0]["forward"].compute_share


def test_a_small_model_in_millijoules_still_gets_a_whole_frontier(profile, frontier):
    """lowtime rounds cost changes to 1e-6: instructions of a few microseconds and millijoules
    (the live tiny-gpt pipeline) once gave a one-point frontier. Costs are scaled for the solver."""
    from zeus_nb.optimizer.pipeline_frequency.profile import InstructionProfile, Measurement

    k = 1e-5
    tiny = InstructionProfile(
        {
            key: [Measurement(m.frequency, m.time * k, m.energy * k) for m in ms]
            for key, ms in profile.measurements.items()
        },
        dict(profile.blocking_power),
    )
    small = solve_frontier(tiny, STAGES, MBS, unit_time=frontier.unit_time * k)
    assert small.cost_scale > 1 and frontier.cost_scale == 1.0
    assert len(small.points) >= max(2, len(frontier.points) // 2)
    for a, b in zip(small.points, small.points[1:], strict=False):
        assert b.iteration_time > a.iteration_time and b.energy < a.energy
    assert small.fastest().energy < small.max_clock.energy
