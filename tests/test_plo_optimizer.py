"""GlobalPowerLimitOptimizer on the simulated GPU: schedule, choice, epochs, profiles, rights."""

import json

import pytest

import zeus_nb
from zeus_nb import device
from zeus_nb.device.guard import restore_all
from zeus_nb.errors import PowerLimitPermissionError
from zeus_nb.monitor import ZeusMonitor
from zeus_nb.optimizer import (
    Energy,
    GlobalPowerLimitOptimizer,
    MaxSlowdownConstraint,
    PowerLimitMeasurement,
    ProfileError,
    Time,
    ZeusCost,
)


@pytest.fixture(autouse=True)
def _state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ZEUS_NB_STATE_DIR", str(tmp_path / "state"))
    yield
    restore_all()


@pytest.fixture
def system():
    return device.use_simulated(gpu="a40", workload="imagenet", num_gpus=1)


def expected_measurements(system, limits, steps, gpus=1):
    out = []
    for w in limits:
        t, p = system.step_cost(system.batch_size, w)
        out.append(PowerLimitMeasurement(w, gpus * p * t * steps, t * steps, gpus))
    return out


def run(plo, steps_per_epoch, max_epochs=100, on_step=None):
    """The documented loop, plus zeus_nb.step() per step; stops once the optimum is applied."""
    for _ in range(max_epochs):
        plo.on_epoch_begin()
        for _ in range(steps_per_epoch):
            plo.on_step_begin()
            if on_step:
                on_step()
            zeus_nb.step()
            plo.on_step_end()
        plo.on_epoch_end()
        if plo.done:
            return
    raise AssertionError("profiling never finished")


def kw(**extra):
    return (
        dict(wait_steps=1, warmup_steps=2, profile_steps=4, adaptive=False, verbose=False) | extra
    )


@pytest.mark.parametrize(
    "selector", [Energy(), Time(), ZeusCost(0.5), ZeusCost(0.9), MaxSlowdownConstraint(1.1)]
)
def test_profiles_every_limit_from_max_down_and_applies_the_selectors_choice(system, selector):
    mon = ZeusMonitor(gpu_indices=[0])
    plo = GlobalPowerLimitOptimizer(mon, selector, **kw())
    seen = []
    run(plo, 100, on_step=lambda: seen.append(system.gpus[0].get_power_limit()))
    limits = [300.0 - 25 * i for i in range(9)]
    assert plo.power_limits == limits
    assert [m.power_limit for m in plo.measurements] == limits
    exp = expected_measurements(system, limits, 4)
    for got, want in zip(plo.measurements, exp, strict=True):
        assert got.time == pytest.approx(want.time)
        assert got.energy == pytest.approx(want.energy)
    assert plo.optimal_power_limit == selector.select(exp)
    assert system.gpus[0].get_power_limit() == plo.optimal_power_limit
    # 1 wait step at the original limit, then 2 warm-up + 4 measured steps per limit
    assert seen[0] == 300.0
    assert seen[1 : 1 + 6 * 9] == [w for w in limits for _ in range(6)]
    assert all(lo <= w <= hi for w in seen for lo, hi in [(100.0, 300.0)])


def test_default_selector_is_zeus_cost_half(system):
    plo = GlobalPowerLimitOptimizer(ZeusMonitor(), verbose=False)
    assert isinstance(plo.optimum_selector, ZeusCost)
    assert plo.optimum_selector.eta_knob == 0.5


def test_pl_step_and_constraints(system):
    plo = GlobalPowerLimitOptimizer(ZeusMonitor(), pl_step=70, verbose=False)
    assert plo.power_limits == [300.0, 230.0, 160.0]  # 90 W would be below the 100 W minimum


