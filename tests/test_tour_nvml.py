"""The notebooks on the NVML backend, over fake GPUs shaped like real ones.

One H100 and four A40s (``tests/fake_nvml/nvml_rows.py``): energy counters that move every 100 ms,
reads that cost what they cost on the hardware, power limits of the real cards. Each tour runs
once per session (``tour_fixture.py``); the tests check that every notebook ran and adapted to
the GPUs it found: limits from their range, ranks from their number, windows long enough for their
counters, no GPU left changed, and no output that claims a simulated GPU. Notebook 06, which
computes on simulated GPUs by design, runs in the read-only H100's tour, which runs all six."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from tour_fixture import SHAPED_ONLY, nvml_env

from zeus_nb.runner.records import read_notebook

# `shaped` asks for a tour dynamically: its time (tour_fixture.RUN_LIMITS) is added here.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600 + 900)]

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
#: what the H100 and A40 tours run: all but 06, whose run on the read-only H100 stands for them
SHAPED_NOTEBOOKS = [p for p in NOTEBOOKS if p.stem[:2] in SHAPED_ONLY.split(",")]
PERIOD = 0.1  # s: both rows' counters (the H100's measured, the A40's assumed the same)
SHAPES = {
    # fixture: (GPU name, GPUs, limit range in W)
    "nvml_tour_h100": ("NVIDIA H100 80GB HBM3", 1, (200.0, 700.0)),
    "nvml_tour_a40x4": ("NVIDIA A40", 4, (100.0, 300.0)),
}


@pytest.fixture(params=list(SHAPES), ids=["h100", "a40x4"])
def shaped(request):
    """(the executed tour, the GPU name, how many GPUs, their limit range)."""
    return request.getfixturevalue(request.param), *SHAPES[request.param]


def records(tour, stem: str) -> dict:
    info = read_notebook(tour.out_dir / f"{stem}.ipynb")
    assert info["status"] == "ok", tour.run.stdout[-3000:]
    return info["records"]


def outputs(tour, stem: str) -> list[dict]:
    nb = nbformat.read(tour.out_dir / f"{stem}.ipynb", as_version=4)
    return [o for c in nb.cells for o in c.get("outputs", [])]


def test_every_notebook_runs_on_real_gpu_shapes(shaped):
    tour, *_ = shaped
    out = tour.run
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-3000:]
    ran = len(SHAPED_NOTEBOOKS)
    assert ran == len(NOTEBOOKS) - 1 and f"{ran}/{ran} notebook(s) ran" in out.stdout
    for path in SHAPED_NOTEBOOKS:
        assert f"{path.stem} (ok" in out.stdout


def test_no_gpu_is_left_changed(shaped):
    tour, _, count, _ = shaped
    state = tour.state
    assert len(state["devices"]) == count
    assert state["set_calls"], "the notebooks changed no power limit at all"
    for d in state["devices"]:
        assert d["limit_mw"] == d["default_mw"], d["uuid"]
        assert d["locked_clocks"] is None


def test_the_output_names_the_gpu_found_and_no_simulated_one(shaped):
    """Information, not errors, and about the GPU found: no stderr box, no traceback, and no
    line that speaks of a simulated GPU (notebook 06, whose pipeline runs on simulated GPUs by
    design and says so, runs in the read-only tour)."""
    tour, name, _, _ = shaped
    for path in SHAPED_NOTEBOOKS:
        for o in outputs(tour, path.stem):
            assert o.get("output_type") != "error", (path.stem, o.get("evalue"))
            text = o.get("text", "") or "".join(o.get("data", {}).get("text/plain", ""))
            assert o.get("name") != "stderr", (path.stem, text[:300])
            assert "simulated" not in text.lower(), (path.stem, text[:300])
    first = "".join(o.get("text", "") for o in outputs(tour, "01_measuring_energy"))
    assert f"measuring {name} on the nvml backend" in first


def test_01_explains_the_counter_and_measures_over_many_updates(shaped):
    tour, name, _, _ = shaped
    r = records(tour, "01_measuring_energy")
    assert r["backend"] == "nvml" and r["gpu"] == name
    # energy per step comes from the whole run, which spans several counter updates
    assert r["training_time_s"] > 3 * PERIOD and r["training_energy_j"] > 0
    assert math.isclose(r["energy_per_step_j"], r["training_energy_j"] / r["steps"])
    # the PowerMonitor comparison ran over at least 20 counter updates, so the two agree (its
    # edges interpolated: a sampler held off at an edge loses no time, test_power_monitor.py)
    assert r["counter_energy_j"] > 0
    text = "".join(o.get("text", "") for o in outputs(tour, "01_measuring_energy"))
    gap = r["power_monitor_energy_j"] / r["counter_energy_j"] - 1
    assert abs(gap) < 0.15, text
    # per-step windows are said to be the counter's steps, or estimates from power readings
    assert "the counter's, not training's" in text or "not readings of each step" in text
    assert "step-to-step spread of the energy" not in text  # not presented as training's spread


def test_02_profiles_the_gpus_own_limits_over_windows_the_counter_resolves(shaped):
    tour, _, _, (low, high) = shaped
    r = records(tour, "02_power_limit_optimizer")
    profile = r["live_profile"]
    assert len(profile) >= 2
    for limit, seconds, joules in profile:
        assert low <= limit <= high
        assert seconds >= 2 * PERIOD, (limit, seconds)  # smoke: sized for 6 at the fastest pace
        assert joules > 0, (limit, seconds)  # no 0 J window
    assert low <= r["live_choice"] <= high
    assert all(low <= w <= high for w in r["live_limits_per_epoch"])
    assert r["profile_reused"] is True


def test_03_sweeps_limits_from_the_gpus_range(shaped):
    tour, _, _, (low, high) = shaped
    r = records(tour, "03_energy_time_tradeoff")
    middle = low + 25 * round((high - low) / 2 / 25)
    assert r["live_power_limits"] == [high, middle]  # smoke: the first two of max, middle, min
    assert r["live_configurations"] == 4
    for row in r["live_sweep"]:
        assert low <= row["power_limit"] <= high
        assert row["time"] >= 2 * PERIOD and row["energy"] > 0, row  # no 0 J window


def test_04_runs_span_counter_updates(shaped):
    tour, *_ = shaped
    r = records(tour, "04_batch_size_optimizer")
    assert len(r["live_batch_sizes"]) == 6
    assert all(e > 0 for e in r["live_energy"]), r["live_energy"]
    assert all(t >= 2 * PERIOD for t in r["live_time"]), r["live_time"]


def test_05_runs_as_many_ranks_as_there_are_gpus(shaped):
    tour, name, count, (low, high) = shaped
    r = records(tour, "05_data_parallel")
    ranks = min(2, count)
    assert r["ranks"] == [2, ranks]
    assert r["dp"]["world_size"] == ranks == len(r["dp_rank_times"])
    assert r["fsdp"]["world_size"] == ranks
    assert all(low <= w <= high for w in r["dp_power_limits"] + r["fsdp_power_limits"])
    assert r["dp_slowdown_limit"] == r["dp_optimal_power_limit"]
    text = "".join(o.get("text", "") for o in outputs(tour, "05_data_parallel"))
    if count == 1:
        assert f"1 GPU(s) here ({name})" in text and "1 rank(s) instead of 2" in text


def test_06_computes_on_a_real_gpu_shape_what_it_computes_on_the_simulated_backend(
    nvml_tour_h100_readonly, tour
):
    """Why the H100 and A40 tours leave 06 out: in a kernel that found the read-only H100 it
    records every number the simulated tour recorded, digit for digit (its pipeline runs on
    simulated GPUs by design), so a GPU the kernel finds changes none of it."""
    on_nvml = records(nvml_tour_h100_readonly, "06_pipeline_frequency")
    executed, _ = tour
    on_sim = read_notebook(executed / "06_pipeline_frequency.ipynb")
    assert on_sim["status"] == "ok"
    assert on_nvml == on_sim["records"]
    assert on_nvml["live_max"][1] > 0 and on_nvml["live_planned"][1] > 0


# --- an H100 this process may read but not change ------------------------------------------------
READONLY_H100 = "NVIDIA H100 80GB HBM3"
#: notebook -> the part that changes power limits and so runs on the simulated GPU
CHANGES_LIMITS = {
    "02_power_limit_optimizer": "The live optimizer",
    "03_energy_time_tradeoff": "The live sweep",
    "05_data_parallel": "DDP and FSDP",
}


def _text(tour, stem: str) -> str:
    out = []
    for o in outputs(tour, stem):
        out.append(o.get("text", "") or "".join(o.get("data", {}).get("text/plain", "")))
    return "\n".join(out)


def test_every_notebook_runs_on_a_gpu_it_may_not_change(nvml_tour_h100_readonly):
    """NVML answers every reading and refuses every setter: all six notebooks run, top to
    bottom, and nothing on the GPU was changed (no setter ever succeeded)."""
    tour = nvml_tour_h100_readonly
    out = tour.run
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-3000:]
    assert f"{len(NOTEBOOKS)}/{len(NOTEBOOKS)} notebook(s) ran" in out.stdout
    state = tour.state
    assert state["deny_setters"] is True and state["set_calls"] == []
    for d in state["devices"]:
        assert d["limit_mw"] == d["default_mw"] and d["locked_clocks"] is None
    for path in NOTEBOOKS:
        for o in outputs(tour, path.stem):
            assert o.get("output_type") != "error", (path.stem, o.get("evalue"))


def test_readings_run_on_the_real_gpu_and_say_so(nvml_tour_h100_readonly):
    """01 and 04 only read the GPU: every record comes from the real H100, and no line speaks
    of a simulated GPU."""
    tour = nvml_tour_h100_readonly
    for stem in ("01_measuring_energy", "04_batch_size_optimizer"):
        info = read_notebook(tour.out_dir / f"{stem}.ipynb")
        assert info["status"] == "ok"
        assert set(info["gpus"]) == set(info["records"]), stem  # every record names its GPU
        assert set(info["gpus"].values()) == {f"real: {READONLY_H100}"}, stem
        assert "simulated" not in _text(tour, stem).lower(), stem
    r = records(tour, "01_measuring_energy")
    assert r["backend"] == "nvml" and r["gpu"] == READONLY_H100 and r["counter_energy_j"] > 0


@pytest.mark.parametrize("stem", sorted(CHANGES_LIMITS))
def test_what_changes_limits_runs_simulated_with_one_line_saying_why(nvml_tour_h100_readonly, stem):
    """02, 03 and 05 measure the real GPU first, then run what changes the limit on a simulated
    A40 (the measured model nearest the H100), with one line naming the part and why; each
    record names the GPU that produced it."""
    tour = nvml_tour_h100_readonly
    text = _text(tour, stem)
    assert f"GPU backend: nvml, measuring {READONLY_H100}" in text
    notice = (
        f"{CHANGES_LIMITS[stem]} runs on a simulated NVIDIA A40, the measured model nearest to "
        f"the {READONLY_H100}: NVML refuses its setters (no root or SYS_ADMIN) and no zeusd is "
        "configured (ZEUSD_SOCK_PATH or ZEUSD_HOST_PORT)"
    )
    assert text.count(notice) == 1, text[-3000:]
    info = read_notebook(tour.out_dir / f"{stem}.ipynb")
    assert set(info["gpus"]) == set(info["records"])
    live = {k for k in info["records"] if k.startswith(("live_", "dp", "fsdp"))}
    assert live, stem
    for name in live:
        assert info["gpus"][name].startswith("simulated: NVIDIA A40 (simulated)"), name
        assert f"nearest measured model to the {READONLY_H100}" in info["gpus"][name], name
    low, high = 100.0, 300.0  # the simulated A40's range, not the H100's
    if stem == "02_power_limit_optimizer":
        assert all(low <= w <= high for w, _, _ in info["records"]["live_profile"])
        assert info["gpus"]["replay_choices"].startswith("real: NVIDIA A40 (the replayed")
    if stem == "03_energy_time_tradeoff":
        assert info["records"]["live_power_limits"] == [high, 200.0]


def test_06_says_its_numbers_come_from_simulated_gpus(nvml_tour_h100_readonly):
    info = read_notebook(nvml_tour_h100_readonly.out_dir / "06_pipeline_frequency.ipynb")
    assert info["status"] == "ok" and set(info["gpus"]) == set(info["records"])
    assert all(v.startswith("simulated: ") for v in info["gpus"].values())


# Notebook 02's cells up to its live profiling, in one interpreter, on the H100-shaped fake, with
# the clock that sizes its windows running 50x fast: steps seem 50x slower as they are timed, and
# the windows come out too short for the counter at any pace a loaded machine gives them (it
# would take steps 16x slower than their fastest timed quarter to fill one), as when steps speed
# up after timing. The test checks the loop's contract whatever the pace: each retry doubles the
# steps, it stops early only when no window is short, and a window still short is said so.
FAST_SIZING = r"""
import json, sys
import zeus_nb.runner.setup as setup
real = setup.sizing_clock
t0 = real()
setup.sizing_clock = lambda: t0 + 50 * (real() - t0)
cells = json.loads(sys.stdin.read())
scope = {"__name__": "__main__"}
for source in cells:
    exec(source, scope)
