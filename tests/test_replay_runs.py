"""A monitor log holding several profiling runs: each replayed alone, never summed (issue 40).

A restarted training job appends its optimizer's second profiling run to the first one's log.
The log marks each run (a header line starts it, a ``__GlobalPowerLimitOptimizer~done_<W>`` row
ends a finished one); ``zeus-nb plo replay`` replays the last finished run and names the runs it
ignored, and a log whose runs nothing tells apart (written before the marks) is refused with
what to do. The numbers are the real A40 measurements shipped with the package, replayed.
"""

from __future__ import annotations

import csv
import json
from importlib import resources
from pathlib import Path

import pytest

from zeus_nb.cli import main
from zeus_nb.device.replay import ReplaySystem, load_profile_log
from zeus_nb.errors import TraceFormatError
from zeus_nb.monitor import ZeusMonitor
from zeus_nb.optimizer.power_limit import GlobalPowerLimitOptimizer

LOG = resources.files("zeus_nb") / "resources" / "zeus_profiles" / "A40+resnet50+gpu0.csv"
HEADER = ["start_time", "window_name", "elapsed_time", "gpu0_energy"]


def _profile(monitor: ZeusMonitor, stop_after: int | None = None) -> float | None:
    """One GlobalPowerLimitOptimizer run on ``monitor`` (its system replays the A40 log),
    killed after ``stop_after`` limits when given."""
    plo = GlobalPowerLimitOptimizer(
        monitor, wait_steps=0, profile_steps=40, adaptive=False, verbose=False
    )
    while not plo.done:
        if stop_after is not None and len(plo.measurements) >= stop_after:
            return None  # the job dies here
        plo.on_step_begin()
        monitor.system.step()
        plo.on_step_end()
    return plo.optimal_power_limit


def _monitor(log: Path) -> ZeusMonitor:
    return ZeusMonitor(system=ReplaySystem(str(LOG), steps_per_window=40), log_file=log)


def _replay(capsys, log: Path, *extra: str) -> tuple[int, dict | str, str]:
    capsys.readouterr()
    try:
        code = main(["plo", "replay", str(log), *extra])
    except SystemExit as e:  # the command line's own checks
        code = e.code
    out, err = capsys.readouterr()
    return code, json.loads(out) if "--json" in extra and code == 0 else out, err


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture(scope="module")
def alone(tmp_path_factory) -> tuple[Path, float]:
    """One run alone, and what the optimizer chose live (the issue's 200 W)."""
    log = tmp_path_factory.mktemp("alone") / "alone.csv"
    chose = _profile(_monitor(log))
    assert chose == 200.0
    return log, chose


# --- the example --------------------------------------------------------------------
@pytest.mark.parametrize("restart", ["new process", "same monitor"])
@pytest.mark.parametrize(
    ("first", "second"),
    [(4, None), (None, 4), (None, None)],
    ids=["first-cut-then-restart", "restart-cut-midway", "both-finished"],
)
def test_a_restarted_run_appended_replays_as_one_run_alone(
    tmp_path, capsys, alone, restart, first, second
):
    """Two runs in one log choose what one run alone chooses: 200 W, never the 175 W that the
    sum of a whole run and the first limits of another picks."""
    clean, chose = alone
    log = tmp_path / "twice.csv"
    monitor = _monitor(log)
    _profile(monitor, stop_after=first)
    _profile(_monitor(log) if restart == "new process" else monitor, stop_after=second)

    rows = list(csv.reader(log.open()))
    assert rows.count(HEADER) == 2  # a header line starts each run
    ends = [r[1] for r in rows if "~done_" in r[1]]
    assert ends == ["__GlobalPowerLimitOptimizer~done_200"] * (2 - [first, second].count(4))

    code, got, err = _replay(capsys, log, "--json")
    assert code == 0, err
    assert got["power_limit"] == chose == 200.0
    used = 1 if second == 4 else 2  # the last finished run
    assert (got["run"], got["ignored_runs"]) == (used, [3 - used])
    ignored = "not marked finished" if 4 in (first, second) else "finished, chose 200 W"
    assert f"ignored run {3 - used} (" in got["runs_note"] and ignored in got["runs_note"]
    # per limit, exactly the run alone: nothing of the other run added
    want, have = load_profile_log(clean), load_profile_log(log)
    assert have.elapsed == pytest.approx(want.elapsed)
    assert have.energy == {w: pytest.approx(e) for w, e in want.energy.items()}

    code, out, _ = _replay(capsys, log)
    assert out.splitlines()[0].startswith(f"replayed run {used} (")  # one line says which
    assert "chosen power limit: 200 W" in out
    for run in (1, 2):  # either run on request; a run cut short has its limits only
        code, got, err = _replay(capsys, log, "--run", str(run), "--json")
        assert code == 0, err
        n = len(got["limits"]) if (first, second)[run - 1] is None else 4
        assert len([r for r in got["limits"] if r["status"] == "measured"]) == n


def test_a_run_that_stopped_midway_then_a_notebook_cell_run_again(tmp_path, capsys, alone):
    """A loop interrupted (KeyboardInterrupt) and a new optimizer made on the same monitor:
    its profiling run starts a run of its own, and the interrupted one's limits stay out."""
    log = tmp_path / "cell.csv"
    monitor = _monitor(log)
    with monitor.window("setup"):  # the monitor's own windows before profiling
        monitor.system.step(3)
    _profile(monitor, stop_after=6)
    _profile(monitor)
    names = [r[1] for r in csv.reader(log.open())]
    assert names.count("window_name") == 3  # the monitor's, then one per profiling run
    assert names[1] == "setup" and names[2] == "window_name"  # profiling starts a run
    code, got, err = _replay(capsys, log, "--json")
    assert code == 0, err
    assert (got["power_limit"], got["run"], got["ignored_runs"]) == (200.0, 3, [2])
    assert (
        "ignored run 2 (lines 4-9: 6 limit(s) 300-175 W, not marked finished)" in (got["runs_note"])
    )


