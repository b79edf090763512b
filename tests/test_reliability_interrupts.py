"""Interrupted work and concurrent writers never lose a finished result or mix two.

A sweep's output notebook was both the result and the "done" marker, written in place: Ctrl-C
during a point left a notebook papermill had stamped finished (the point was then skipped with
NaN results), and ``--force`` then Ctrl-C deleted a finished point's measurements. A repair of a
log cut a complete last row that only lacked its line end, and ``record()`` from two processes
kept about half of their records.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

import zeus_nb
from zeus_nb.runner import notebooks as nbrun

ROOT = Path(zeus_nb.__file__).resolve().parents[1]


def _napping(path: Path, gate: Path) -> Path:
    """A notebook that records ``value``, then sleeps while ``gate`` exists."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    params = nbformat.v4.new_code_cell("value: int = 1")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [
        params,
        nbformat.v4.new_code_cell("import zeus_nb\nzeus_nb.record('value', value)"),
        nbformat.v4.new_code_cell(
            f"import os, time\nwhile os.path.exists({str(gate)!r}):\n    time.sleep(0.2)"
        ),
        nbformat.v4.new_code_cell("zeus_nb.record('finished', True)"),
    ]
    nbformat.write(nb, path)
    return path


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ZEUS_NB_BACKEND": "sim"}
    env.pop("ZEUS_NB_RECORD_FILE", None)
    return env


def _sweep(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "zeus_nb", "sweep", *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )


def _interrupted_sweep(cwd: Path, partial: Path, *args: str) -> None:
    """Start a sweep, wait until its point runs (its partial notebook exists), press Ctrl-C."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "zeus_nb", "sweep", *args],
        cwd=cwd,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # Ctrl-C reaches the sweep and its kernel, as in a terminal
    )
    try:
        deadline = time.monotonic() + 120
        while not partial.exists():
            assert time.monotonic() < deadline, "the point never started"
            assert proc.poll() is None, proc.stdout.read()
            time.sleep(0.2)
        time.sleep(2)  # the kernel is inside the napping cell now
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _records(out: Path) -> dict:
    from zeus_nb.runner.records import read_notebook

    return read_notebook(out)["records"]


@pytest.mark.slow  # runs notebooks: zeus-nb sweep in a subprocess, interrupted
def test_ctrl_c_during_a_point_then_the_same_command_runs_it_again(tmp_path):
    gate = tmp_path / "nap"
    gate.touch()
    nb = _napping(tmp_path / "nap.ipynb", gate)
    out_dir = tmp_path / "out"
    output = out_dir / "value=1.ipynb"
    args = (str(nb), "-p", "value", "1", "-o", str(out_dir))
    _interrupted_sweep(tmp_path, nbrun.partial_of(output), *args)
    assert not nbrun.is_complete(output)
    gate.unlink()
    res = _sweep(tmp_path, *args)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "done already" not in res.stdout, res.stdout
    assert _records(output) == {"value": 1, "finished": True}


@pytest.mark.slow  # runs notebooks: zeus-nb sweep in a subprocess, interrupted
def test_force_then_ctrl_c_keeps_the_finished_measurements(tmp_path):
    gate = tmp_path / "nap"
    nb = _napping(tmp_path / "nap.ipynb", gate)
    out_dir = tmp_path / "out"
    output = out_dir / "value=1.ipynb"
    args = (str(nb), "-p", "value", "1", "-o", str(out_dir))
    assert _sweep(tmp_path, *args).returncode == 0
    before = (output.read_bytes(), _records(output))
    gate.touch()
    _interrupted_sweep(tmp_path, nbrun.partial_of(output), *args, "--force")
    assert output.read_bytes() == before[0]
    assert _records(output) == before[1] == {"value": 1, "finished": True}
    assert nbrun.is_complete(output)


def _papermill_notebook(done: bool) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1")]
    nb.metadata["papermill"] = {"end_time": "2024-01-01T00:00:00" if done else None}
    return nb


def test_an_interrupted_run_never_writes_the_finished_name(tmp_path, monkeypatch):
    """The class: whatever the runner does when interrupted (papermill stamps an end time on
    the way out), the result under the point's name is the old one, and not 'done'."""
    from zeus_nb.runner import execute as ex

    seen = []

    def interrupted(notebook, output, *args, **kw):
        seen.append(Path(output))
        nbformat.write(_papermill_notebook(done=True), output)  # what papermill's finally does
        raise KeyboardInterrupt

    monkeypatch.setattr(ex, "execute", interrupted)
    out = tmp_path / "point.ipynb"
    with pytest.raises(KeyboardInterrupt):
        nbrun.run_notebook(tmp_path / "nb.ipynb", out, {})
    assert seen and seen[0] != out.absolute()
    assert not out.exists() and not nbrun.is_complete(out)
    # a finished point is left as it was
    finished = _papermill_notebook(done=True)
    finished.metadata[nbrun.OUTCOME_KEY] = {"outcome": "ok"}
    nbformat.write(finished, out)
    before = out.read_bytes()
    with pytest.raises(KeyboardInterrupt):
        nbrun.run_notebook(tmp_path / "nb.ipynb", out, {})
    assert out.read_bytes() == before and nbrun.is_complete(out)