print(json.dumps({"windows": [m.time for m in scope["plo"].measurements],
                  "steps": scope["live_profile_steps"]}))
"""


def test_02_profiles_again_over_more_steps_when_steps_outran_their_timing(tmp_path):
    nb = nbformat.read(REPO / "notebooks" / "02_power_limit_optimizer.ipynb", as_version=4)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    end = next(i for i, src in enumerate(code) if "profile_steps=live_profile_steps" in src)
    overrides = f"backend, smoke, headless, out_dir = 'nvml', True, True, {str(tmp_path)!r}"
    cells = [code[0], overrides, *code[1 : end + 1]]
    run = subprocess.run(
        [sys.executable, "-c", FAST_SIZING],
        input=json.dumps(cells),
        env=nvml_env(tmp_path, "h100", 1),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    (got,) = [json.loads(x) for x in run.stdout.splitlines() if x.startswith('{"windows"')]
    first = int(re.search(r"each limit is profiled over (\d+) steps", run.stdout).group(1))
    again = [int(n) for n in re.findall(r"profiling again over (\d+) steps", run.stdout)]
    assert again, run.stdout[-3000:]  # the first windows were short
    assert again == [first * 2 ** (k + 1) for k in range(len(again))] and len(again) <= 2
    assert got["steps"] == first * 2 ** len(again)
    short = [w for w in got["windows"] if w < 2 * PERIOD]
    notes = re.findall(r"note: the window at \S+ W lasted", run.stdout)
    assert len(notes) == len(short), (got, run.stdout[-2000:])  # what stayed short is said
    assert len(again) == 2 or not short, got  # it stopped early only with every window long
