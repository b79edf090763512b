"""Replaying real profiling logs: exact measurements, the CLI, and adaptive profiling."""

import csv
import json
from importlib import resources

import pytest

from zeus_nb.cli import main
from zeus_nb.errors import TraceFormatError
from zeus_nb.optimizer import (
    Energy,
    GlobalPowerLimitOptimizer,
    MaxSlowdownConstraint,
    PowerLimitMeasurement,
    Time,
    ZeusCost,
)
from zeus_nb.optimizer.replay import ReplayMonitor, load_profile_log, replay_optimizer

PROFILES = resources.files("zeus_nb") / "resources" / "zeus_profiles"
LOGS = sorted(p.name for p in PROFILES.iterdir() if p.name.endswith(".csv"))
SELECTORS = [
    Energy(),
    Time(),
    ZeusCost(0.0),
    ZeusCost(0.5),
    ZeusCost(1.0),
    MaxSlowdownConstraint(1.1),
    MaxSlowdownConstraint(2.0),
]


def read_rows(name):
    """The log's own numbers, read independently of the replay code."""
    with (PROFILES / name).open() as f:
        rows = list(csv.DictReader(f))
    out = []
    for r in rows:
        energies = [float(v) for k, v in r.items() if k.endswith("_energy")]
        limit = float(r["window_name"].rsplit("_", 1)[1])
        out.append(
            PowerLimitMeasurement(limit, sum(energies), float(r["elapsed_time"]), len(energies))
        )
    return out


@pytest.mark.parametrize("name", LOGS)
def test_replay_reproduces_the_logged_windows(name):
    plo = replay_optimizer(PROFILES / name, Energy(), warmup_steps=3, profile_steps=7)
    rows = read_rows(name)
    assert [m.power_limit for m in plo.measurements] == [m.power_limit for m in rows]
    for got, want in zip(plo.measurements, rows, strict=True):
        assert got.time == pytest.approx(want.time)
        assert got.energy == pytest.approx(want.energy)
        assert got.num_gpus == want.num_gpus
    assert plo.optimal_power_limit == Energy().select(rows)
    exhaustive_time = sum(m.time for m in rows) * (3 + 7) / 7
    assert plo.profiling_time == pytest.approx(exhaustive_time)


@pytest.mark.parametrize("name", LOGS)
@pytest.mark.parametrize("selector", SELECTORS, ids=repr)
def test_adaptive_is_never_worse_than_3_percent_and_never_slower(name, selector):
    rows = read_rows(name)
    ex = replay_optimizer(PROFILES / name, selector)
    ad = replay_optimizer(PROFILES / name, selector, adaptive=True)
    assert ad.profiling_time <= ex.profiling_time + 1e-9
    chosen = {m.power_limit: m for m in rows}
    a, e = chosen[ad.optimal_power_limit], chosen[ex.optimal_power_limit]
    if isinstance(selector, MaxSlowdownConstraint):
        assert a.energy <= e.energy * 1.03
        assert a.time <= selector.factor * rows[0].time * 1.05
    else:
        assert (
            selector.score(a.energy, a.time, rows) <= selector.score(e.energy, e.time, rows) * 1.03
        )
    # every limit it kept is a full, exact window
    for m in ad.measurements:
        assert m.time == pytest.approx(chosen[m.power_limit].time)
    assert set(ad.abandoned) | {m.power_limit for m in ad.measurements} == set(ad.power_limits)


def test_adaptive_saves_profiling_time_on_the_slow_low_limits():
    name = "A40+bert-base-uncased+gpu0.csv"
    ex = replay_optimizer(PROFILES / name, ZeusCost(0.5))
    ad = replay_optimizer(PROFILES / name, ZeusCost(0.5), adaptive=True)
    assert 100.0 in ad.abandoned and 125.0 in ad.abandoned
    assert ad.profiling_time < 0.7 * ex.profiling_time


