"""benchmarks/bench_perseus.py prints the figures it promises, one JSON line per case."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location(
        "bench_perseus", REPO / "benchmarks" / "bench_perseus.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_defaults_are_the_three_sizes(bench):
    assert tuple(bench.SIZES) == ((4, 8), (4, 16), (8, 32))


def test_json_lines_hold_planning_time_frontier_size_and_savings(bench, capsys):
    assert bench.main(["--sizes", "2x4,3x4", "--weights", "1,1.5", "--json"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2
    for line, (stages, mbs) in zip(lines, ((2, 4), (3, 4)), strict=True):
        r = json.loads(line)
        assert (r["stages"], r["microbatches"]) == (stages, mbs)
        assert r["weights"] == [1.0, 1.5, 1.0][:stages]
        assert r["planning_s"] > 0 and r["frontier_points"] >= 1
        # the fastest plan keeps the all-max-clock time (within a quantum) on less energy
        assert r["max_clock_time_s"] - 1e-12 <= r["fastest_time_s"]
        assert r["fastest_time_s"] <= r["max_clock_time_s"] + r["time_quantum_s"]
        assert 0 < r["saved_at_fastest_pct"] <= r["saved_at_1_1x_pct"] < 100
        assert r["deadline_1_1x_time_s"] <= 1.1 * r["fastest_time_s"] * (1 + 1e-9)


def test_text_output_names_every_figure(bench, capsys):
    assert bench.main(["--sizes", "2x4", "--weights", "1,1.5"]) == 0
    out = capsys.readouterr().out
    for part in ("2x4", "planned in", "frontier points", "at the fastest time", "1.1x deadline"):
        assert part in out
