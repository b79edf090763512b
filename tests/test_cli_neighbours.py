"""Neighbours of causes closed earlier, each found by discovery rather than by one example.

Every shipped notebook's list parameter, every name the traces match, every option with a
domain, every monitor CLI: each test enumerates its cases, so a new one is covered as it lands.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from zeus_nb.commands.sweep import build_grid
from zeus_nb.runner.notebooks import grid_points, list_parameter, notebook_parameters

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9]*.ipynb"))


def _list_parameters() -> list[tuple[Path, str, dict]]:
    found = []
    for nb in NOTEBOOKS:
        for name, info in notebook_parameters(nb).items():
            if list_parameter(info):
                found.append((nb, name, info))
    return found


def test_the_notebooks_have_list_parameters():
    names = {name for _, name, _ in _list_parameters()}
    assert {"live_batch_sizes", "live_power_limits"} <= names  # the discovery finds them


@pytest.mark.parametrize(
    ("notebook", "name", "info"),
    _list_parameters(),
    ids=[f"{nb.stem}:{name}" for nb, name, _ in _list_parameters()],
)
def test_a_list_parameter_swept_with_commas_is_one_point(notebook, name, info):
    default = ast.literal_eval(info["default"])
    text = default if isinstance(default, str) else ",".join(map(str, default))
    if "," not in text:
        text = "32,128"  # a value with a comma, so a split would show
    points = grid_points(build_grid(notebook, [[name, text]]))
    assert len(points) == 1, points
    value = points[0][name]
    assert value == text if isinstance(default, str) else list(value) == list(default)
    # brackets still give one point per list
    assert len(grid_points(build_grid(notebook, [[name, "[32,128],[512]"]]))) == 2


# --- names compare the same way everywhere --------------------------------------------------
def _shouted_traces(tmp_path):
    """The shipped V100 power and train traces with every name in another case."""
    from zeus_nb.data.traces import load_power_trace, load_train_trace

    power, train = load_power_trace("v100"), load_train_trace()
    for df in (power, train):
        for column in ("dataset", "network", "optimizer"):
            df[column] = df[column].str.title()
    power_csv, train_csv = tmp_path / "power.csv", tmp_path / "train.csv"
    power.to_csv(power_csv, index=False)
    train.to_csv(train_csv, index=False)
    return power_csv, train_csv


def test_every_known_workload_matches_traces_that_spell_it_in_another_case(tmp_path):
    from zeus_nb.data.traces import WORKLOADS, tta_eta
    from zeus_nb.tradeoff import potential_savings

    power_csv, train_csv = _shouted_traces(tmp_path)
    from zeus_nb.data.traces import load_train_trace

    train = load_train_trace(train_csv)
    shouted = potential_savings(str(power_csv), train_trace=train)
    plain = potential_savings("v100")
    assert list(shouted["workload"]) == list(plain["workload"]) and len(plain) > 0
    for name in WORKLOADS:  # the user's spelling, the traces' spelling: any case matches
        if name in set(plain["workload"]):
            a = tta_eta(name.upper(), str(power_csv), train_trace=train)
            b = tta_eta(name, "v100")
            assert a[["batch_size", "power_limit"]].equals(b[["batch_size", "power_limit"]])


def test_tradeoff_cli_names_what_it_leaves_out_and_refuses_unknown_names(tmp_path):
    import subprocess
    import sys

    power_csv, train_csv = _shouted_traces(tmp_path)
    import pandas as pd

    extra = pd.read_csv(power_csv)
    extra = pd.concat([extra, extra[extra["dataset"] == "Imagenet"].assign(dataset="MyData")])
    extra.to_csv(power_csv, index=False)
    cli = [sys.executable, "-m", "zeus_nb.cli", "tradeoff"]
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [*cli, "savings", "--gpu", str(power_csv), "--train-trace", str(train_csv)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "imagenet" in done.stdout and "note: no row for mydata" in done.stderr
    done = subprocess.run(
        [*cli, "pareto", "--workload", "NoSuchSet"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 2 and "choose one of: cifar100, imagenet" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


# --- options outside the domain where they mean anything ------------------------------------
@pytest.mark.parametrize("gpu", ["a40", "v100"])
def test_perseus_plan_refuses_a_time_quantum_past_any_clock_difference(gpu, tmp_path):
    """Every GPU the synthetic profiles know: the longest quantum allowed (the widest span of
    one instruction's times over its clocks) still gives a frontier of several points; a longer
    one is refused (exit 2, one line naming the range)."""
    import subprocess
    import sys

    from zeus_nb.optimizer.pipeline_frequency import load_profile, solve_frontier
    from zeus_nb.optimizer.pipeline_frequency.solver import max_unit_time

    cli = [sys.executable, "-m", "zeus_nb.cli", "perseus"]
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    csv = tmp_path / "p.csv"
    subprocess.run([*cli, "synthetic", str(csv), "--gpu", gpu], check=True, env=env, timeout=300)
    profile = load_profile(csv)
    most = max_unit_time(profile)
    assert len(solve_frontier(profile, 4, 4, most).points) > 1
    for unit in (most * 1.5, 1000.0):
        done = subprocess.run(
            [*cli, "plan", str(csv), "--stages", "4", "--microbatches", "4"]
            + ["--unit-time", repr(unit)],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert done.returncode == 2, done.stdout + done.stderr
        assert "the frontier would be one point" in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1


# --- the monitor CLI: every subcommand ---------------------------------------------------------
def _monitor_subcommands() -> list[str]:
    import argparse

    from zeus_nb.monitor.cli import parser

    subs = [a for a in parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return sorted(subs[0].choices)


def _monitor(args, env_extra=None, **kw):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("ZEUS_NB_")}
    env.update({"PYTHONPATH": str(REPO), "ZEUS_NB_BACKEND": "sim", **(env_extra or {})})
    cmd = [sys.executable, "-m", "zeus_nb.monitor", *args]
    return subprocess.Popen(cmd, env=env, text=True, stdout=-1, stderr=-1, **kw)


def _catches_sigterm(pid: int) -> bool:
    """Whether the process has a SIGTERM handler installed (Linux: SigCgt in /proc)."""
    import signal

    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signal.SIGTERM - 1) & 1)
    return False


def test_the_monitor_cli_has_subcommands():
    assert {"energy", "power"} <= set(_monitor_subcommands())


@pytest.mark.parametrize("sub", _monitor_subcommands())
def test_sigterm_ends_a_monitor_measurement_as_ctrl_c_does(sub):
    import time

    proc = _monitor([sub])
    try:
        deadline = time.monotonic() + 120
        while not _catches_sigterm(proc.pid):  # waits for the handler, not for a guessed time
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            time.sleep(0.05)
        proc.terminate()
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "energy (J)" in out and ("Time (s)" in out or "Total time (s)" in out), out


@pytest.mark.parametrize("sub", _monitor_subcommands())
def test_the_monitor_refuses_what_would_measure_nothing_real(sub):
    for args, env, says in (
        (
            [sub, "--gpu-indices", "5", "--duration", "1"],
            {},
            "this system has 1 GPU(s), indices 0..0; a simulated system has ZEUS_NB_SIM_GPUS",
        ),
        ([sub, "--duration", "1"], {"ZEUS_NB_SIM_CLOCK": "virtual"}, "runs by wall time"),
    ):
        proc = _monitor(args, env)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 2, (args, out, err)
        assert says in err and out == ""
        errors = [line for line in err.splitlines() if "error:" in line]
        assert len(errors) == 1, err


# --- the monitor log across fork -------------------------------------------------------------
def test_a_forked_child_never_writes_the_parents_run(tmp_path):
    """Every row of the log is the parent's, once: the child's windows are not logged, and the
    run reads back (a doubled run would be refused by the replay's reader)."""
    import os

    import zeus_nb
    from zeus_nb.inputs.kinds import MONITOR_LOG
    from zeus_nb.inputs.table import read_table
    from zeus_nb.monitor import ZeusMonitor

    zeus_nb.use_simulated(clock="wall")
    path = tmp_path / "monitor.csv"
    monitor = ZeusMonitor([0], log_file=path)
    monitor.begin_window("before")
    monitor.end_window("before")
    pid = os.fork()
    if pid == 0:  # the child: its window must not reach the parent's log
        try:
            monitor.begin_window("child")
            monitor.end_window("child")
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    monitor.begin_window("after")
    monitor.end_window("after")
    lines = path.read_text().splitlines()
    assert [line.split(",")[1] for line in lines[1:]] == ["before", "after"], lines
    assert sum(line.startswith("start_time") for line in lines) == 1
    assert len(read_table(path, MONITOR_LOG).rows) == 2
