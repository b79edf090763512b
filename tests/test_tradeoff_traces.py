"""TTA/ETA, Pareto front and potential savings against the raw traces and the published figures.

Published numbers asserted here (Zeus, NSDI '23, V100 potential-savings figure and DeepSpeech2
tradeoff): ResNet-50 best of both 0.762 at (360, 150 W); ShuffleNet V2 0.253 at (128, 100 W);
DeepSpeech2 Pareto front from (48, 250 W) to (32, 100 W). The other ratios are checked against an
independent recomputation from the CSV files with the csv module.
"""

from __future__ import annotations

import csv
import json
import math
import random
from collections import defaultdict

import pandas as pd
import pytest

from zeus_nb.cli import main
from zeus_nb.data.traces import (
    WORKLOADS,
    default_batch_size,
    load_power_trace,
    resource_path,
    target_epochs,
    tta_eta,
)
from zeus_nb.errors import TraceFormatError
from zeus_nb.tradeoff import min_cost, pareto_front, potential_savings


def _raw(name: str) -> list[dict[str, str]]:
    with resource_path("zeus_traces", name).open(newline="") as f:
        return list(csv.DictReader(f))


def _oracle_savings(gpu: str) -> dict[str, tuple[float, float, float, int, float]]:
    """Recompute the savings table with plain Python from the bundled CSV files."""
    power = _raw(f"summary_power_{gpu}.csv")
    train = _raw("summary_train.csv")
    out = {}
    for ds, wl in WORKLOADS.items():
        epochs: dict[int, list[float]] = defaultdict(list)
        for r in train:
            if (r["dataset"], r["network"], r["optimizer"]) != wl.key:
                continue
            if abs(float(r["target_metric"]) - wl.target_metric) > 1e-9:
                continue
            e = float(r["target_epoch"]) if r["target_epoch"] not in ("", "nan") else math.nan
            epochs[int(r["batch_size"])].append(e if e <= wl.max_epochs else math.nan)
        eta = {}
        for r in power:
            if (r["dataset"], r["network"], r["optimizer"]) != wl.key:
                continue
            bs, pl = int(r["batch_size"]), float(r["power_limit"])
            runs = epochs.get(bs)
            if not runs or any(math.isnan(e) for e in runs):
                continue
            mean = sum(runs) / len(runs)
            eta[bs, pl] = mean * float(r["time_per_epoch"]) * float(r["average_power"])
        sizes = sorted({int(r["batch_size"]) for r in power if r["dataset"] == ds})
        b0 = max(b for b in sizes if b <= wl.default_batch_size)
        top = max(pl for _, pl in eta)
        base = eta[b0, top]
        best_bs = min(v for (b, p), v in eta.items() if p == top) / base
        best_pl = min(v for (b, p), v in eta.items() if b == b0) / base
        (ob, op), best = min(eta.items(), key=lambda kv: kv[1])
        out[ds] = (best_bs, best_pl, best / base, ob, op)
    return out


def test_per_run_tta_eta_follow_the_definition():
    per_run = tta_eta("imagenet", "v100", per_run=True)
    power = {
        (int(r["batch_size"]), float(r["power_limit"])): r
        for r in _raw("summary_power_v100.csv")
        if r["dataset"] == "imagenet"
    }
    row = per_run[per_run["reached"]].iloc[7]
    p = power[int(row["batch_size"]), float(row["power_limit"])]
    tta = row["target_epoch"] * float(p["time_per_epoch"])
    assert row["tta"] == pytest.approx(tta)
    assert row["eta"] == pytest.approx(tta * float(p["average_power"]))


def test_average_is_over_all_runs_and_partial_configurations_are_flagged():
    table = tta_eta("movielens-1m", "v100")
    partial = table[table["batch_size"] == 32]
    assert (partial["runs"] == 5).all() and (partial["runs_reached"] == 1).all()
    assert not partial["reached"].any() and partial["eta"].isna().all()
    full = table[table["reached"]]
    assert not full.empty and full["eta"].notna().all()
    runs = target_epochs("movielens-1m")
    r = full.iloc[0]
    mean = runs[runs["batch_size"] == r["batch_size"]]["target_epoch"].mean()
    assert r["tta"] == pytest.approx(mean * r["time_per_epoch"])


def test_target_reached_after_max_epochs_counts_as_not_reached():
    capped = target_epochs("cifar100")
    uncapped = target_epochs("cifar100", max_epochs=1000)
    late = uncapped["target_epoch"] > WORKLOADS["cifar100"].max_epochs
    assert late.any()
    assert not capped.loc[late, "reached"].any()


def test_unknown_target_metric_lists_the_recorded_ones():
    with pytest.raises(ValueError, match="choose one of"):
        tta_eta("imagenet", "v100", target_metric=0.123)


def test_default_batch_size_is_clipped_to_the_power_trace():
    trace = load_power_trace("v100")
    assert WORKLOADS["librispeech"].default_batch_size == 256
    assert default_batch_size("librispeech", trace) == 192
    assert default_batch_size("imagenet", trace) == 256