def test_short_epochs_still_finish_and_pause_windows_at_epoch_ends(system):
    # 3-step epochs are shorter than wait + warmup + profile (1 + 2 + 4): progress must carry.
    mon = ZeusMonitor(gpu_indices=[0])
    plo = GlobalPowerLimitOptimizer(mon, Energy(), **kw(resume_across_epochs=True))
    epochs = 0

    def validation():  # time between epochs at some limit must not be measured
        system.advance_idle(100.0)

    for _ in range(100):
        epochs += 1
        plo.on_epoch_begin()
        for _ in range(3):
            plo.on_step_begin()
            zeus_nb.step()
            plo.on_step_end()
        plo.on_epoch_end()
        validation()
        if plo.done:
            break
    assert plo.done
    assert epochs == -(-(1 + 6 * 9) // 3)
    exp = expected_measurements(system, plo.power_limits, 4)
    for got, want in zip(plo.measurements, exp, strict=True):
        assert got.time == pytest.approx(want.time)  # no idle validation time inside
    assert plo.optimal_power_limit == Energy().select(exp)


def test_warmup_zero_and_wait_zero(system):
    plo = GlobalPowerLimitOptimizer(
        ZeusMonitor(),
        Time(),
        wait_steps=0,
        warmup_steps=0,
        profile_steps=3,
        adaptive=False,
        verbose=False,
    )
    n = 0
    while not plo.done:
        plo.on_step_begin()
        zeus_nb.step()
        plo.on_step_end()
        n += 1
    assert n == 3 * 9 + 1  # the last window ends as the next step begins (Zeus's transition)
    assert len(plo.measurements) == 9


def test_windows_measuring_nothing_do_not_crash(system):
    # Forgetting zeus_nb.step() on the simulated GPU: every window is 0 s and 0 J.
    for selector in (Energy(), Time(), ZeusCost(0.5), MaxSlowdownConstraint(1.5)):
        device.use_simulated()
        plo = GlobalPowerLimitOptimizer(ZeusMonitor(), selector, **kw())
        with pytest.warns(UserWarning, match="zeus_nb.step"):
            while not plo.done:
                plo.on_step_begin()
                plo.on_step_end()
        assert all(m.time == 0 and m.energy == 0 for m in plo.measurements)
        expected = 100.0 if isinstance(selector, MaxSlowdownConstraint) else 300.0
        assert plo.optimal_power_limit == expected


def test_bad_arguments(system):
    mon = ZeusMonitor()
    for bad in (
        dict(warmup_steps=-1),
        dict(profile_steps=0),
        dict(wait_steps=1.5),
        dict(pl_step=0),
        dict(noise_margin=1.0),
    ):
        with pytest.raises(ValueError):
            GlobalPowerLimitOptimizer(mon, **bad)
    with pytest.raises(TypeError, match="OptimumSelector"):
        GlobalPowerLimitOptimizer(mon, "energy")


def test_profile_path_saves_then_skips_profiling(system, tmp_path):
    path = tmp_path / "profiles" / "plo.json"
    plo = GlobalPowerLimitOptimizer(ZeusMonitor(), Energy(), profile_path=path, **kw())
    run(plo, 10)
    data = json.loads(path.read_text())
    assert data["gpu_model"] == system.gpus[0].name
    assert data["power_limit_constraints"] == [100.0, 300.0]
    assert data["pl_step"] == 25
    assert len(data["measurements"]) == 9

    device.use_simulated()
    again = GlobalPowerLimitOptimizer(ZeusMonitor(), Energy(), profile_path=path, **kw())
    assert again.done and again.optimal_power_limit == plo.optimal_power_limit
    again.on_epoch_begin()
    again.on_step_begin()
    assert device.current().gpus[0].get_power_limit() == plo.optimal_power_limit
    # another selector chooses from the same saved measurements
    t = GlobalPowerLimitOptimizer(ZeusMonitor(), Time(), profile_path=path, **kw())
    assert t.optimal_power_limit == Time().select(plo.measurements)


def test_profile_from_another_gpu_or_range_is_refused(system, tmp_path):
    path = tmp_path / "plo.json"
    run(GlobalPowerLimitOptimizer(ZeusMonitor(), profile_path=path, **kw()), 10)
    device.use_simulated(gpu="v100")
    with pytest.raises(ProfileError, match="was made on NVIDIA A40"):
        GlobalPowerLimitOptimizer(ZeusMonitor(), profile_path=path, **kw())
    device.use_simulated(gpu="a40")
    with pytest.raises(ProfileError, match="pl_step"):
        GlobalPowerLimitOptimizer(ZeusMonitor(), profile_path=path, pl_step=50, verbose=False)
    data = json.loads(path.read_text())
    data["power_limit_constraints"] = [150.0, 300.0]
    path.write_text(json.dumps(data))
    with pytest.raises(ProfileError, match="150"):
        GlobalPowerLimitOptimizer(ZeusMonitor(), profile_path=path, **kw())


@pytest.mark.parametrize("text", ["{not json", "[]", '{"format": "zeus-nb power-limit profile"}'])
def test_corrupt_profile_gets_a_clear_error(system, tmp_path, text):
    path = tmp_path / "plo.json"
    path.write_text(text)
    with pytest.raises(ProfileError, match="unreadable.*delete it"):
        GlobalPowerLimitOptimizer(ZeusMonitor(), profile_path=path, **kw())


def test_close_restores_the_original_limit(system):
    system.gpus[0].set_power_limit(250.0)
    with GlobalPowerLimitOptimizer(ZeusMonitor(), Energy(), **kw()) as plo:
        run(plo, 10)
        assert system.gpus[0].get_power_limit() == plo.optimal_power_limit
    assert system.gpus[0].get_power_limit() == 250.0


def test_no_permission_is_refused_at_construction(fake_nvml, monkeypatch):
    fake_nvml.set_device(0, set_error="NoPermission")
    mon = ZeusMonitor(gpu_indices=[0])
    with pytest.raises(PowerLimitPermissionError, match="SYS_ADMIN") as e:
        GlobalPowerLimitOptimizer(mon, verbose=False)
    assert "--cap-add SYS_ADMIN" in str(e.value)
    assert fake_nvml.limits_w()[0] == 300.0

    fake_nvml.set_device(0, set_error=None)
    monkeypatch.setattr("zeus_nb.device.gpu.nvidia.has_sys_admin", lambda: False)
    with pytest.raises(PowerLimitPermissionError, match="root"):
        GlobalPowerLimitOptimizer(mon, verbose=False)
    assert fake_nvml.state["set_calls"] == []  # refused before touching anything


def test_seed_snippets_run_with_only_the_import_changed(system):
    # The documented single-GPU and HF-less usage, verbatim but for imports and zeus_nb.step().
    from zeus_nb.monitor import ZeusMonitor
    from zeus_nb.optimizer import GlobalPowerLimitOptimizer
    from zeus_nb.optimizer.power_limit import GlobalPowerLimitOptimizer as Same

    assert Same is GlobalPowerLimitOptimizer
    train_dataloader = [(i, i) for i in range(500)]

    monitor = ZeusMonitor(gpu_indices=[0])
    plo = GlobalPowerLimitOptimizer(monitor)

    for _epoch in range(2):
        plo.on_epoch_begin()

        for _x, _y in train_dataloader:
            plo.on_step_begin()
            # Learn from x and y!
            zeus_nb.step()
            plo.on_step_end()

        plo.on_epoch_end()

    assert plo.done
    assert not plo.adaptive  # Zeus's default: every limit measured in full
    exp = expected_measurements(system, plo.power_limits, 40)
    assert plo.optimal_power_limit == ZeusCost(0.5).select(exp)
    assert not plo.abandoned
    assert system.gpus[0].get_power_limit() == plo.optimal_power_limit
    plo.close()


def test_multi_gpu_monitor_sets_all_gpus_and_sums_energy():
    system = device.use_simulated(num_gpus=4)
    monitor = ZeusMonitor(gpu_indices=[0, 1, 2, 3])
    plo = GlobalPowerLimitOptimizer(monitor, ZeusCost(0.5), **kw())
    run(plo, 20)
    assert {g.get_power_limit() for g in system.gpus} == {plo.optimal_power_limit}
    exp = expected_measurements(system, plo.power_limits, 4, gpus=4)
    assert [m.num_gpus for m in plo.measurements] == [4] * 9
    assert plo.measurements[0].energy == pytest.approx(exp[0].energy)
    assert plo.optimal_power_limit == ZeusCost(0.5, world_size=4).select(exp)


def steps_to_finish(plo):
    n = 0
    while not plo.done:
        plo.on_step_begin()
        zeus_nb.step()
        plo.on_step_end()
        n += 1
    return n


@pytest.mark.parametrize(
    "selector",
    [Energy(), Time(), ZeusCost(0.25), ZeusCost(0.75), MaxSlowdownConstraint(1.0)]
    + [MaxSlowdownConstraint(f) for f in (1.1, 1.5, 3.0)],
    ids=repr,
)
@pytest.mark.parametrize("workload", ["imagenet", "cifar100", "squad"])
def test_adaptive_chooses_like_exhaustive_with_fewer_steps(selector, workload):
    device.use_simulated(workload=workload)
    ex = GlobalPowerLimitOptimizer(ZeusMonitor(), selector, **kw())
    n_ex = steps_to_finish(ex)
    device.use_simulated(workload=workload)
    ad = GlobalPowerLimitOptimizer(ZeusMonitor(), selector, **kw(adaptive=True))
    n_ad = steps_to_finish(ad)
    assert ad.optimal_power_limit == ex.optimal_power_limit
    assert n_ad <= n_ex
    kept = {m.power_limit: m for m in ad.measurements}
    for m in ex.measurements:  # what adaptive kept, it measured in full
        if m.power_limit in kept:
            assert kept[m.power_limit].time == pytest.approx(m.time)


def test_max_slowdown_probes_the_lowest_limit_right_after_the_highest(system):
    plo = GlobalPowerLimitOptimizer(ZeusMonitor(), MaxSlowdownConstraint(3.0), **kw(adaptive=True))
    n = steps_to_finish(plo)
    assert [m.power_limit for m in plo.measurements] == [300.0, 100.0]
    assert plo.optimal_power_limit == 100.0
    assert n == 1 + 2 * 6 + 1  # the optimum is applied as the next step begins
    assert set(plo.abandoned) == set(plo.power_limits[1:-1])


def test_a_second_optimizer_on_the_same_gpu_restores_the_true_original(system):
    system.gpus[0].set_power_limit(225.0)
    first = GlobalPowerLimitOptimizer(ZeusMonitor(), Time(), **kw())
    run(first, 10)
    assert system.gpus[0].get_power_limit() == 300.0  # Time's choice, not the original
    second = GlobalPowerLimitOptimizer(ZeusMonitor(), Energy(), **kw())  # a re-run cell
    run(second, 10)
    second.close()
    assert system.gpus[0].get_power_limit() == 225.0
    first.close()
    assert system.gpus[0].get_power_limit() == 225.0


# The documented usage, verbatim except for the package name in imports, with zeus_nb.step()
# added once per step; ``train_dataloader`` is a stand-in list of batches.
SNIPPET_GETTING_STARTED = """
from zeus_nb.monitor import ZeusMonitor
from zeus_nb.optimizer import GlobalPowerLimitOptimizer

# Data parallel training with four GPUs.
# Omitting `gpu_indices` will use all GPUs, while respecting
# `CUDA_VISIBLE_DEVICES`.
monitor = ZeusMonitor(gpu_indices=[0,1,2,3])
# The power limit optimizer profiles power limits during training
# using the `ZeusMonitor` instance.
plo = GlobalPowerLimitOptimizer(monitor)

for epoch in range(100):
    plo.on_epoch_begin()

    for x, y in train_dataloader:
        plo.on_step_begin()
        # Learn from x and y!
        zeus_nb.step()
        plo.on_step_end()

    plo.on_epoch_end()

    # Validate the model if needed, but `plo` won't care.
"""

SNIPPET_REFERENCE = """
from zeus_nb.monitor import ZeusMonitor
from zeus_nb.optimizer.power_limit import GlobalPowerLimitOptimizer

# Data parallel training with four GPUs.
monitor = ZeusMonitor(gpu_indices=[0,1,2,3])
plo = GlobalPowerLimitOptimizer(monitor)

for epoch in range(100):
    plo.on_epoch_begin()

    for x, y in train_dataloader:
        plo.on_step_begin()
        # Learn from x and y
        zeus_nb.step()
        plo.on_step_end()

    plo.on_epoch_end()
"""


@pytest.mark.parametrize("snippet", [SNIPPET_GETTING_STARTED, SNIPPET_REFERENCE])
def test_documented_snippets_run_on_the_simulated_backend(snippet, monkeypatch):
    monkeypatch.setenv("ZEUS_NB_BACKEND", "sim")
    monkeypatch.setenv("ZEUS_NB_SIM_GPUS", "4")
    monkeypatch.setenv("ZEUS_NB_SIM_WORKLOAD", "cifar100")
    # epochs long enough for Zeus's optimizer, which starts a limit over at an epoch's end
    scope = {"zeus_nb": zeus_nb, "train_dataloader": [(i, i) for i in range(460)]}
    exec(snippet, scope)
    plo = scope["plo"]
    system = device.current()
    assert plo.done and len(system.gpus) == 4
    assert {g.get_power_limit() for g in system.gpus} == {plo.optimal_power_limit}
    exhaustive = expected_measurements(system, plo.power_limits, 40, gpus=4)
    assert plo.optimal_power_limit == ZeusCost(0.5).select(exhaustive)
    plo.close()
    assert {g.get_power_limit() for g in system.gpus} == {300.0}


def test_adaptive_profile_loaded_with_another_selector_warns(system, tmp_path):
    path = tmp_path / "plo.json"
    first = GlobalPowerLimitOptimizer(ZeusMonitor(), Time(), profile_path=path, **kw(adaptive=True))
    steps_to_finish(first)
    assert first.abandoned
    saved = json.loads(path.read_text())
    assert saved["pruned_for"] == "Time()" and set(saved["abandoned"]) == {
        f"{w:g}" for w in first.abandoned
    }
    with pytest.warns(UserWarning, match="profiled adaptively for Time"):
        GlobalPowerLimitOptimizer(ZeusMonitor(), Energy(), profile_path=path, **kw())


def test_state_machine_transitions_step_by_step(system):
    from zeus_nb.optimizer.power_limit.optimizer import (
        Done,
        Phase,
        Profiling,
        Waiting,
        WarmingUp,
    )

    plo = GlobalPowerLimitOptimizer(
        ZeusMonitor(),
        Energy(),
        wait_steps=1,
        warmup_steps=2,
        profile_steps=3,
        pl_step=100,
        adaptive=False,
        verbose=False,
    )
    assert isinstance(plo.state, Waiting) and plo.phase == Phase.WAIT == "wait"
    seen = []
    while not plo.done:
        plo.on_step_begin()
        seen.append((type(plo.state), system.gpus[0].get_power_limit()))
        zeus_nb.step()
        plo.on_step_end()
    # expected, built from the schedule: 1 wait step, then 2 warm-up + 3 measured steps per limit
    want = [(Waiting, 300.0)]
    for w in (300.0, 200.0, 100.0):
        want += [(WarmingUp, w)] * 2 + [(Profiling, w)] * 3
    want.append((Done, plo.optimal_power_limit))  # the last window ends as a step begins
    assert seen == want
    assert isinstance(plo.state, Done) and plo.state.applied and plo.phase == "done"


def test_an_epoch_end_pauses_the_window_and_the_next_step_resumes_it(system):
    from zeus_nb.optimizer.power_limit.optimizer import Profiling

    plo = GlobalPowerLimitOptimizer(
        ZeusMonitor(),
        Energy(),
        wait_steps=0,
        warmup_steps=0,
        profile_steps=4,
        verbose=False,
        adaptive=False,
        resume_across_epochs=True,
    )
    for _ in range(2):
        plo.on_step_begin()
        zeus_nb.step()
        plo.on_step_end()
    plo.on_epoch_end()
    state = plo.state
    assert isinstance(state, Profiling) and state.window is None and state.steps == 3
    t, p = system.step_cost(system.batch_size, 300.0)
    assert state.time == pytest.approx(2 * t) and state.energy == pytest.approx(2 * t * p)
    system.advance_idle(50.0)  # validation between epochs: not measured
    plo.on_epoch_begin()
    for _ in range(2):
        plo.on_step_begin()
        assert state.window is not None
        zeus_nb.step()
        plo.on_step_end()
    plo.on_step_begin()  # the window ends as the next step begins (Zeus's transition)
    assert plo.measurements[0].time == pytest.approx(4 * t)
    assert plo.state is not state  # on to the next limit


def test_verbose_maps_to_log_levels(system, caplog):
    import logging

    caplog.set_level(logging.DEBUG, logger="zeus_nb.optimizer.power_limit.optimizer")
    for verbose, level in ((True, logging.INFO), (False, logging.DEBUG)):
        caplog.clear()
        device.use_simulated()
        run(GlobalPowerLimitOptimizer(ZeusMonitor(), Energy(), **kw(verbose=verbose)), 10)
        messages = [(r.levelno, r.getMessage()) for r in caplog.records]
        assert [lvl for lvl, _ in messages] == [level, level]
        assert messages[0][1].startswith("profiling 9 power limits (300 W down to 100 W)")
        assert "chosen by Energy()" in messages[1][1]


def test_importing_selectors_loads_neither_numpy_nor_sqlite3():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from zeus_nb.optimizer import ZeusCost, Energy, Time, MaxSlowdownConstraint\n"
        "from zeus_nb.optimizer.power_limit import OptimumSelector, PowerLimitMeasurement\n"
        "from zeus_nb.optimizer.power_limit.registry import make_selector\n"
        "make_selector('max-slowdown', 3.0)\n"
        "heavy = ('numpy', 'sqlite3', 'torch', 'transformers')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_hf_optimizer_is_one_class_behind_every_public_path():
    pytest.importorskip("transformers")
    from zeus_nb.optimizer import HFGlobalPowerLimitOptimizer as A
    from zeus_nb.optimizer.power_limit import HFGlobalPowerLimitOptimizer as B
    from zeus_nb.optimizer.power_limit.hf import HFGlobalPowerLimitOptimizer as C

    assert A is B is C


def test_optimizer_is_a_zeus_callback_and_runs_in_a_callback_set():
    from zeus_nb.callback import Callback, CallbackSet
    from zeus_nb.monitor import ZeusMonitor
    from zeus_nb.optimizer.power_limit import Done, GlobalPowerLimitOptimizer, Ready

    system = device.use_simulated(gpu="v100", workload="imagenet")
    monitor = ZeusMonitor(gpu_indices=[0])
    plo = GlobalPowerLimitOptimizer(monitor, warmup_steps=1, profile_steps=2, adaptive=False)
    assert isinstance(plo, Callback) and isinstance(plo.state, Ready)
    assert plo.state.next_power_limit == system.max_limit * 1000 and plo.state.steps == 2
    seen = []

    class Counter(Callback):
        def on_step_end(self):
            seen.append("step")

    callbacks = CallbackSet([plo, Counter()])
    callbacks.on_train_begin()
    while not isinstance(plo.state, Done):
        callbacks.on_epoch_begin()
        for _ in range(5):
            callbacks.on_step_begin()
            zeus_nb.step()
            callbacks.on_step_end()
        callbacks.on_epoch_end()
    assert plo.state.optimal_power_limit == round(plo.optimal_power_limit * 1000)
    assert plo.current_power_limit == plo.state.optimal_power_limit
    assert system.gpus[0].get_power_limit() == plo.optimal_power_limit
    callbacks.on_train_end()
    assert system.gpus[0].get_power_limit() == system.max_limit  # restored
    assert len(seen) % 5 == 0 and seen