def test_the_writer_never_puts_one_limit_twice_in_a_run(tmp_path):
    """Whoever writes the optimizer's windows (another optimizer, by hand): a limit's window
    the run already holds starts a new run, so no reader can sum two."""
    log = tmp_path / "hand.csv"
    monitor = _monitor(log)
    for w in (300, 250, 300):
        monitor.system.gpus[0].set_power_limit(w)
        with monitor.window(f"__GlobalPowerLimitOptimizer_{w}"):
            monitor.system.step(40)
    rows = list(csv.reader(log.open()))
    assert [r[1] for r in rows] == [
        "window_name",
        "__GlobalPowerLimitOptimizer_300",
        "__GlobalPowerLimitOptimizer_250",
        "window_name",
        "__GlobalPowerLimitOptimizer_300",
    ]
    with pytest.raises(TraceFormatError, match="2 profiling runs and none is marked finished"):
        load_profile_log(log)
    assert load_profile_log(log, run=1).power_limits == [300.0, 250.0]


# --- logs written before the marks ------------------------------------------------------------
def _unmarked(log: Path, old: Path) -> list[str]:
    """``log`` as a zeus-nb without run marks wrote it: one header, no end rows."""
    lines = log.read_text().splitlines()
    body = [ln for ln in lines[1:] if ln != lines[0] and "~done_" not in ln]
    old.write_text("\n".join([lines[0], *body]) + "\n")
    return [lines[0], *body]


def test_an_old_log_with_a_restart_and_no_marks_is_refused_with_what_to_do(tmp_path, capsys):
    log, old = tmp_path / "marked.csv", tmp_path / "old.csv"
    monitor = _monitor(log)
    _profile(monitor, stop_after=4)  # killed after four limits ...
    _profile(monitor)  # ... and run again: the old log holds 300-225 W twice, then 200-100 W
    lines = _unmarked(log, old)
    restart = next(n for n, ln in enumerate(lines[1:], 2) if "Optimizer_300" in ln and n > 2)
    code, out, err = _replay(capsys, old)
    assert code == 2 and out == ""
    line = _one_line(err)
    assert f"line {restart}: window __GlobalPowerLimitOptimizer_300 again (first on line 2)" in line
    assert f"copy the header line above line {restart}" in line
    with pytest.raises(TraceFormatError, match="restarted profiling run"):
        ReplaySystem(old)  # the Python API refuses alike
    # done as told: two runs, neither marked finished, so the user picks one
    lines.insert(restart - 1, lines[0])
    old.write_text("\n".join(lines) + "\n")
    code, out, err = _replay(capsys, old)
    assert code == 2 and "choose one with --run N" in _one_line(err)
    assert "run 1 (lines 2-5: 4 limit(s) 300-225 W, not marked finished)" in err
    code, got, err = _replay(capsys, old, "--run", "2", "--json")
    assert code == 0 and got["power_limit"] == 200.0, err


def test_an_old_log_with_a_limit_twice_in_a_row_is_refused(tmp_path, capsys):
    """Consecutive rows of one limit: pieces of a window (an older zeus-nb) or a restart after
    the first limit; the message offers both fixes, and summing neither."""
    old = tmp_path / "pieces.csv"
    old.write_text(
        ",".join(HEADER) + "\n"
        "1.0,__GlobalPowerLimitOptimizer_300,12.0,3112.4\n"
        "13.0,__GlobalPowerLimitOptimizer_300,12.0,3112.4\n"
        "25.0,__GlobalPowerLimitOptimizer_275,24.0,6122.3\n"
    )
    code, out, err = _replay(capsys, old)
    assert code == 2 and out == ""
    line = _one_line(err)
    assert "line 3: window __GlobalPowerLimitOptimizer_300 again, right after line 2" in line
    assert "copy the header line" in line and "merge both into one row" in line


def test_an_old_log_with_a_header_per_monitor_but_no_end_rows(tmp_path, capsys, alone):
    """zeus-nb before the end rows: each monitor's header split runs, nothing said which run
    finished; still refused with the runs listed, and --run picks one."""
    log = tmp_path / "two.csv"
    _profile(_monitor(log))
    _profile(_monitor(log), stop_after=3)
    log.write_text("".join(ln for ln in log.open() if "~done_" not in ln))
    code, out, err = _replay(capsys, log)
    assert code == 2 and out == ""
    line = _one_line(err)
    assert "holds 2 profiling runs and none is marked finished" in line
    assert "run 2 (lines 12-14: 3 limit(s) 300-250 W, not marked finished)" in line
    code, out, err = _replay(capsys, log, "--run", "1")
    assert code == 0 and "chosen power limit: 200 W" in out, err


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--run", "3"], "no run 3; the log holds 2 run(s)"), (["--run", "0"], "--run")],
)
def test_a_run_the_log_lacks_is_one_line_saying_so(tmp_path, capsys, args, message):
    log = tmp_path / "two.csv"
    _profile(_monitor(log))
    _profile(_monitor(log), stop_after=2)
    code, out, err = _replay(capsys, log, *args)
    assert code == 2 and out == ""
    assert message in _one_line(err)