def test_a_failed_run_is_kept_for_inspection_but_not_done(tmp_path, monkeypatch):
    from zeus_nb.runner import execute as ex

    def timed_out(notebook, output, *args, **kw):
        nbformat.write(_papermill_notebook(done=True), output)
        return ex.Execution(problem="CellTimeoutError: a cell timed out")

    monkeypatch.setattr(ex, "execute", timed_out)
    out = tmp_path / "point.ipynb"
    res = nbrun.run_notebook(tmp_path / "nb.ipynb", out, {})
    assert not res.ok and out.exists()
    assert not nbrun.is_complete(out)  # papermill's end time alone does not make it done


# --- a repair never deletes a complete row ---------------------------------------------------
RESULT = {"batch_size": 32, "power_limit": 150.0, "epochs": 2, "metric": 0.6, "reached": True,
          "time": 20.0, "energy": 3000.0, "num_gpus": 1, "target_metric": 0.5, "max_epochs": 5,
          "higher_is_better": True}  # fmt: skip


def test_a_complete_last_row_without_a_line_end_is_kept_by_reader_and_repair(tmp_path):
    from zeus_nb.inputs.kinds import SWEEP_RESULT
    from zeus_nb.runner.sweep import read_results
    from zeus_nb.utils.files import append_rows

    path = tmp_path / "results.jsonl"
    first = json.dumps(RESULT)
    path.write_text(first)  # an editor saved it without the last line end
    assert [r["batch_size"] for r in read_results(path)] == [32]
    second = json.dumps({**RESULT, "batch_size": 64}) + "\n"
    append_rows(path, second, SWEEP_RESULT)
    assert [r["batch_size"] for r in read_results(path)] == [32, 64]
    assert path.read_text() == first + "\n" + second
    # a row cut mid-write is still cut
    path.write_text(first + "\n" + second[:20])
    append_rows(path, json.dumps({**RESULT, "batch_size": 8}) + "\n", SWEEP_RESULT)
    assert [r["batch_size"] for r in read_results(path)] == [32, 8]


@pytest.mark.parametrize("cut", [0, 5])
def test_a_csv_repair_keeps_a_complete_last_row_and_cuts_a_torn_one(tmp_path, cut):
    """Before appending, a complete last row without its line end is ended (kept), a cut one
    is cut; the reader, which cannot tell a cut last number, drops it until then."""
    from zeus_nb.inputs import read_table
    from zeus_nb.inputs.kinds import MONITOR_LOG
    from zeus_nb.utils.files import append_rows

    header = ["start_time", "window_name", "elapsed_time", "gpu0_energy"]
    good = (
        ",".join(header) + "\n"
        "1.0,__GlobalPowerLimitOptimizer_300,10.0,2500.0\n"
        "12.0,__GlobalPowerLimitOptimizer_250,11.0,2300.5"
    )
    path = tmp_path / "log.csv"
    path.write_text(good[: len(good) - cut] if cut else good)
    assert len(read_table(path, MONITOR_LOG).rows) == 1  # the reader drops it either way
    append_rows(path, "30.0,__GlobalPowerLimitOptimizer_200,12.0,2200.0\n", MONITOR_LOG, header)
    rows = read_table(path, MONITOR_LOG).rows
    names = [r["window_name"][-3:] for r in rows]
    assert names == (["300", "250", "200"] if cut == 0 else ["300", "200"])
    if cut == 0:
        assert rows[1]["gpu0_energy"] == 2300.5