def test_published_v100_savings():
    table = potential_savings("v100").set_index("workload")
    r = table.loc["imagenet"]
    assert round(r["best_both_ratio"], 3) == 0.762
    assert (r["optimal_batch_size"], r["optimal_power_limit"]) == (360, 150)
    r = table.loc["cifar100"]
    assert round(r["best_both_ratio"], 3) == 0.253
    assert (r["optimal_batch_size"], r["optimal_power_limit"]) == (128, 100)


@pytest.mark.parametrize("gpu", ["v100", "a40"])
def test_savings_match_an_independent_recomputation(gpu):
    table = potential_savings(gpu).set_index("workload")
    oracle = _oracle_savings(gpu)
    assert sorted(table.index) == sorted(oracle)
    for ds, (bs_ratio, pl_ratio, both, ob, op) in oracle.items():
        r = table.loc[ds]
        assert round(r["best_batch_size_ratio"], 3) == round(bs_ratio, 3)
        assert round(r["best_power_limit_ratio"], 3) == round(pl_ratio, 3)
        assert round(r["best_both_ratio"], 3) == round(both, 3)
        assert (r["optimal_batch_size"], r["optimal_power_limit"]) == (ob, op)
        assert r["best_both_ratio"] <= min(r["best_batch_size_ratio"], r["best_power_limit_ratio"])


def test_published_deepspeech2_pareto_front():
    front = pareto_front(tta_eta("librispeech", "v100"))
    ends = [tuple(front.iloc[i][["batch_size", "power_limit"]]) for i in (0, -1)]
    assert ends == [(48, 250), (32, 100)]
    assert front["tta"].is_monotonic_increasing
    assert front["eta"].is_monotonic_decreasing


def test_pareto_front_equals_brute_force():
    rng = random.Random(3)
    pts = pd.DataFrame(
        {
            "tta": [rng.randint(1, 30) for _ in range(60)],
            "eta": [rng.randint(1, 30) for _ in range(60)],
        }
    )
    pts.loc[5, "eta"] = math.nan
    front = pareto_front(pts)
    ok = pts.dropna()
    expected = {
        (t, e)
        for t, e in zip(ok["tta"], ok["eta"], strict=True)
        if not any(
            (t2 <= t and e2 <= e) and (t2, e2) != (t, e)
            for t2, e2 in zip(ok["tta"], ok["eta"], strict=True)
        )
    }
    assert set(zip(front["tta"], front["eta"], strict=True)) == expected
    assert len(front) == len(expected)


def test_min_cost_trades_time_for_energy():
    table = tta_eta("librispeech", "v100")
    energy = min_cost(table, eta_knob=1.0)
    speed = min_cost(table, eta_knob=0.0)
    assert energy["eta"] == table["eta"].min()
    assert speed["tta"] == table["tta"].min()


def test_cli_savings_json(capsys):
    assert main(["tradeoff", "savings", "--gpu", "v100", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [set(o) for o in out] == [
        {
            "workload",
            "best_batch_size_ratio",
            "best_power_limit_ratio",
            "best_both_ratio",
            "optimal_batch_size",
            "optimal_power_limit",
        }
    ] * 6
    resnet = next(o for o in out if o["workload"] == "imagenet")
    assert round(resnet["best_both_ratio"], 3) == 0.762
    assert main(["tradeoff", "savings", "--gpu", "a40"]) == 0
    assert "librispeech" in capsys.readouterr().out


def test_cli_pareto_json_and_user_trace(tmp_path, capsys):
    assert main(["tradeoff", "pareto", "--workload", "librispeech", "--gpu", "v100", "--json"]) == 0
    front = json.loads(capsys.readouterr().out)
    assert (front[0]["batch_size"], front[0]["power_limit"]) == (48, 250)
    assert set(front[0]) == {"batch_size", "power_limit", "tta", "eta"}
    csv_path = tmp_path / "mygpu.csv"
    load_power_trace("v100").to_csv(csv_path, index=False)
    assert main(["tradeoff", "pareto", "--workload", "librispeech", "--gpu", str(csv_path)]) == 0
    assert "48" in capsys.readouterr().out


def test_cli_bad_trace_exits_2_naming_the_row(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    lines = resource_path("zeus_traces", "summary_power_v100.csv").read_text().splitlines()
    cells = lines[3].split(",")
    cells[5] = "fast"
    lines[3] = ",".join(cells)
    bad.write_text("\n".join(lines) + "\n")
    assert main(["tradeoff", "savings", "--gpu", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "line 4, column time_per_epoch" in err and "Traceback" not in err
    with pytest.raises(TraceFormatError):
        potential_savings(str(bad))


def test_savings_of_a_trace_without_known_workloads(tmp_path):
    trace = load_power_trace("a40")
    trace["dataset"] = "my-" + trace["dataset"]
    path = tmp_path / "other.csv"
    trace.to_csv(path, index=False)
    with pytest.raises(ValueError, match="none of the traced workloads"):
        potential_savings(str(path))
