"""Live pipelines under torchrun on the CPU (gloo), one simulated A40 per rank."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from zeus_nb.device.frequency import frequency_model
from zeus_nb.train.pipeline import models as pm
from zeus_nb.train.pipeline.cost import InstructionWork
from zeus_nb.train.pipeline.launch import command, launch
from zeus_nb.train.pipeline.stages import partition, stage_work

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]


def torchrun(cwd: Path, nproc: int, *args: str) -> dict:
    """Run ``zeus_nb.train.pipeline`` through :func:`launch`; rank 0's results JSON.

    ``args`` are command-line flags (``"--max-steps", "3"``), turned into config fields here.
    """
    from zeus_nb.train.pipeline import config_from_args

    config = config_from_args([*args])
    given = {a[2:].replace("-", "_") for a in args if a.startswith("--")}
    options = {k: v for k, v in vars(config).items() if k in given}
    out = cwd / f"results_{len(list(cwd.glob('results_*.json')))}.json"
    return launch(
        nproc,
        echo=False,
        env={"ZEUS_NB_SIM_GPU": "a40"},
        timeout=300,
        backend="sim",
        results_json=str(out),
        **options,
    )


def one_f_one_b_time(fwd: list[float], bwd: list[float], microbatches: int) -> float:
    """Iteration time of 1F1B with per-stage instruction times, by earliest-start scheduling."""
    stages = len(fwd)
    orders = []
    for s in range(stages):
        warm = min(stages - s - 1, microbatches)
        order = [("f", j) for j in range(warm)]
        for j in range(microbatches):
            if warm + j < microbatches:
                order.append(("f", warm + j))
            order.append(("b", j))
        orders.append(order)
    end: dict[tuple[int, str, int], float] = {}
    pos, free = [0] * stages, [0.0] * stages
    while any(pos[s] < len(orders[s]) for s in range(stages)):
        for s in range(stages):
            while pos[s] < len(orders[s]):
                kind, j = orders[s][pos[s]]
                dep = (s - 1, "f", j) if kind == "f" else (s + 1, "b", j)
                if (kind == "f" and s == 0) or (kind == "b" and s == stages - 1):
                    ready = 0.0
                elif dep in end:
                    ready = end[dep]
                else:
                    break
                start = max(free[s], ready)
                free[s] = end[(s, kind, j)] = start + (fwd[s] if kind == "f" else bwd[s])
                pos[s] += 1
    return max(end.values())


def expected_instruction_times(model_name: str, layers: list[range], microbatch_size: int):
    """(forward, backward) seconds per stage at the maximum clock, computed here from FLOPs."""
    config, iw, fm = pm.get_config(model_name), InstructionWork("a40"), frequency_model("a40")
    out = []
    for r in layers:
        w = stage_work(config, r, microbatch_size)
        out.append(tuple(fm.time(iw.work(k, w[k]), fm.f_max) for k in ("forward", "backward")))
    return out


def test_two_stage_gpt_trains_under_1f1b_and_times_match_the_schedule(tmp_path):
    r = torchrun(
        tmp_path, 2, "--model", "tiny-gpt", "--num-microbatches", "4", "--microbatch-size", "4",
        "--max-steps", "5", "--num-warmup-steps", "1", "--num-prof-steps", "4", "--lr", "0.003",
    )  # fmt: skip
    assert (r["pp"], r["dp"], r["schedule"], r["gpu_backend"]) == (2, 1, "1f1b", "sim")
    losses = r["losses"]
    assert len(losses) == 4 and losses[-1] < losses[0]  # counting sequences are learnable
    layers = partition(pm.layer_parameters(pm.get_config("tiny-gpt")), 2)
    assert r["partition"] == [[x.start, x.stop] for x in layers]
    times = expected_instruction_times("tiny-gpt", layers, 4)
    ranks = sorted(r["ranks"], key=lambda x: x["stage"])
    for (f, b), rank in zip(times, ranks, strict=True):
        assert rank["forward_time_s"] == pytest.approx(4 * f, rel=1e-9)
        assert rank["backward_time_s"] == pytest.approx(4 * b, rel=1e-9)
    iteration = one_f_one_b_time([t[0] for t in times], [t[1] for t in times], 4)
    assert r["iteration_time_s"] == pytest.approx(iteration, rel=1e-9)
    # every GPU is charged for the whole iteration: busy energy plus blocking power when idle
    fm = frequency_model("a40")
    for rank in ranks:
        busy = rank["forward_time_s"] + rank["backward_time_s"]
        assert rank["blocking_time_s"] == pytest.approx(iteration - busy, rel=1e-9)
        assert rank["blocking_energy_j"] == pytest.approx(
            fm.blocking_power() * (iteration - busy), rel=1e-9
        )
    assert r["energy_j"] == pytest.approx(sum(x["energy_j"] for x in ranks), rel=1e-9)


def test_wide_resnet_gpipe_with_two_replicas_keeps_replicas_in_step(tmp_path):
    r = torchrun(
        tmp_path, 4, "--model", "tiny-wide-resnet", "--pp", "2", "--dp", "2",
        "--schedule", "gpipe", "--num-microbatches", "2", "--microbatch-size", "4",
        "--max-steps", "5", "--num-warmup-steps", "0", "--num-prof-steps", "5", "--lr", "0.003",
    )  # fmt: skip
    assert (r["pp"], r["dp"], r["world_size"], r["schedule"]) == (2, 2, 4, "gpipe")
    assert r["losses"][-1] < r["losses"][0]
    by_stage: dict[int, list[float]] = {}
    for rank in r["ranks"]:
        by_stage.setdefault(rank["stage"], []).append(rank["parameter_sum"])
        assert rank["stage"] == rank["rank"] % 2 and rank["replica"] == rank["rank"] // 2
    for sums in by_stage.values():  # gradients are averaged, so replicas stay identical
        assert sums[0] == pytest.approx(sums[1], rel=1e-9)
    # GPipe: all forwards, then all backwards; the last stage's are back to back
    layers = [range(*p) for p in r["partition"]]
    (f0, b0), (f1, b1) = expected_instruction_times("tiny-wide-resnet", layers, 4)
    expected = _gpipe_two_stage(f0, f1, b0, b1)
    assert r["iteration_time_s"] == pytest.approx(expected, rel=1e-9)


def _gpipe_two_stage(f0: float, f1: float, b0: float, b1: float) -> float:
    """Two stages, two microbatches, GPipe order, earliest start."""
    s0_f = [f0, 2 * f0]
    s1_f0 = s0_f[0] + f1
    s1_f1 = max(s1_f0, s0_f[1]) + f1
    s1_b0 = s1_f1 + b1
    s1_b1 = s1_b0 + b1
    s0_b0 = max(s0_f[1], s1_b0) + b0
    s0_b1 = max(s0_b0, s1_b1) + b0
    return max(s0_b1, s1_b1)


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    """An unbalanced two-stage tiny GPT profiled at every 6th clock, then resumed at every 3rd."""
    tmp = tmp_path_factory.mktemp("profile")
    common = ["--model", "tiny-gpt", "--partition-method", "layers:3,7", "--num-microbatches", "1"]
    common += ["--profile", "true", "--profile-path", str(tmp / "prof.csv")]
    first = torchrun(tmp, 2, *common, "--profile-clocks", "every:6")
    text = (tmp / "prof.csv").read_text()
    second = torchrun(tmp, 2, *common, "--profile-clocks", "every:3")
    return tmp, first, text, second


def test_profiling_writes_a_planner_profile_and_resumes(profiled):
    from zeus_nb.optimizer.pipeline_frequency import load_profile

    tmp, first, text, second = profiled
    fm = frequency_model("a40")
    every6 = fm.clocks[::6] + ((fm.f_min,) if fm.clocks[::6][-1] != fm.f_min else ())
    assert first["clocks_profiled"] == list(every6)
    assert first["rows_written"] == 2 * 3 * len(every6)
    # the rerun only profiles what is missing and keeps the first run's rows as they were
    every3 = set(fm.clocks[::3]) | {fm.f_min}
    assert sorted(second["clocks_profiled"], reverse=True) == sorted(
        every3 - set(every6), reverse=True
    )
    assert second["rows_written"] == 2 * 3 * len(second["clocks_profiled"])
    assert (tmp / "prof.csv").read_text().startswith(text)
    profile = load_profile(tmp / "prof.csv")
    assert profile.num_stages == 2
    assert "model=tiny-gpt" in profile.metadata[0]  # from prof.csv.json
    assert len(pd.read_csv(tmp / "prof.csv")) == first["rows_written"] + second["rows_written"]
    times = expected_instruction_times("tiny-gpt", [range(0, 3), range(3, 10)], 4)
    for s, (f, b) in enumerate(times):
        assert profile.at(s, "forward", fm.f_max).time == pytest.approx(f, rel=1e-9)
        assert profile.at(s, "backward", fm.f_max).time == pytest.approx(b, rel=1e-9)
        assert profile.blocking_power[s] == pytest.approx(fm.blocking_power(), rel=1e-9)


def test_a_planned_run_meets_the_prediction_with_less_energy_than_max_clocks(profiled):
    from zeus_nb.optimizer.pipeline_frequency import load_profile, solve_frontier

    tmp = profiled[0]
    frontier = solve_frontier(load_profile(tmp / "prof.csv"), 2, 4)
    fastest = frontier.fastest()
    assert fastest.energy < frontier.max_clock.energy  # the unbalanced pipeline has slack
    # the plan file comes from the command line, as a user would write it
    cli = [sys.executable, "-m", "zeus_nb", "perseus", "plan", str(tmp / "prof.csv")]
    cli += ["--stages", "2", "--microbatches", "4", "--json"]
    cli += ["--deadline", repr(fastest.iteration_time)]
    proc = subprocess.run(cli, capture_output=True, text=True, timeout=120, check=True)
    (tmp / "plan.json").write_text(proc.stdout)
    point = json.loads(proc.stdout)
    assert point["energy"] == pytest.approx(frontier.for_deadline(fastest.iteration_time).energy)

    common = ["--model", "tiny-gpt", "--partition-method", "layers:3,7", "--num-microbatches", "4"]
    common += ["--max-steps", "3", "--num-warmup-steps", "1", "--num-prof-steps", "2"]
    planned = torchrun(tmp, 2, *common, "--plan", str(tmp / "plan.json"))
    max_clocks = torchrun(tmp, 2, *common)
    assert planned["plan"]["predicted_iteration_time_s"] == pytest.approx(point["iteration_time"])
    assert planned["iteration_time_s"] == pytest.approx(point["iteration_time"], rel=0.05)
    assert planned["energy_j"] == pytest.approx(point["energy"], rel=0.05)
    assert max_clocks["iteration_time_s"] == pytest.approx(
        frontier.max_clock.iteration_time, rel=0.05
    )
    assert max_clocks["energy_j"] == pytest.approx(frontier.max_clock.energy, rel=0.05)
    assert planned["energy_j"] < max_clocks["energy_j"]


def test_a_straggler_deadline_planned_in_the_job_saves_more(profiled):
    """Rank 0 plans from the profile for a 10 % longer iteration and broadcasts the plan."""
    from zeus_nb.optimizer.pipeline_frequency import load_profile, solve_frontier

    tmp = profiled[0]
    frontier = solve_frontier(load_profile(tmp / "prof.csv"), 2, 4)
    deadline = 1.1 * frontier.fastest().iteration_time
    expected = frontier.for_deadline(deadline)
    r = torchrun(
        tmp, 2, "--model", "tiny-gpt", "--partition-method", "layers:3,7",
        "--num-microbatches", "4", "--max-steps", "2", "--num-warmup-steps", "0",
        "--num-prof-steps", "2", "--plan-profile", str(tmp / "prof.csv"),
        "--plan-deadline", repr(deadline),
    )  # fmt: skip
    assert r["plan"]["predicted_energy_j"] == pytest.approx(expected.energy, rel=1e-9)
    assert r["iteration_time_s"] == pytest.approx(expected.iteration_time, rel=0.05)
    assert r["iteration_time_s"] <= deadline * 1.05
    assert r["energy_j"] == pytest.approx(expected.energy, rel=0.05)
    assert expected.energy <= frontier.fastest().energy


def test_launch_builds_the_forked_torchrun_command_and_checks_options_first():
    cmd = command(4, model="tiny-gpt", profile=True, num_microbatches=1, plan=None)
    assert cmd[1:5] == ["-m", "zeus_nb.train.forkrun", "--nproc_per_node", "4"]
    assert cmd[5:] == [
        "zeus_nb.train.pipeline", "--model", "tiny-gpt", "--profile", "true",
        "--num-microbatches", "1",
    ]  # fmt: skip
    with pytest.raises(ValueError, match="unknown pipeline options"):
        command(2, epochs=3)
    with pytest.raises(ValueError, match="--num-microbatches 1"):
        command(2, profile=True)