def test_writers_refuse_a_row_their_reader_would_refuse(tmp_path):
    from zeus_nb.errors import InputError
    from zeus_nb.inputs.kinds import INSTRUCTION_PROFILE, SWEEP_RESULT
    from zeus_nb.utils.files import append_rows

    path = tmp_path / "results.jsonl"
    with pytest.raises(InputError, match="reader would refuse"):
        append_rows(path, json.dumps({**RESULT, "time": 0.02}) + "\n", SWEEP_RESULT)  # ms
    assert not path.exists()
    prof = tmp_path / "profile.csv"
    header = ["stage", "instruction", "frequency", "time", "energy"]
    with pytest.raises(InputError, match="reader would refuse"):
        append_rows(prof, "0,forward,1410,0.01,nan\n", INSTRUCTION_PROFILE, header)
    assert not prof.exists()


# --- record() from two processes --------------------------------------------------------------
def test_record_from_two_processes_keeps_every_record(tmp_path):
    side = tmp_path / "out.records.json"
    code = (
        "import sys, zeus_nb\n"
        "for i in range(150):\n"
        "    zeus_nb.record(f'{sys.argv[1]}{i}', i, display=False)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ZEUS_NB_RECORD_FILE": str(side)}
    procs = [subprocess.Popen([sys.executable, "-c", code, tag], env=env) for tag in ("a", "b")]
    for p in procs:
        assert p.wait(timeout=240) == 0
    records = json.loads(side.read_text())["records"]
    assert len(records) == 300
    assert records["a149"] == records["b149"] == 149


# --- a measured window is one record: whole or not, and one run's -------------------------------
def _plo_run(log: Path, adaptive: bool = True, stop_at: float | None = None):
    """A power-limit optimizer run on the simulated A40 (epochs of 15 steps, so every limit's
    window is paused at an epoch's end), logging to ``log``; ``stop_at``: killed while that
    limit is being measured."""
    from zeus_nb import device
    from zeus_nb.monitor import ZeusMonitor
    from zeus_nb.optimizer.power_limit import GlobalPowerLimitOptimizer, MaxSlowdownConstraint

    device.use_simulated(gpu="a40", workload="imagenet")
    monitor = ZeusMonitor(gpu_indices=[0], log_file=log)
    plo = GlobalPowerLimitOptimizer(
        monitor, MaxSlowdownConstraint(1.1), wait_steps=0, warmup_steps=0, profile_steps=40,
        adaptive=adaptive, resume_across_epochs=True, verbose=False,
    )  # fmt: skip
    for _ in range(60):
        plo.on_epoch_begin()
        for _ in range(15):
            plo.on_step_begin()
            zeus_nb.step()
            plo.on_step_end()
        plo.on_epoch_end()
        s = plo.state
        limit = getattr(s, "current_power_limit", None)
        if stop_at is not None and limit == stop_at * 1000 and getattr(s, "taken", 0) > 0:
            return None  # killed here: a piece of this limit was measured
        if plo.optimal_power_limit is not None:
            return plo.optimal_power_limit
    raise AssertionError("the run did not finish")


