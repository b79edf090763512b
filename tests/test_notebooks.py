"""The shipped notebooks: stripped, well-formed, and executed headless by ``zeus-nb tour --smoke``.

The tour runs once per test session on the simulated backend; each notebook's test then checks
what it recorded against the traces the simulated GPU replays.
"""

from __future__ import annotations

import ast
import itertools
import math
import re
from pathlib import Path

import nbformat
import papermill
import pytest

import zeus_nb
from zeus_nb import device
from zeus_nb.runner.records import read_notebook

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
IDS = [p.stem for p in NOTEBOOKS]


def test_notebooks_exist():
    assert [p.stem[:2] for p in NOTEBOOKS] == ["01", "02", "03", "04", "05", "06"]
    assert NOTEBOOKS[0].stem == "01_measuring_energy"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_committed_notebook_is_stripped(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [], f"{path.name} cell {cell.id} has outputs"
            assert cell.execution_count is None, f"{path.name} cell {cell.id} has a count"
    assert "papermill" not in nb.metadata
    assert nb.metadata.kernelspec.name == "python3"


def _cells(nb) -> list[tuple[str, str, list[str]]]:
    return [(c.cell_type, c.source, list(c.metadata.get("tags", []))) for c in nb.cells]


def test_every_notebook_has_a_paired_source():
    sources = sorted((REPO / "notebooks" / "src").glob("[0-9][0-9]_*.py"))
    assert [s.stem for s in sources] == IDS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_matches_its_source(path):
    """The .ipynb holds the cells, text and tags jupytext reads from notebooks/src/<name>.py."""
    import jupytext

    source = REPO / "notebooks" / "src" / f"{path.stem}.py"
    expected = jupytext.read(source, fmt="py:percent")
    actual = nbformat.read(path, as_version=4)
    hint = f"run `jupytext --sync {source.relative_to(REPO)}`"
    assert _cells(actual) == _cells(expected), f"{path.name} is out of sync: {hint}"


def test_jupytext_pairs_notebooks_with_their_sources():
    """jupytext.toml pairs notebooks/NN_x.ipynb with notebooks/src/NN_x.py (percent format)."""
    from jupytext.config import load_jupytext_configuration_file
    from jupytext.paired_paths import paired_paths

    config = load_jupytext_configuration_file(str(REPO / "jupytext.toml"))
    nb = NOTEBOOKS[0]
    formats = config.default_formats(str(nb))
    paths = {Path(p) for p, _ in paired_paths(str(nb), "ipynb", formats)}
    assert paths == {nb, REPO / "notebooks" / "src" / f"{nb.stem}.py"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_structure(path):
    nb = nbformat.read(path, as_version=4)
    header = nb.cells[0].source
    for part in ("What you will learn", "Prerequisites", "Expected run time", "GPU"):
        assert part in header, f"{path.name}: header lacks {part!r}"
    tagged = [i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{path.name}: needs exactly one cell tagged 'parameters'"
    params = nb.cells[tagged[0]].source
    for line in params.splitlines():
        if line.strip():  # typed and commented: `name: type = value  # why`
            assert re.match(r"^\w+: \w+ = .+  # .+", line), f"{path.name}: {line!r}"
    for name in ('backend: str = "auto"', "smoke: bool = False", "seed: int"):
        assert name in params, f"{path.name}: parameters lack {name!r}"
    # `headless` ("show no interactive controls") exactly where there are controls to hide
    code = "\n".join(
        c.source for c in nb.cells if c.cell_type == "code" and c is not nb.cells[tagged[0]]
    )
    controls = "widgets." in code and re.search(r"\bheadless\b", code) is not None
    assert ("headless: bool" in params) == controls, f"{path.name}: headless without controls"
    names = {line.split(":")[0] for line in params.splitlines() if line.strip()}
    parsed = papermill.inspect_notebook(str(path))  # papermill skips lines it cannot parse
    assert set(parsed) == names, f"{path.name}: papermill cannot parse {names - set(parsed)}"
    for cell in nb.cells:
        src = cell.source
        if "# BEGIN SOLUTION" in src:
            assert src.count("# BEGIN SOLUTION") == src.count("# END SOLUTION")
            after = src.split("# END SOLUTION")[-1]
            assert "check." in after, f"{path.name}: exercise cell {cell.id} has no check call"


def test_notebook_setup_picks_the_backend_and_shows_info_logs(monkeypatch, capsys):
    import logging

    monkeypatch.setenv("ZEUS_NB_BACKEND", "sim")
    system = zeus_nb.notebook_setup("auto", seed=3, sim_gpu="v100", sim_workload="imagenet")
    assert system is device.current() and system.backend == "sim"
    assert "V100" in system.gpus[0].name
    line = capsys.readouterr().out
    assert line.count("\n") == 1 and "simulated" in line and system.gpus[0].name in line
    zeus_nb.notebook_setup("sim", quiet=True)  # again: still one handler
    logging.getLogger("zeus_nb.monitor").info("hello %s", "there")
    logging.getLogger("zeus_nb.monitor").debug("not shown")
    assert capsys.readouterr().out == "zeus_nb.monitor: hello there\n"
    logger = logging.getLogger("zeus_nb")
    for handler in [h for h in logger.handlers if h.get_name() == "zeus_nb.notebook"]:
        logger.removeHandler(handler)
    logger.setLevel(logging.NOTSET)


def test_demo_models_need_only_torch():
    torch = pytest.importorskip("torch")
    from zeus_nb.train.demos import small_classifier

    model = small_classifier(size=4, num_classes=3)
    assert model(torch.zeros(2, 3, 4, 4)).shape == (2, 3)


# --- executed ------------------------------------------------------------------------------------


def test_tour_ran_every_notebook(tour):
    out_dir, out = tour
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert f"{len(NOTEBOOKS)}/{len(NOTEBOOKS)} notebook(s) ran" in out.stdout
    assert "6/6 notebook(s) ran" in out.stdout
    for path in NOTEBOOKS:
        assert f"{path.stem} (ok" in out.stdout
        assert (out_dir / path.name).exists()


def test_tour_output_holds_no_kernel_transport_warning(tour):
    """Kernels talk over IPC sockets, so ipykernel prints no unencrypted-TCP warning."""
    _, out = tour
    assert "IPKernelApp" not in out.stdout + out.stderr
    assert "without encryption" not in out.stdout + out.stderr


# Output a notebook shows on purpose on stderr or as an error: (notebook stem, text in it).
EXPECTED_STDERR: list[tuple[str, str]] = []


def test_executed_notebooks_show_no_stderr_or_traceback(tour):
    """Information is not dressed as an error: no stderr box, no traceback, in any notebook."""
    out_dir, _ = tour
    for path in NOTEBOOKS:
        nb = nbformat.read(out_dir / path.name, as_version=4)
        for cell in nb.cells:
            for o in cell.get("outputs", []):
                if o.get("output_type") == "error":
                    pytest.fail(f"{path.name}: {o.get('ename')}: {o.get('evalue')}")
                if o.get("output_type") == "stream" and o.get("name") == "stderr":
                    text = o.get("text", "")
                    if not any(s == path.stem and w in text for s, w in EXPECTED_STDERR):
                        pytest.fail(f"{path.name} writes to stderr: {text[:300]!r}")


def _ends_in_record(source: str) -> bool:
    """Whether a cell's last statement is a ``zeus_nb.record(...)`` call (bookkeeping)."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return False
    last = body[-1] if body else None
    return (
        isinstance(last, ast.Expr)
        and isinstance(last.value, ast.Call)
        and ast.unparse(last.value.func) == "zeus_nb.record"
    )


def test_executed_notebooks_show_no_stray_values(tour):
    """A cell that ends in bookkeeping (a ``zeus_nb.record`` call) shows no bare value below it."""
    out_dir, _ = tour
    for path in NOTEBOOKS:
        nb = nbformat.read(out_dir / path.name, as_version=4)
        for cell in nb.cells:
            if cell.cell_type != "code" or not _ends_in_record(cell.source):
                continue
            shown = [o for o in cell.get("outputs", []) if o.get("output_type") == "execute_result"]
            if shown:
                text = shown[0].get("data", {}).get("text/plain", "")
                pytest.fail(f"{path.name}: a stray value {text[:80]!r} below a record call")


def _records(tour, stem: str) -> dict:
    out_dir, out = tour
    info = read_notebook(out_dir / f"{stem}.ipynb")
    assert info["status"] == "ok", out.stdout[-3000:]
    assert info["parameters"] == {"smoke": True}
    return info["records"]


def test_01_measuring_energy_records(tour):
    r = _records(tour, "01_measuring_energy")
    sim = device.use_simulated(gpu="a40", workload="cifar100")
    step_time, step_power = sim.step_cost(sim.batch_size, sim.max_limit)
    assert r["backend"] == "sim" and "A40" in r["gpu"]
    assert r["steps"] == 8  # smoke: 2 epochs x 4 steps
    assert len(r["epoch_energy_j"]) == 2
    assert math.isclose(sum(r["epoch_energy_j"]), r["training_energy_j"], rel_tol=1e-9)
    assert math.isclose(r["energy_per_step_j"], r["training_energy_j"] / 8, rel_tol=1e-9)
    # 2% noise around the measured A40 numbers at the default (maximum) power limit
    assert math.isclose(r["average_power_w"], step_power, rel_tol=0.05)
    assert math.isclose(r["training_time_s"], 8 * step_time, rel_tol=0.05)
    assert r["power_samples"] == pytest.approx(r["training_time_s"] / 0.05, abs=2)
    # PowerMonitor's integrated samples fall a little short of the energy counter
    assert 0.5 * r["counter_energy_j"] < r["power_monitor_energy_j"] <= r["counter_energy_j"]
    # the simulated CPU: CodeCarbon's model, 85 W TDP at 50 %, DRAM 3 W per 8 GB of this host
    from zeus_nb.device.cpu import host_memory_gb

    assert math.isclose(r["cpu_energy_j"], 0.5 * 85.0 * r["training_time_s"], rel_tol=1e-6)
    dram_w = 3.0 / 8.0 * host_memory_gb()
    assert math.isclose(r["dram_energy_j"], dram_w * r["training_time_s"], rel_tol=1e-6)
    kwh = (r["training_energy_j"] + r["cpu_energy_j"] + r["dram_energy_j"]) / 3.6e6
    assert math.isclose(r["training_co2_g"], kwh * 366.0, rel_tol=1e-9)
    assert math.isclose(r["training_cost_usd"], kwh * 0.134, rel_tol=1e-9)
    # "a lower limit makes each step slower; down to a point it also saves energy, and below that
    # point ... more energy": the simulated A40's noiseless steps over its whole range
    low, high = sim.gpu(0).power_limit_constraints()
    limits = [high - 25.0 * i for i in range(int((high - low) // 25) + 1)]
    cost = {w: sim.step_cost(sim.batch_size, w) for w in limits}
    times = [cost[w][0] for w in limits]
    assert times == sorted(times) and times[-1] > times[0]
    energy = {w: t * p for w, (t, p) in cost.items()}
    best = min(energy, key=energy.get)
    assert min(limits) < best < max(limits)
    # the widget cell ran headless: no widget output in the executed notebook
    nb = nbformat.read(tour[0] / "01_measuring_energy.ipynb", as_version=4)
    views = [
        o
        for c in nb.cells
        for o in c.get("outputs", [])
        if "application/vnd.jupyter.widget-view+json" in o.get("data", {})
    ]
    assert views == []


def test_02_power_limit_optimizer_records(tour):
    from zeus_nb.data.traces import resource_path
    from zeus_nb.optimizer.replay import load_profile_log
    from zeus_nb.tradeoff import zeus_cost

    r = _records(tour, "02_power_limit_optimizer")
    log = load_profile_log(resource_path("zeus_profiles", r["replay_log"]))
    limits = log.power_limits  # highest first: ties go to the higher limit
    energy = {w: sum(log.energy[w].values()) for w in limits}
    assert r["replay_choices"]["Energy()"] == min(limits, key=energy.get)
    assert r["replay_choices"]["Time()"] == min(limits, key=log.elapsed.get)
    top = max(limits)
    best = min(limits, key=lambda w: zeus_cost(energy[w], log.elapsed[w], 0.5, top))
    assert r["replay_choices"]["ZeusCost(eta_knob=0.5)"] == best == r["zeus_cost_by_hand"]
    slow = [r["slowdown_choices"][k] for k in sorted(r["slowdown_choices"], key=float)]
    assert slow[0] == top and slow == sorted(slow, reverse=True)  # looser knob, lower limit
    # live: ZeusCost(0.5) on the simulated A40 (2% noise) lands next to the noiseless optimum
    sim = device.use_simulated(gpu="a40", workload="imagenet")
    costs = {}
    for w in range(300, 99, -25):
        t, p = sim.step_cost(sim.batch_size, w)
        costs[w] = zeus_cost(t * p, t, 0.5, 300.0)
    assert r["live_selector"] == "ZeusCost(eta_knob=0.5)"
    assert abs(r["live_choice"] - min(costs, key=costs.get)) <= 25
    assert r["live_limits_per_epoch"][-1] == r["live_choice"]
    assert r["profile_reused"] is True
    # the Trainer callback (Energy, 50 W steps) picks the least step energy of the simulated A40:
    # 200 W by at least 10 % over its neighbours, well beyond the 2 % noise
    step_energy = {}
    for w in (300.0, 250.0, 200.0, 150.0, 100.0):
        t, p = sim.step_cost(sim.batch_size, w)
        step_energy[w] = t * p
    assert r["hf_choice"] == min(step_energy, key=step_energy.get)
    # the prose: Time() keeps the maximum; Energy() is neither the maximum nor the lowest limit;
    # ZeusCost sits in between; the slowdown table's loosest factors go below the energy optimum
    choice = r["replay_choices"]
    assert choice["Time()"] == top
    assert min(limits) < choice["Energy()"] < top
    for name in ("ZeusCost(eta_knob=0.5)", "ZeusCost(eta_knob=0.9)"):
        assert choice["Energy()"] <= choice[name] <= choice["Time()"]
    assert slow[-1] < choice["Energy()"]
    assert r["hf_skipped"] is None  # hf extra installed; .ci/release-check runs without it


def test_03_energy_time_tradeoff_records(tour):
    from zeus_nb.data.traces import tta_eta
    from zeus_nb.tradeoff import zeus_cost

    r = _records(tour, "03_energy_time_tradeoff")
    trace = tta_eta("imagenet", "v100")
    ok = trace.dropna(subset=["tta", "eta"])
    assert r["trace_configurations"] == len(trace)
    # the front: sorted by time, energy strictly falling, and no reached point dominates it
    pts = {
        (int(b), float(p)): (t, e)
        for b, p, t, e in ok[["batch_size", "power_limit", "tta", "eta"]].itertuples(index=False)
    }
    front = [pts[tuple(k)] for k in r["trace_front"]]
    assert front == sorted(front) and all(
        a[1] > b[1] for a, b in zip(front, front[1:], strict=False)
    )
    for t, e in front:
        assert not any(t2 <= t and e2 < e for t2, e2 in pts.values())
    assert r["student_front_size"] == len(front)
    top = float(ok.power_limit.max())
    # the slider's value (headless: the eta_knob parameter) decides the recorded optimum
    best = min(pts, key=lambda k: zeus_cost(pts[k][1], pts[k][0], r["eta_knob"], top))
    assert r["eta_knob"] == 1.0 and tuple(r["optimum"]) == best
    assert best == tuple(r["optimum_by_eta"]["1.0"])
    fastest = min(pts, key=lambda k: pts[k][0])
    assert tuple(r["optimum_by_eta"]["0.0"]) == fastest
    assert r["live_configurations"] == 4  # smoke: 2 batch sizes x 2 limits
    assert 1 <= len(r["live_front"]) <= r["live_reached"] <= 4
    # "a lower limit slows every step down" and buys energy with it: a real tradeoff, so the
    # live front has more than one point; "larger batches need more epochs"
    sweep = {(row["batch_size"], row["power_limit"]): row for row in r["live_sweep"]}
    for bs in {b for b, _ in sweep}:
        fast, slow = sweep[(bs, 300.0)], sweep[(bs, 200.0)]
        assert slow["time"] > fast["time"] and slow["energy"] < fast["energy"]
    assert len(r["live_front"]) >= 2
    small, large = sorted({b for b, _ in sweep})
    assert sweep[(large, 300.0)]["time"] > sweep[(small, 300.0)]["time"]
    assert set(r["best_both_ratio"]) >= {"imagenet", "cifar100"}
    assert all(0 < v <= 1 for v in r["best_both_ratio"].values())
    # the prose: six workloads; both together never worse than either alone, better on most
    both, bs, pl = r["best_both_ratio"], r["best_batch_size_ratio"], r["best_power_limit_ratio"]
    assert len(both) == 6 and set(bs) == set(pl) == set(both)
    assert all(both[w] <= min(bs[w], pl[w]) for w in both)
    assert sum(both[w] < min(bs[w], pl[w]) for w in both) > len(both) / 2
    # eta_knob 1 picks the least energy, and every choice of the slider's walk lies on the front
    least_energy = min(pts, key=lambda k: pts[k][1])
    assert pts[tuple(r["optimum_by_eta"]["1.0"])][1] == pts[least_energy][1]
    on_front = {tuple(k) for k in r["trace_front"]}
    assert all(tuple(v) in on_front for v in r["optimum_by_eta"].values())


def test_04_batch_size_optimizer_records(tour):
    from zeus_nb.optimizer.batch_size.simulator import simulate
    from zeus_nb.tradeoff import zeus_cost

    r = _records(tour, "04_batch_size_optimizer")
    # the exercise's worked example: draws 102 and 102.5, so 128 runs despite 256's cheaper mean
    from zeus_nb.course.exercises.batch_size import thompson_pick_ref

    posterior, z = {128: (100.0, 10.0), 256: (95.0, 5.0)}, [0.2, 1.5]
    draws = [m + sd * n for (m, sd), n in zip(posterior.values(), z, strict=True)]
    assert draws == pytest.approx([102.0, 102.5])
    assert thompson_pick_ref(posterior, z) == 128 and posterior[256][0] < posterior[128][0]
    # the exercise's thompson_pick, redrawn round by round from the log, runs what the bandit ran
    assert r["thompson_rounds"] > 0 and r["thompson_agreement"] == r["thompson_rounds"]
    again = simulate("imagenet", gpu="v100", eta=0.5, beta=2.0, seed=1).summary()
    assert r["simulation"]["converged_batch_size"] == again["converged_batch_size"]
    assert r["simulation"]["cumulative_saving"] == pytest.approx(again["cumulative_saving"])
    assert 0 < r["simulation"]["cumulative_saving"] < 1
    knobs = {(k["knob"], str(k["value"])): k for k in r["knobs"]}
    for eta in (0.0, 1.0):
        s = simulate("imagenet", gpu="v100", eta=eta, beta=2.0, seed=1).summary()
        row = knobs[("eta", str(eta))]
        assert (row["batch_size"], row["power_limit"]) == (
            s["converged_batch_size"],
            s["converged_power_limit"],
        )
    never = simulate("imagenet", gpu="v100", eta=0.5, beta=math.inf, seed=1).summary()
    assert knobs[("beta", "inf")]["saving"] == pytest.approx(never["cumulative_saving"])
    # smoke mode compares three seeds with the published policy
    from zeus_nb.optimizer.batch_size import PaperBatchSizeOptimizer

    assert [row["seed"] for row in r["paired"]] == [1, 2, 3]
    for row in r["paired"]:
        paper = simulate(
            "imagenet", gpu="v100", seed=row["seed"], optimizer=PaperBatchSizeOptimizer
        )
        assert row["paper"] == pytest.approx(paper.cumulative_saving)
        assert row["difference"] == pytest.approx(row["zeus_nb"] - row["paper"])
    # live: 6 smoke recurrences; pruning starts at the default (128), goes down, then up;
    # replaying the runs through the paper's pruning rules gives the order, phase and survivors
    assert len(r["live_batch_sizes"]) == 6 and r["live_candidates"] == [32, 64, 128, 256]
    live_gpu = device.use_simulated(gpu="a40", workload="cifar100").gpu(0)
    max_power = live_gpu.power_limit_constraints()[1]
    costs = [
        zeus_cost(e, t, 0.5, max_power)
        for t, e in zip(r["live_time"], r["live_energy"], strict=True)
    ]
    runs = list(zip(r["live_batch_sizes"], r["live_reached"], costs, strict=True))
    order, phase, survivors = _replay_pruning(runs, r["live_candidates"], default=128)
    assert r["live_batch_sizes"][: len(order)] == order and order[0] == 128
    assert (r["live_phase"], r["live_survivors"]) == (phase, survivors)


def _replay_pruning(runs, candidates, default, rounds=2):
    """(batch sizes pruning asks for, phase, survivors) after ``runs`` of (bs, reached, cost).

    Each round tries the survivors from the centre downwards, then upwards, a direction stopping
    at its first failure; the survivors are those that reached the target, and the next round is
    centred on the cheapest of them (Zeus, NSDI '23, section 4.2).
    """
    survivors, center, order, runs = sorted(candidates), default, [], list(runs)
    for _ in range(rounds):
        i = survivors.index(center)
        good, best = [], math.inf
        for direction in (survivors[: i + 1][::-1], survivors[i + 1 :]):
            for bs in direction:
                if not runs:
                    return order, "pruning", survivors
                ran, reached, cost = runs.pop(0)
                assert ran == bs, f"pruning should run {bs}, ran {ran}"
                order.append(bs)
                if not reached:
                    break
                good.append(bs)
                if cost < best:
                    best, center = cost, bs
        survivors = sorted(good) or survivors
        center = center if center in survivors else survivors[0]
    return order, "thompson", survivors


def test_05_data_parallel_records(tour):
    r = _records(tour, "05_data_parallel")
    # the exercise's slowdown_limit, run on the reduced profile, picks what the optimizer chose
    assert r["dp_slowdown_limit"] == r["dp_optimal_power_limit"]
    assert r["dp"]["world_size"] == 2 == len(r["dp_rank_times"])
    t, e = r["dp_aggregated"]
    assert t == pytest.approx(max(r["dp_rank_times"])) == pytest.approx(r["dp"]["time_s"])
    assert e == pytest.approx(sum(r["dp_rank_energies"])) == pytest.approx(r["dp"]["energy_j"])
    assert all(x > 0 for x in r["dp_rank_energies"])
    # the simulated ranks differ (rank_spread), so the slowest one sets the job's time
    assert len(set(r["dp_rank_times"])) == 2 and len(set(r["dp_rank_energies"])) == 2
    assert t > min(r["dp_rank_times"])
    # every rank ends on the one limit the optimizer chose, within the A40's range
    assert len(set(r["dp_power_limits"])) == 1
    assert r["dp_power_limits"][0] == r["dp_optimal_power_limit"]
    assert 100 <= r["dp_optimal_power_limit"] <= 300
    assert len(set(r["fsdp_power_limits"])) == 1 and r["fsdp"]["world_size"] == 2
    assert 0 <= r["fsdp"]["accuracy"] <= 1 and r["fsdp"]["energy_j"] > 0


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_notebook_records_a_takeaway_made_of_its_numbers(tour, path):
    r = _records(tour, path.stem)
    takeaway = r["takeaway"]
    assert isinstance(takeaway, str) and 40 < len(takeaway) < 400 and "\n" not in takeaway
    expected = {
        "01_measuring_energy": [f"{r.get('training_energy_j', 0):.0f} J"],
        "03_energy_time_tradeoff": [f"front has {len(r.get('live_front', []))} point"],
        "05_data_parallel": [f"({r.get('dp_aggregated', [0, 0])[1]:.0f} J)"],
        "06_pipeline_frequency": [f"{r.get('saved_at_fastest_pct', 0):.1f} %"],
    }.get(path.stem, [])
    for words in expected:
        assert words in takeaway, (words, takeaway)


def test_the_tour_prints_each_takeaway_first_and_rounds_what_follows(tour):
    _, out = tour
    for path in NOTEBOOKS:
        block = out.stdout.split(f"{path.stem} (ok", 1)[1].split("\n\n", 1)[0]
        lines = block.splitlines()[1:]
        assert lines[0].startswith("  takeaway: "), lines[:2]
        for line in lines[1:]:
            for token in re.findall(r"-?\d+\.\d+(?:e-?\d+)?", line):
                assert float(token) == float(f"{float(token):.4g}"), f"unrounded: {line}"
            assert len(line) < 140, f"too long: {line}"


@pytest.mark.parametrize(
    "value",
    [
        0.037939154657367156,
        {f"selector number {i}": 175.123456 for i in range(9)},
        [[1.123456789, 2.0]] * 30,
        [{"a": 1.23456789, "b": 2}] * 7,
        list(range(100)),
        "x" * 300,
    ],
)
def test_tour_values_are_rounded_and_summarised_not_cut(value):
    from zeus_nb.commands.tour import WIDTH, _short

    text = _short(value)
    assert len(text) <= WIDTH + 40 and "1.123456" not in text and "175.1234" not in text
    assert not text.endswith("...") and text.count('"') % 2 == 0


def test_no_gpu_notice_is_one_line_on_stdout_not_stderr(monkeypatch, capsys):
    """Without a GPU the fallback is information: part of the backend line, nothing on stderr."""
    import logging

    from zeus_nb.device.gpu import nvidia as nvml
    from zeus_nb.errors import NoGPUError

    def no_gpu(*_a, **_k):
        raise NoGPUError("no NVIDIA driver found; install one")

    monkeypatch.delenv("ZEUS_NB_BACKEND", raising=False)
    monkeypatch.setattr(nvml, "NVIDIAGPUs", no_gpu)
    device.reset()
    try:
        system = zeus_nb.notebook_setup("auto")
        out, err = capsys.readouterr()
        assert system.backend == "sim" and err == ""
        assert out.count("\n") == 1 and "simulated" in out and "no NVIDIA driver found" in out
    finally:
        device.reset()
        logger = logging.getLogger("zeus_nb")
        for handler in [h for h in logger.handlers if h.get_name() == "zeus_nb.notebook"]:
            logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)


def _one_f_one_b(fwd: list[float], bwd: list[float], microbatches: int) -> float:
    """1F1B iteration time with per-stage instruction times, by earliest-start scheduling."""
    stages = len(fwd)
    orders = []
    for s in range(stages):
        warm = min(stages - s - 1, microbatches)
        order = [("f", j) for j in range(warm)]
        for j in range(microbatches):
            order += [("f", warm + j)] if warm + j < microbatches else []
            order.append(("b", j))
        orders.append(order)
    end: dict[tuple[int, str, int], float] = {}
    pos, free = [0] * stages, [0.0] * stages
    while any(pos[s] < len(orders[s]) for s in range(stages)):
        for s in range(stages):
            while pos[s] < len(orders[s]):
                kind, j = orders[s][pos[s]]
                first = (kind == "f" and s == 0) or (kind == "b" and s == stages - 1)
                dep = (s - 1, "f", j) if kind == "f" else (s + 1, "b", j)
                if not first and dep not in end:
                    break
                start = max(free[s], 0.0 if first else end[dep])
                free[s] = end[(s, kind, j)] = start + (fwd[s] if kind == "f" else bwd[s])
                pos[s] += 1
    return max(end.values())


def test_06_pipeline_frequency_records(tour):
    from zeus_nb.device.frequency import frequency_model
    from zeus_nb.optimizer.pipeline_frequency import stage_works

    r = _records(tour, "06_pipeline_frequency")
    # the notebook's defaults: V100, 4 stages x 8 microbatches, stage sizes 1, 1.2, 0.9, 1.1
    fm, works, mbs = frequency_model("v100"), stage_works("v100", 4, [1, 1.2, 0.9, 1.1]), 8
    fwd = [fm.time(w["forward"], fm.f_max) for w in works]
    bwd = [fm.time(w["backward"], fm.f_max) for w in works]
    busy_e = [mbs * sum(fm.energy(w[k], fm.f_max) for k in ("forward", "backward")) for w in works]
    t_max = _one_f_one_b(fwd, bwd, mbs)
    waiting = [t_max - mbs * (f + b) for f, b in zip(fwd, bwd, strict=True)]
    e_max = sum(busy_e) + fm.blocking_power() * sum(waiting)
    assert r["max_clock"] == pytest.approx([t_max, e_max], rel=1e-9)
    assert r["slack_waiting_s"] == pytest.approx(waiting, rel=1e-9, abs=1e-12)
    assert min(r["slack_waiting_s"]) > 0  # 1F1B leaves every stage some slack
    assert r["exercise_energy"] == pytest.approx(e_max, rel=1e-9)
    # the frontier: time strictly up, energy strictly down; the fastest point runs as fast as
    # all max clocks (within the time quantum) on less energy
    front = r["frontier"]
    assert len(front) >= 2
    for (t0, e0), (t1, e1) in itertools.pairwise(front):
        assert t1 > t0 and e1 < e0
    assert t_max <= front[0][0] <= t_max + r["unit_time"] + 1e-12
    assert front[0][1] < e_max
    assert r["saved_at_fastest_pct"] == pytest.approx(100 * (1 - front[0][1] / e_max))
    # the straggler's deadline: the least-energy frontier point that meets it
    deadline, t_s, e_s = r["straggler"]
    assert deadline == pytest.approx(1.1 * front[0][0])
    meets = [p for p in front if p[0] <= deadline * (1 + 1e-9)]
    assert [t_s, e_s] == pytest.approx(min(meets, key=lambda p: p[1]))
    assert e_s <= front[0][1]
    # "the least-energy plan within that deadline saves more" (than the fastest plan)
    assert r["saved_at_straggler_pct"] > r["saved_at_fastest_pct"]
    assert r["slider_point"] == pytest.approx([t_s, e_s])  # headless: the slider's start
    # the live 4-stage pipeline (smoke: every 12th V100 clock and the lowest)
    every12 = list(fm.clocks[::12]) + ([fm.f_min] if fm.clocks[::12][-1] != fm.f_min else [])
    assert r["live_clocks_profiled"] == every12
    (t_live, e_live), (t_plan, e_plan) = r["live_max"], r["live_planned"]
    assert t_plan == pytest.approx(r["live_predicted"][0], rel=0.05)
    assert e_plan == pytest.approx(r["live_predicted"][1], rel=0.05)
    assert [t_live, e_live] == pytest.approx(r["live_max_predicted"], rel=0.05)
    assert e_plan < e_live
    assert r["live_saved_pct"] == pytest.approx(100 * (1 - e_plan / e_live))
    # the header's "at the same iteration time with less energy": within 2 % of all max clocks
    assert t_plan == pytest.approx(t_live, rel=0.02)
    # the live straggler: a frontier of several plans, and the least-energy one in time
    live_front = r["live_frontier"]
    assert len(live_front) >= 3
    for (t0, e0), (t1, e1) in itertools.pairwise(live_front):
        assert t1 > t0 and e1 < e0
    deadline_live = 1.1 * live_front[0][0]
    in_time = [p for p in live_front if p[0] <= deadline_live * (1 + 1e-9)]
    assert r["live_straggler"] == pytest.approx(min(in_time, key=lambda p: p[1]))
    assert r["live_straggler"][1] < live_front[0][1]


# --- the course's instructor edition, judged on the tour ------------------------------------------


def _as_instructor_run(ran, instructor):
    """The tour's run of a shipped notebook, read as a run of its instructor edition.

    The instructor edition is the shipped notebook without its marker comments: cell for cell the
    same program (compared as syntax trees, which leave comments out), so executing it again would
    repeat the tour. Its cells' tags (``exercise``) go onto the executed cells for the judge.
    """
    cells = [c for c in ran.cells if "injected-parameters" not in c.metadata.get("tags", [])]
    assert len(cells) == len(instructor.cells)
    for done, cell in zip(cells, instructor.cells, strict=True):
        assert done.cell_type == cell.cell_type
        if cell.cell_type == "code":
            same = ast.dump(ast.parse(done.source)) == ast.dump(ast.parse(cell.source))
            assert same, f"the tour ran other code than the instructor edition's: {cell.source!r}"
        done.metadata["tags"] = list(cell.metadata.get("tags", []))
    ran.cells = cells
    return ran


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_instructor_edition_passes_every_exercise(tour, path):
    """`course verify`'s verdict on the instructor edition, on the tour's smoke run of it.

    Runs to the end and passes every exercise check (checks are strict under papermill); its
    sentences about an exercise's result say "your" (test_course.py runs the student edition).
    """
    from zeus_nb.course import edition_text
    from zeus_nb.course.feedback import exercise_results

    out_dir, out = tour
    executed = out_dir / path.name
    assert executed.is_file(), out.stdout[-3000:] + out.stderr[-3000:]
    instructor = nbformat.reads(edition_text(path, solutions=True), as_version=4)
    ran = _as_instructor_run(nbformat.read(executed, as_version=4), instructor)
    assert not ran.metadata.papermill.get("exception"), f"{path.name} stopped early"
    errors = [o for c in ran.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors, f"{path.name}: {[(e.ename, e.evalue) for e in errors]}"
    results = exercise_results(ran)
    tagged = [c for c in instructor.cells if "exercise" in c.metadata.get("tags", [])]
    assert len(results) == len(tagged) >= 1
    off = [f"exercise {i}: {r.status} ({r.detail})" for i, r in enumerate(results, 1)]
    assert all(r.status == "passed" for r in results), f"{path.name}: {off}"
    if any("check.whose(" in c.source for c in instructor.cells):
        printed = [
            line
            for cell in ran.cells
            for o in cell.get("outputs", [])
            if o.get("output_type") == "stream"
            for line in o.get("text", "").splitlines()
        ]
        assert any(re.search(r"\byour \w+", ln) for ln in printed), path.name
