"""run_sweep on real Dask workers: a killed worker and an interrupted client lose nothing."""

from __future__ import annotations

import _thread
import threading
import time
from collections import Counter

import pandas as pd
import pytest
from cluster_tasks import SleepyTrain, lines
from dask_fixture import dask_processes  # noqa: F401 (a fixture)

from zeus_nb import device
from zeus_nb.runner.points import SweepPointsFailed
from zeus_nb.runner.sweep import read_results, run_sweep

pytestmark = pytest.mark.slow
BATCH_SIZES = [64, 128, 256]
LIMITS = [175.0, 250.0]


def _expected(bs: int, pl: float) -> tuple[float, float]:
    """Time and energy of one point from the simulator's trace values, without a sweep."""
    sim = device.create("sim")
    t_step, watts = sim.step_cost(bs, pl)
    n = SleepyTrain.steps * SleepyTrain.epochs_to_target
    return n * t_step, n * t_step * watts


def _watch(log, results, dask_processes):  # noqa: F811
    """Kill worker 0 once both workers train; Ctrl-C the client after 3 finished points."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len({ln.split()[2] for ln in lines(log)}) < 2:
        time.sleep(0.05)
    dask_processes.kill_worker(0)
    while time.monotonic() < deadline and len(lines(results)) < 3:
        time.sleep(0.05)
    _thread.interrupt_main()


def test_killed_worker_and_ctrl_c_then_resume_give_each_point_once(
    dask_processes,  # noqa: F811
    tmp_path,
    monkeypatch,
):
    monkeypatch.setenv("ZEUS_NB_BACKEND", "sim")
    device.use_simulated("a40", "imagenet")
    log, results = tmp_path / "epochs.log", tmp_path / "results.jsonl"
    train = SleepyTrain(str(log), seconds=0.4)
    kw = dict(results_path=results, target_metric=1.0, max_epochs=4, progress=False)
    watcher = threading.Thread(target=_watch, args=(log, results, dask_processes), daemon=True)
    watcher.start()
    with pytest.raises(KeyboardInterrupt):
        run_sweep(train, BATCH_SIZES, LIMITS, executor=dask_processes.address, **kw)
        time.sleep(60)  # the sweep ended before the interrupt arrived: fail below, not hang
    watcher.join(10)
    first = [(r["batch_size"], r["power_limit"]) for r in read_results(results)]
    assert 3 <= len(first) < 6 and len(set(first)) == len(first)
    started_before = len(lines(log))

    df = run_sweep(train, BATCH_SIZES, LIMITS, executor=dask_processes.address, **kw)
    rows = read_results(results)
    keys = [(r["batch_size"], r["power_limit"]) for r in rows]
    assert Counter(keys) == Counter((b, p) for b in BATCH_SIZES for p in LIMITS)  # each once
    assert keys[: len(first)] == first
    # The resumed run trained only the missing points (2 epochs each).
    assert len(lines(log)) - started_before == 2 * (6 - len(first))
    for r in df.itertuples():
        t, e = _expected(r.batch_size, r.power_limit)
        assert r.reached and r.epochs == 2
        assert r.time == pytest.approx(t, rel=1e-9) and r.energy == pytest.approx(e, rel=1e-9)


def test_local_workers_match_the_serial_sweep(tmp_path, monkeypatch):
    monkeypatch.setenv("ZEUS_NB_BACKEND", "sim")
    device.use_simulated("a40", "imagenet")
    kw = dict(target_metric=1.0, max_epochs=4, progress=False)
    train = SleepyTrain(str(tmp_path / "log"), seconds=0.0)
    serial = run_sweep(train, [64, 256], LIMITS, results_path=tmp_path / "a.jsonl", **kw)
    parallel = run_sweep(
        train, [64, 256], LIMITS, results_path=tmp_path / "b.jsonl", executor=2, **kw
    )
    cols = ["batch_size", "power_limit", "epochs", "reached", "time", "energy"]
    # Equal up to rounding: the serial sweep's virtual clock runs on across configurations.
    pd.testing.assert_frame_equal(parallel[cols], serial[cols], rtol=1e-9)


def test_a_limit_the_simulated_gpu_lacks_is_refused_before_any_work(tmp_path, monkeypatch):
    monkeypatch.setenv("ZEUS_NB_BACKEND", "sim")
    device.use_simulated("a40", "imagenet")
    with pytest.raises(ValueError, match="power limit"):
        run_sweep(
            SleepyTrain(str(tmp_path / "log")),
            [64],
            [1000.0],
            results_path=tmp_path / "r.jsonl",
            target_metric=1.0,
            max_epochs=2,
            executor=1,
            progress=False,
        )
    assert not (tmp_path / "log").exists()


def test_a_failing_configuration_is_reported_after_the_others(tmp_path, monkeypatch):
    monkeypatch.setenv("ZEUS_NB_BACKEND", "sim")
    device.use_simulated("a40", "imagenet")
    train = SleepyTrain(str(tmp_path / "log"), seconds=0.0)
    with pytest.raises(SweepPointsFailed, match="batch_size=100") as e:
        # 100 is not a traced batch size: the simulator refuses to step it.
        run_sweep(
            train,
            [64, 100],
            [250.0],
            results_path=tmp_path / "r.jsonl",
            target_metric=1.0,
            max_epochs=2,
            executor=1,
            progress=False,
        )
    assert "run the sweep again" in str(e.value)
    assert [r["batch_size"] for r in read_results(tmp_path / "r.jsonl")] == [64]