def _replay(log: Path, capsys) -> float:
    from zeus_nb.cli import main

    capsys.readouterr()
    argv = ["plo", "replay", str(log), "--selector", "max-slowdown", "--factor", "1.1"]
    assert main([*argv, "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)["power_limit"]


def test_an_adaptive_runs_own_log_replays_to_the_limit_it_chose(tmp_path, capsys):
    log = tmp_path / "log.csv"
    chosen = _plo_run(log)
    assert "~part_" in log.read_text()  # some limits were abandoned midway: logged as parts
    assert _replay(log, capsys) == chosen


def test_a_log_cut_by_a_killed_run_never_holds_a_piece_as_a_whole_window(tmp_path, capsys):
    import gc

    full = tmp_path / "full.csv"
    chosen = _plo_run(full, adaptive=False)
    cut = tmp_path / "cut.csv"
    assert _plo_run(cut, adaptive=False, stop_at=100.0) is None
    gc.collect()
    names = [ln.split(",")[1] for ln in cut.read_text().splitlines()[1:]]
    assert not any(n.endswith("_100") for n in names), names  # the open limit is not logged
    assert _replay(cut, capsys) == chosen != 100.0


def test_a_second_process_cannot_append_to_a_log_this_monitor_writes(tmp_path):
    from zeus_nb import device
    from zeus_nb.monitor import ZeusMonitor

    device.use_simulated()
    log = tmp_path / "log.csv"
    monitor = ZeusMonitor(gpu_indices=[0], log_file=log)
    code = (
        "import sys; from zeus_nb.monitor import ZeusMonitor\n"
        "from zeus_nb.errors import ZeusNbError\n"
        "try:\n    ZeusMonitor(gpu_indices=[0], log_file=sys.argv[1])\n"
        "except ZeusNbError as e:\n    print(e); sys.exit(7)\n"
    )
    env = {**_env(), "ZEUS_NB_BACKEND": "sim"}
    out = subprocess.run(
        [sys.executable, "-c", code, str(log)], env=env, capture_output=True, text=True
    )
    assert out.returncode == 7 and "another process" in out.stdout, out.stdout + out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.csv"]  # no lock file beside it
    del monitor
    import gc

    gc.collect()
    out = subprocess.run(
        [sys.executable, "-c", code, str(log)], env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr  # released with the monitor


def test_the_log_keeps_zeus_s_format(tmp_path):
    """Zeus's own test reads the log line by line: the header, then one row per ended window
    starting with its begin time, name and elapsed time; no column is added."""
    from zeus_nb import device
    from zeus_nb.monitor import ZeusMonitor

    system = device.use_simulated(num_gpus=2)
    log = tmp_path / "log.csv"
    monitor = ZeusMonitor(gpu_indices=[0, 1], log_file=log)
    starts = {}
    for name in ("window1", "window2"):
        starts[name] = system.clock()
        monitor.begin_window(name)
        zeus_nb.step(3)
        m = monitor.end_window(name)
        starts[name] = (starts[name], m.time)
    lines = log.read_text().splitlines(keepends=True)
    assert lines[0] == "start_time,window_name,elapsed_time,gpu0_energy,gpu1_energy\n"
    for line, (name, (begin, elapsed)) in zip(lines[1:], starts.items(), strict=True):
        assert line.startswith(f"{begin!r},{name},{elapsed!r}")
        assert len(line.split(",")) == 5


def test_the_monitor_does_not_log_a_row_its_replay_would_refuse(tmp_path, caplog):
    from zeus_nb import device
    from zeus_nb.device.replay import load_profile_log
    from zeus_nb.monitor import ZeusMonitor

    device.use_simulated()
    log = tmp_path / "log.csv"
    monitor = ZeusMonitor(gpu_indices=[0], log_file=log)
    monitor.begin_window("__GlobalPowerLimitOptimizer_300")
    zeus_nb.step(5)
    monitor.end_window("__GlobalPowerLimitOptimizer_300")
    monitor.begin_window("__GlobalPowerLimitOptimizer_250")  # no step: 0 s, 0 J
    with caplog.at_level("WARNING"), pytest.warns(UserWarning):
        m = monitor.end_window("__GlobalPowerLimitOptimizer_250")
    assert m.time == 0 and "not logged" in caplog.text
    assert load_profile_log(log).power_limits == [300.0]  # the log still replays


def test_opening_a_log_keeps_a_complete_last_row_without_a_line_end(tmp_path):
    from zeus_nb import device
    from zeus_nb.monitor import ZeusMonitor

    device.use_simulated()
    log = tmp_path / "log.csv"
    log.write_text("start_time,window_name,elapsed_time,gpu0_energy\n1.0,w,2.0,400.5")
    ZeusMonitor(gpu_indices=[0], log_file=log)
    assert log.read_text().splitlines()[:3] == [
        "start_time,window_name,elapsed_time,gpu0_energy",
        "1.0,w,2.0,400.5",
        "start_time,window_name,elapsed_time,gpu0_energy",
    ]
