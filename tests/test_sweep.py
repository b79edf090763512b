"""Live sweeps: trace replay, resume after SIGKILL, power-limit restore, result files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import zeus_nb
from zeus_nb.data.traces import tta_eta
from zeus_nb.runner.sweep import (
    SweepResultsError,
    load_results,
    read_results,
    run_sweep,
    trace_train_fn,
)

REPO = Path(__file__).resolve().parents[1]
BATCHES, LIMITS = [64, 128, 256, 360], [100, 175, 250]


def test_trace_replay_reproduces_traced_tta_and_eta(tmp_path):
    zeus_nb.use_simulated("v100", workload="imagenet")
    df = run_sweep(
        trace_train_fn("imagenet", run=2),
        BATCHES,
        LIMITS,
        workload="imagenet",
        results_path=tmp_path / "r.jsonl",
        progress=False,
    )
    traced = tta_eta("imagenet", "v100", per_run=True)
    traced = traced[traced["run"] == 2].set_index(["batch_size", "power_limit"])
    assert len(df) == len(BATCHES) * len(LIMITS)
    for r in df.itertuples():
        t = traced.loc[(r.batch_size, r.power_limit)]
        assert r.reached == bool(t["reached"])
        if r.reached:
            assert r.epochs == t["target_epoch"]
            assert r.tta == pytest.approx(t["tta"], rel=1e-9)
            assert r.eta == pytest.approx(t["eta"], rel=1e-9)
        else:
            assert r.epochs == 100 and r.eta != r.eta  # NaN: never reached


def test_lower_is_better_metric_stops_at_the_recorded_epoch(tmp_path):
    zeus_nb.use_simulated("v100", workload="librispeech")
    df = run_sweep(
        trace_train_fn("librispeech", run=1),
        [32],
        [150],
        workload="librispeech",
        results_path=tmp_path / "r.jsonl",
        progress=False,
    )
    traced = tta_eta("librispeech", "v100", per_run=True)
    row = traced[
        (traced["run"] == 1) & (traced["batch_size"] == 32) & (traced["power_limit"] == 150)
    ]
    assert df["epochs"].iloc[0] == row["target_epoch"].iloc[0]
    assert df["metric"].iloc[0] <= 40.0


def test_power_limits_are_restored_also_on_errors(tmp_path):
    system = zeus_nb.use_simulated("v100", workload="imagenet", num_gpus=2)
    for g in system.gpus:
        g.set_power_limit(200)
    seen = []

    def failing(batch_size, epoch):
        seen.append([g.get_power_limit() for g in system.gpus])
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        run_sweep(
            failing,
            [128],
            [125],
            target_metric=0.5,
            max_epochs=3,
            results_path=tmp_path / "r.jsonl",
            progress=False,
        )
    assert seen == [[125.0, 125.0]]
    assert [g.get_power_limit() for g in system.gpus] == [200.0, 200.0]
    assert read_results(tmp_path / "r.jsonl") == []


def test_fake_nvml_limits_restored(tmp_path, fake_nvml):
    import time

    # A counter read advances the energy by power x read interval: an epoch of about that
    # interval keeps the measured power physical, so the results file reads back.
    for i in range(2):
        fake_nvml.set_device(i, read_interval_s=0.05)
    before = fake_nvml.limits_w()
    calls = []

    def fn(batch_size, epoch):
        calls.append(fake_nvml.limits_w())
        time.sleep(0.05)
        return 1.0

    df = run_sweep(
        fn,
        [8],
        [150, 200],
        target_metric=0.5,
        max_epochs=2,
        results_path=tmp_path / "r.jsonl",
        progress=False,
    )
    assert calls == [[150.0, 150.0], [200.0, 200.0]]
    assert fake_nvml.limits_w() == before
    assert df["reached"].all() and (df["epochs"] == 1).all()


def test_no_permission_changes_nothing(tmp_path, fake_nvml):
    from zeus_nb.errors import PowerLimitPermissionError

    before = fake_nvml.limits_w()
    fake_nvml.set_device(1, set_error="NoPermission")
    with pytest.raises(PowerLimitPermissionError):
        run_sweep(
            lambda b, e: 1.0,
            [8],
            [150],
            target_metric=0.5,
            max_epochs=2,
            results_path=tmp_path / "r.jsonl",
            progress=False,
        )
    assert fake_nvml.limits_w() == before
    assert read_results(tmp_path / "r.jsonl") == []


def test_bad_inputs_are_refused_before_anything_runs(tmp_path):
    zeus_nb.use_simulated("v100", workload="imagenet")
    fn = trace_train_fn("imagenet")
    with pytest.raises(ValueError, match="outside"):
        run_sweep(
            fn, [128], [400], workload="imagenet", results_path=tmp_path / "a", progress=False
        )
    with pytest.raises(ValueError, match="target_metric"):
        run_sweep(fn, [128], [150], results_path=tmp_path / "b", progress=False)
    with pytest.raises(ValueError, match="no run 1 of imagenet at batch size 100"):
        run_sweep(
            fn, [100], [150], workload="imagenet", results_path=tmp_path / "c", progress=False
        )
    other = tmp_path / "other.jsonl"
    run_sweep(fn, [128], [150], workload="imagenet", results_path=other, progress=False)
    with pytest.raises(SweepResultsError, match="another results_path"):
        run_sweep(
            fn, [128], [150], target_metric=0.6, max_epochs=100, results_path=other, progress=False
        )
    (tmp_path / "junk").write_text("hello\n")
    with pytest.raises(SweepResultsError, match="line 1"):
        load_results(tmp_path / "junk")


CHILD = textwrap.dedent(
    """
    import os, signal, sys
    import zeus_nb
    from zeus_nb.runner.sweep import run_sweep, trace_train_fn

    zeus_nb.use_simulated("v100", workload="imagenet")
    inner = trace_train_fn("imagenet", run=1)
    calls = {"n": 0}
    kill_at = int(os.environ.get("KILL_AT_CALL", "0"))

    def train_fn(batch_size, epoch):
        calls["n"] += 1
        if calls["n"] == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return inner(batch_size, epoch)

    run_sweep(train_fn, [64, 128, 256, 360], [100, 175, 250], workload="imagenet",
              results_path=sys.argv[1], progress=True)
    """
)


def test_sweep_killed_midway_resumes_with_every_configuration_once(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    results = tmp_path / "results.jsonl"
    env = dict(os.environ, PYTHONPATH=str(REPO), ZEUS_NB_BACKEND="sim")
    # 3 unreached configurations of 100 epochs each, then 32-epoch ones: call 320 is mid-config.
    killed = subprocess.run(
        [sys.executable, str(script), str(results)],
        env=dict(env, KILL_AT_CALL="320"),
        capture_output=True,
        timeout=120,
    )
    assert killed.returncode == -signal.SIGKILL
    first = read_results(results)
    assert 0 < len(first) < 12
    # A half-written line, as a kill during a write could leave.
    with results.open("a") as f:
        f.write('{"batch_size": 999, "power_li')
    resumed = subprocess.run(
        [sys.executable, str(script), str(results)], env=env, capture_output=True, timeout=120
    )
    assert resumed.returncode == 0, resumed.stderr.decode()[-2000:]
    records = read_results(results)
    keys = [(r["batch_size"], r["power_limit"]) for r in records]
    assert sorted(keys) == sorted((b, float(p)) for b in BATCHES for p in LIMITS)
    assert records[: len(first)] == first  # nothing finished was lost or rewritten
    assert results.read_text().endswith("\n")
    assert all(json.loads(line) for line in results.read_text().splitlines())
    # The resumed results equal an uninterrupted sweep's.
    zeus_nb.use_simulated("v100", workload="imagenet")
    clean = run_sweep(
        trace_train_fn("imagenet", run=1),
        BATCHES,
        LIMITS,
        workload="imagenet",
        results_path=tmp_path / "clean.jsonl",
        progress=False,
    )
    both = load_results(results)
    cols = ["batch_size", "power_limit", "epochs", "reached"]
    assert both[cols].equals(clean[cols])
    for col in ("time", "energy"):  # the virtual clock restarts at 0: tiny rounding differences
        assert both[col].to_numpy() == pytest.approx(clean[col].to_numpy(), rel=1e-9)


def test_live_torch_sweep_charges_each_step_on_the_simulated_gpu(tmp_path):
    torch = pytest.importorskip("torch")
    from zeus_nb.train.sweep_fn import synthetic_images, torch_train_fn

    train, val = synthetic_images(200, num_classes=4, image_size=8, noise=0.6, seed=1)
    fn = torch_train_fn(
        lambda: torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 8 * 8, 4)),
        train,
        val,
    )
    system = zeus_nb.use_simulated("v100", workload="cifar100")
    df = run_sweep(
        fn,
        [32, 64],
        [100, 250],
        target_metric=0.9,
        max_epochs=4,
        results_path=tmp_path / "live.jsonl",
        progress=False,
    )
    assert len(df) == 4 and df["metric"].between(0, 1).all()
    for r in df.itertuples():
        steps = -(-len(train) // r.batch_size) * r.epochs
        t_step, watts = system.step_cost(r.batch_size, r.power_limit)
        assert r.time == pytest.approx(steps * t_step)
        assert r.energy == pytest.approx(steps * t_step * watts)
    assert df["reached"].any()


def test_a_training_set_is_repeated_until_an_epoch_spans_the_counter():
    """An epoch costs a fixed part (validation, the loader) plus a part per sample: the copies
    are timed again until an epoch lasts long enough, not scaled once from the first timing."""
    pytest.importorskip("torch")
    from zeus_nb.train.sweep_fn import repeated_to_span

    clock = {"now": 0.0}

    def make(data):
        def train_fn(batch_size, epoch):
            clock["now"] += 0.02 + 0.0001 * len(data)  # 20 ms fixed, 0.1 ms a sample
            return 0.5

        return train_fn

    data, copies = repeated_to_span(make, list(range(100)), 32, 0.3, lambda: clock["now"])
    assert len(data) == 100 * copies
    assert 0.02 + 0.0001 * len(data) >= 0.3  # an epoch of it lasts the time asked
    once = repeated_to_span(make, list(range(5000)), 32, 0.3, lambda: clock["now"])
    assert once[1] == 1  # long enough already
