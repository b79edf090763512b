"""The trace-driven simulation of the batch-size optimizer, its CLI and its plots."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from zeus_nb.cli import main
from zeus_nb.data.traces import load_power_trace, load_train_trace
from zeus_nb.optimizer.batch_size import PaperBatchSizeOptimizer
from zeus_nb.optimizer.batch_size.simulator import simulate, workload_model


@pytest.fixture(scope="module")
def imagenet():
    return workload_model("imagenet", "v100", 0.5)


def test_model_reads_the_traces(imagenet):
    power = load_power_trace("v100")
    train = load_train_trace()
    # batch sizes present in both traces for this workload
    p = set(power[power["dataset"] == "imagenet"]["batch_size"])
    t = set(
        train[(train["dataset"] == "imagenet") & (train["target_metric"] == 0.65)]["batch_size"]
    )
    assert imagenet.batch_sizes == sorted(p & t)
    assert imagenet.max_power == power["power_limit"].max()
    assert imagenet.num_recurrences() == 2 * len(p & t) * 7
    arm = imagenet.arms[256]
    row = power[
        (power["dataset"] == "imagenet")
        & (power["batch_size"] == 256)
        & (power["power_limit"] == 175)
    ].iloc[0]
    i = list(arm.power_limits).index(175)
    assert arm.epoch_energy[i] == pytest.approx(row["time_per_epoch"] * row["average_power"])
    assert imagenet.jit_power_limit(256) == arm.power_limits[np.argmin(imagenet.epoch_cost(256))]


def test_default_batch_size_missing_from_a_gpu_trace_falls_back_to_the_nearest():
    m = workload_model("librispeech", "v100")
    assert 256 not in m.batch_sizes
    assert m.default_batch_size == 192
    with pytest.raises(ValueError, match="choose one of"):
        workload_model("librispeech", "v100", default_batch_size=256)


def test_history_accounts_for_every_run(imagenet):
    r = simulate(imagenet, seed=4)
    h = r.history
    assert r.recurrences == imagenet.num_recurrences()
    assert sorted(h["recurrence"].unique()) == list(range(r.recurrences))
    # each recurrence ends with its first successful run
    last = h.groupby("recurrence").tail(1)
    assert last["reached"].all()
    assert (h.groupby("recurrence")["reached"].sum() == 1).all()
    # energy and time come from the power trace at the JIT limit (profiled runs: a bit more)
    for row in h[~h["profiled"] & (h["epochs"] > 0)].itertuples():
        arm = imagenet.arms[row.batch_size]
        assert row.power_limit == imagenet.jit_power_limit(row.batch_size)
        assert row.energy == pytest.approx(row.epochs * arm.epoch_energy[arm.best])
    # each batch size is profiled once, on its first run
    prof = h[h["profiled"]]
    assert prof["batch_size"].is_unique
    first = h.drop_duplicates("batch_size")
    assert set(prof.index) == set(first.index[first["epochs"] > 0])
    assert r.optimizer.num_observations == len(h)


def test_early_stopping_caps_failed_runs_at_beta_times_best(imagenet):
    r = simulate(imagenet, seed=1, beta=2.0)
    h = r.history
    stopped = h[h["stopped_early"]]
    assert not stopped.empty  # batch size 64 never reaches the target on ImageNet
    for row in stopped.itertuples():
        earlier = h.loc[: row.Index - 1]
        best = earlier.loc[earlier["reached"], "cost"].min()
        assert row.cost <= 2.0 * best + 1e-6
        assert not row.reached
    off = simulate(imagenet, seed=1, beta=math.inf)
    assert not off.history["stopped_early"].any()
    failed = off.history[~off.history["reached"]]
    assert (failed["epochs"] == imagenet.max_epochs).all()
    # the same failure costs more without early stopping
    assert failed["energy"].max() > stopped["energy"].max()


def test_simulation_is_deterministic_under_a_seed(imagenet):
    a, b = simulate(imagenet, seed=7), simulate(imagenet, seed=7)
    pd.testing.assert_frame_equal(a.history, b.history)
    others = [simulate(imagenet, seed=s).history for s in (8, 9)]
    assert any(not o.equals(a.history) for o in others)


def test_savings_are_measured_against_the_default_at_the_highest_limit(imagenet):
    r = simulate(imagenet, seed=2)
    arm = imagenet.arms[256]
    base = np.nanmean(arm.target_epochs) * arm.epoch_energy[-1]
    assert r.baseline_energy == pytest.approx(base)
    total = r.history["energy"].sum()
    assert r.cumulative_saving == pytest.approx(1 - total / (r.recurrences * base))
    s = r.summary()
    assert s["converged_batch_size"] == r.history.iloc[-1]["batch_size"]
    assert 0 < s["cumulative_saving"] < 1


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown workload"):
        simulate("mnist")
    with pytest.raises(ValueError, match="recurrences"):
        simulate("squad", recurrences=0)


def test_cli_simulate_json(capsys):
    assert main(["bso", "simulate", "--workload", "squad", "--recurrences", "12", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["summary"]["recurrences"] == 12
    assert out["summary"]["workload"] == "squad"
    assert {r["recurrence"] for r in out["runs"]} == set(range(12))
    recs = out["recurrences"]
    assert [r["recurrence"] for r in recs] == list(range(12))
    assert sum(r["attempts"] for r in recs) == len(out["runs"])
    assert all(r["reached"] for r in recs)
    assert out["runs"][0]["batch_size"] == 32  # the default goes first
    assert (out["summary"]["policy"], out["summary"]["accounting"]) == ("zeus-nb", "step")
    # the published policy on the same seed and runs
    argv = ["bso", "simulate", "--workload", "squad", "--policy", "paper", "--json"]
    assert main(argv) == 0
    paper = json.loads(capsys.readouterr().out)["summary"]
    again = simulate("squad", seed=1, optimizer=PaperBatchSizeOptimizer).summary()
    assert paper["policy"] == "paper"
    assert paper["cumulative_saving"] == pytest.approx(again["cumulative_saving"])


def test_cli_simulate_table_and_errors(capsys):
    assert main(["bso", "simulate", "--workload", "imagenet", "--seed", "3", "--beta", "inf"]) == 0
    out = capsys.readouterr().out
    assert "imagenet on v100" in out and "converged to batch size" in out
    assert main(["bso", "simulate", "--workload", "nope"]) == 2
    assert "unknown workload" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:  # a usage error, at parse time
        main(["bso", "simulate", "--workload", "squad", "--eta", "3"])
    assert exit_.value.code == 2
    assert "argument --eta: '3' is out of range" in capsys.readouterr().err


def test_cli_show(tmp_path, capsys):
    from zeus_nb.optimizer.batch_size import BatchSizeOptimizer

    db = tmp_path / "s.sqlite3"
    bso = BatchSizeOptimizer("j", db, batch_sizes=[8, 16], default_batch_size=16, max_power=9.0)
    bso.report(16, time=1.0, energy=2.0, reached=True)
    bso.set_power_limit(16, 150)
    assert main(["bso", "show", "--store", str(db)]) == 0
    assert "  j" in capsys.readouterr().out
    assert main(["bso", "show", "j", "--store", str(db), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["observations"] == 1 and out["next_batch_size"] == 8
    assert out["power_limits"] == {"16": 150.0}
    assert main(["bso", "show", "missing", "--store", str(db)]) == 2


def test_plots(tmp_path, imagenet):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from zeus_nb.plots import bso_costs, bso_posterior

    r = simulate(imagenet, seed=1, recurrences=20)
    fig = bso_costs(r, path=tmp_path / "costs.png")
    assert isinstance(fig, Figure) and (tmp_path / "costs.png").stat().st_size > 0
    # bars: one per recurrence, on a linear axis from zero (a bar's length is its cost)
    assert len(fig.axes[0].patches) == 20
    assert fig.axes[0].get_yscale() == "linear" and fig.axes[0].get_ylim()[0] == 0
    fig = bso_posterior(r, path=tmp_path / "post.svg")
    assert isinstance(fig, Figure) and (tmp_path / "post.svg").exists()
    probs = [p.get_height() for p in fig.axes[1].patches]
    assert sum(probs) == pytest.approx(1.0)
    fig = bso_costs(r.optimizer)  # one bar per reported run
    assert len(fig.axes[0].patches) == r.optimizer.num_observations
    with pytest.raises(ValueError, match="png or .svg|.png or .svg"):
        bso_costs(r, path=tmp_path / "x.jpg")


@pytest.mark.parametrize("profile", [True, False])
def test_a_run_that_cannot_afford_one_epoch_is_charged_up_to_the_threshold(imagenet, profile):
    from zeus_nb.optimizer.batch_size.simulator import _run

    arm = imagenet.arms[128]
    per_epoch = float(imagenet.epoch_cost(128)[arm.best])
    threshold = 0.3037 * per_epoch  # not a whole number of steps
    epochs, t, e, reached, stopped = _run(imagenet, arm, 30.0, threshold, profile, 50)
    assert (epochs, reached, stopped) == (0, False, True)
    cost = imagenet.eta * e + (1 - imagenet.eta) * imagenet.max_power * t
    # stopped at the first step past the threshold: over it by less than one step's cost
    step = float(imagenet.epoch_cost(128).max()) / arm.steps_per_epoch
    assert threshold < cost <= threshold + step
    # an affordable run still stops at an epoch boundary below the threshold
    epochs, t, e, reached, stopped = _run(imagenet, arm, 30.0, 3.5 * per_epoch, profile, 50)
    assert (epochs, reached, stopped) == (3, False, True)


def test_epoch_accounting_charges_whole_epochs(imagenet):
    """The original Zeus simulator's rules: profile over a whole first epoch, skip unaffordable
    runs at no cost, stop before an epoch would pass beta x the cheapest recurrence."""
    from zeus_nb.optimizer.batch_size.simulator import run_by_epochs

    arm = imagenet.arms[128]
    b = arm.best
    per_epoch = float(imagenet.epoch_cost(128)[b])
    # a profiled run spends its first epoch evenly at every limit, then runs at the best one
    epochs, t, e, reached, stopped = run_by_epochs(imagenet, arm, 5.0, math.inf, True)
    assert (epochs, reached, stopped) == (5, True, False)
    assert e == pytest.approx(arm.epoch_energy.mean() + 4 * arm.epoch_energy[b])
    assert t == pytest.approx(arm.epoch_time.mean() + 4 * arm.epoch_time[b])
    # whole epochs up to the threshold, then stopped
    assert run_by_epochs(imagenet, arm, 30.0, 3.5 * per_epoch, False)[:1] == (3,)
    assert run_by_epochs(imagenet, arm, 30.0, 3.5 * per_epoch, False)[3:] == (False, True)
    # cannot afford one epoch: not started, costs nothing
    assert run_by_epochs(imagenet, arm, 30.0, 0.9 * per_epoch, False) == (0, 0.0, 0.0, False, True)

    r = simulate(imagenet, seed=1, accounting="epoch")
    h = r.history
    best = math.inf  # the cheapest recurrence so far, all its runs summed
    stopped_runs = 0
    for _, rec in h.groupby("recurrence"):
        for row in rec.itertuples():
            if row.stopped_early:
                stopped_runs += 1
                # whole epochs at the best limit that fit under the threshold, not one more
                c = float(imagenet.epoch_cost(row.batch_size)[imagenet.arms[row.batch_size].best])
                assert row.epochs * c <= 2.0 * best < (row.epochs + 1) * c
        best = min(best, rec["cost"].sum())
    assert stopped_runs > 0
    assert r.cumulative_saving != simulate(imagenet, seed=1).cumulative_saving
    with pytest.raises(ValueError, match="accounting must be one of"):
        simulate(imagenet, accounting="hours")
    assert main(["bso", "simulate", "--workload", "imagenet", "--accounting", "epoch"]) == 0


def test_benchmark_json_lines_are_the_simulated_means(capsys):
    """bench_bso.py --json: one line per workload; its figures are the simulator's own means."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_bso.py"
    spec = importlib.util.spec_from_file_location("bench_bso", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--json", "--seeds", "2", "--first-seed", "7"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["workload"] for r in rows] == list(bench.WORKLOADS)
    for key in ("cumulative_saving", "last10_saving", "converged_batch_size", "seconds"):
        assert all(key in r for r in rows)
    squad = rows[bench.WORKLOADS.index("squad")]
    assert squad["seeds"] == 2 and squad["accounting"] == "epoch"
    runs = [simulate("squad", "v100", seed=s, accounting="epoch") for s in (7, 8)]
    paper = [
        simulate("squad", "v100", seed=s, accounting="epoch", optimizer=PaperBatchSizeOptimizer)
        for s in (7, 8)
    ]
    ours = [r.cumulative_saving for r in runs]
    theirs = [r.cumulative_saving for r in paper]
    assert squad["cumulative_saving"] == pytest.approx(np.mean(ours))
    assert squad["last10_saving"] == pytest.approx(np.mean([r.last_saving(10) for r in runs]))
    assert squad["paper_policy_saving"] == pytest.approx(np.mean(theirs))
    assert squad["vs_paper_policy"] == pytest.approx(np.mean(ours) - np.mean(theirs))
    assert ours != theirs  # two policies, not one run twice
    with pytest.raises(SystemExit):
        bench.main(["--seeds", "0"])