@pytest.mark.parametrize("name", LOGS[:2])
def test_zeus_monitor_reads_the_replay_backend(name, tmp_path):
    """The ordinary ZeusMonitor over a ReplaySystem measures each logged window exactly."""
    from zeus_nb import device
    from zeus_nb.device.replay import ReplaySystem
    from zeus_nb.monitor import ZeusMonitor

    steps = 6
    system = ReplaySystem(PROFILES / name, steps_per_window=steps)
    monitor = ZeusMonitor(system=system, log_file=tmp_path / "again.csv")
    assert monitor.system is system and not monitor.persist_power_limits
    assert device._current is None  # a system passed in is not made current
    with open(PROFILES / name) as f:
        logged = list(csv.DictReader(f))
    for row in logged:
        limit = float(row["window_name"].rsplit("_", 1)[1])
        for g in monitor.gpus:
            g.set_power_limit(limit)
        monitor.begin_window("w")
        for _ in range(steps // 2):  # one logged window, split over two calls
            system.step()
        system.step(steps - steps // 2)
        m = monitor.end_window("w")
        assert m.time == pytest.approx(float(row["elapsed_time"]))
        for i in monitor.gpu_indices:
            assert m.gpu_energy[i] == pytest.approx(float(row[f"gpu{i}_energy"]))
    # and the monitor's own log of the replay is a log of the same shape
    assert len((tmp_path / "again.csv").read_text().splitlines()) == len(logged) + 1


def test_use_replay_makes_the_log_current_and_writes_no_state_file(tmp_path, monkeypatch):
    import zeus_nb
    from zeus_nb import device
    from zeus_nb.monitor import ZeusMonitor

    monkeypatch.setenv("ZEUS_NB_STATE_DIR", str(tmp_path / "state"))
    name = "A40+resnet50+gpu0.csv"
    row = read_rows(name)[0]
    system = device.use_replay(PROFILES / name, steps_per_window=4)
    monitor = ZeusMonitor()
    assert monitor.system is system and device.current() is system
    monitor.begin_window("w")
    for _ in range(4):
        zeus_nb.step()
    m = monitor.end_window("w")
    assert (m.time, m.total_energy) == (pytest.approx(row.time), pytest.approx(row.energy))
    plo = GlobalPowerLimitOptimizer(monitor, Energy(), wait_steps=0, warmup_steps=0, verbose=False)
    plo.on_step_begin()  # sets the first limit: the guard records it, in memory only
    plo.close()
    assert not (tmp_path / "state").exists()


def test_replay_monitor_name_still_works_as_a_zeus_monitor():
    from zeus_nb.monitor import ZeusMonitor

    mon = ReplayMonitor(PROFILES / LOGS[0], steps_per_window=5)
    assert isinstance(mon, ZeusMonitor)
    row = read_rows(LOGS[0])[0]
    mon.begin_window("w")
    mon.step(5)
    assert mon.end_window("w").total_energy == pytest.approx(row.energy)


def test_replay_refuses_limits_the_log_lacks():
    mon = ReplayMonitor(PROFILES / LOGS[0])
    with pytest.raises(ValueError, match="no measurement at 290 W"):
        GlobalPowerLimitOptimizer(mon, pl_step=10, wait_steps=0, verbose=False)._enter(1)
    assert mon.gpus[0].name == "NVIDIA A40 (replay)"
    assert mon.gpus[0].power_limit_constraints() == (100.0, 300.0)


def test_a_limit_twice_in_a_run_is_refused_not_summed_and_bad_logs_are_refused(tmp_path):
    log = tmp_path / "log.csv"
    log.write_text(
        "start_time,window_name,elapsed_time,gpu0_energy\n"
        "0,__GlobalPowerLimitOptimizer_300,1.0,100\n"
        "1,other,5.0,999\n"
        "2,__GlobalPowerLimitOptimizer_300,2.0,200\n"
        "3,__GlobalPowerLimitOptimizer_200,4.0,250\n"
    )
    # pieces of one window (an older zeus-nb) or a restart: nothing tells, so never summed
    with pytest.raises(TraceFormatError, match="line 4: .*merge both into one row"):
        load_profile_log(log)
    log.write_text(
        "start_time,window_name,elapsed_time,gpu0_energy\n"
        "0,__GlobalPowerLimitOptimizer_300,1.0,100\n"
        "1,other,5.0,999\n"
        "3,__GlobalPowerLimitOptimizer_200,4.0,250\n"
    )
    parsed = load_profile_log(log)
    assert parsed.elapsed == {300.0: 1.0, 200.0: 4.0}
    assert parsed.energy[300.0] == {0: 100.0}
    bad = tmp_path / "bad.csv"
    for text in (
        "a,b,c\n",
        "start_time,window_name,elapsed_time\n",
        "start_time,window_name,elapsed_time,gpu0_energy\n0,__GlobalPowerLimitOptimizer_300,x,1\n",
    ):
        bad.write_text(text)
        with pytest.raises(TraceFormatError):
            load_profile_log(bad)


def test_cli_replay_table_and_json(capsys):
    name = str(PROFILES / "A40+resnet50+gpu0.csv")
    rows = read_rows("A40+resnet50+gpu0.csv")
    assert main(["plo", "replay", name, "--selector", "energy"]) == 0
    out = capsys.readouterr().out
    assert f"chosen power limit: {Energy().select(rows):g} W" in out
    assert "<- chosen" in out
    for selector, extra, sel in (
        ("time", [], Time()),
        ("zeus-cost", ["--eta", "0.25"], ZeusCost(0.25)),
        ("max-slowdown", ["--factor", "1.2"], MaxSlowdownConstraint(1.2)),
    ):
        for adaptive in ([], ["--adaptive"]):
            assert (
                main(["plo", "replay", name, "--selector", selector, "--json", *extra, *adaptive])
                == 0
            )
            data = json.loads(capsys.readouterr().out)
            assert data["power_limit"] == sel.select(rows)
            assert data["adaptive"] == bool(adaptive)


def test_cli_errors_exit_2(capsys, tmp_path):
    assert main(["plo", "replay", str(tmp_path / "missing.csv")]) == 2
    assert "no such ZeusMonitor log" in capsys.readouterr().err
    name = str(PROFILES / LOGS[0])
    with pytest.raises(SystemExit) as exit_:  # a usage error, before the log is read
        main(["plo", "replay", name, "--selector", "zeus-cost", "--eta", "2"])
    assert exit_.value.code == 2
    assert "argument --eta: '2' is out of range" in capsys.readouterr().err


def test_our_own_monitor_log_replays_to_the_same_choice(tmp_path, monkeypatch):
    monkeypatch.setenv("ZEUS_NB_STATE_DIR", str(tmp_path / "state"))
    import zeus_nb
    from zeus_nb import device
    from zeus_nb.monitor import ZeusMonitor

    device.use_simulated(workload="cifar100")
    log = tmp_path / "run.csv"
    plo = GlobalPowerLimitOptimizer(
        ZeusMonitor(log_file=log),
        Energy(),
        wait_steps=0,
        warmup_steps=1,
        profile_steps=5,
        adaptive=False,
        verbose=False,
        resume_across_epochs=True,
    )
    while not plo.done:  # 4-step epochs split windows into several logged rows
        plo.on_epoch_begin()
        for _ in range(4):
            plo.on_step_begin()
            zeus_nb.step()
            plo.on_step_end()
        plo.on_epoch_end()
    plo.close()
    replayed = replay_optimizer(log, Energy(), warmup_steps=1, profile_steps=5)
    assert replayed.optimal_power_limit == plo.optimal_power_limit
    for a, b in zip(replayed.measurements, plo.measurements, strict=True):
        assert a.time == pytest.approx(b.time) and a.energy == pytest.approx(b.energy)
