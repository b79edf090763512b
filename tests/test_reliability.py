"""Bad input gets a clear error, never a wrong number with exit 0, a lost or a stale result.

Each test here reproduces one way a careless user (or a damaged file) once got a wrong answer
silently; the rows of docs/reliability.md name these tests.
"""

from __future__ import annotations

import csv
import json
import math
import os
import socket
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from zeus_nb import device
from zeus_nb.cli import main
from zeus_nb.device.recovery import restore_from_state_files
from zeus_nb.errors import ZeusNbError
from zeus_nb.monitor import ZeusMonitor

PROFILES = resources.files("zeus_nb") / "resources" / "zeus_profiles"
LOG = "A40+resnet50+gpu0.csv"
A40_TRACE = resources.files("zeus_nb") / "resources" / "zeus_traces" / "summary_power_a40.csv"


def _log_rows() -> list[list[str]]:
    with (PROFILES / LOG).open(newline="") as f:
        return list(csv.reader(f))


def _write_log(path: Path, rows: list[list[str]], cut: int = 0) -> Path:
    with path.open("w", newline="") as f:
        csv.writer(f).writerows(rows)
    if cut:
        path.write_bytes(path.read_bytes()[:-cut])
    return path


def _energy_optimum(rows: list[list[str]]) -> float:
    """The lowest-energy limit of a log, computed here from its cells."""
    energy = {float(r[1].rsplit("_", 1)[1]): float(r[3]) for r in rows[1:]}
    return min(energy, key=energy.get)


# --- plo replay -----------------------------------------------------------------------------
def test_replay_of_a_clean_log_still_picks_the_logged_optimum(capsys):
    rows = _log_rows()
    assert main(["plo", "replay", str(PROFILES / LOG), "--selector", "energy", "--json"]) == 0
    out = json.loads(capsys.readouterr().out, parse_constant=_no_constant)
    assert out["power_limit"] == _energy_optimum(rows)


def _no_constant(name: str):
    raise AssertionError(f"the JSON output holds {name}, which is not JSON")


@pytest.mark.parametrize(
    ("row", "col", "value", "match"),
    [
        (3, 3, "nan", r"line 4, column gpu0_energy: 'nan' is not a finite number"),
        (3, 2, "0", r"line 4, column elapsed_time: a profiling window of 0 s"),
        (3, 2, "inf", r"line 4, column elapsed_time: 'inf' is not a finite"),
        (3, 3, "-5", r"line 4, column gpu0_energy: '-5' is out of range"),
        # energy written in mJ: each value alone is possible, the power (250 kW) is not
        (
            3,
            3,
            "5915574.0",
            r"line 4, column gpu0_energy: 5\.91557e\+06 J over 24\.1632 s .* out of range"
            r".*energy is in J",
        ),
    ],
)
def test_replay_refuses_a_bad_cell_naming_line_and_column(tmp_path, capsys, row, col, value, match):
    rows = _log_rows()
    rows[row][col] = value
    log = _write_log(tmp_path / "log.csv", rows)
    assert main(["plo", "replay", str(log), "--selector", "energy", "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.strip().splitlines()) == 1
    assert str(log) in captured.err
    import re

    assert re.search(match, captured.err), captured.err


def test_replay_drops_a_row_cut_mid_line_with_a_warning(tmp_path, capsys, caplog):
    """A last row without its line end is a write cut short (a full disk, a killed run): it is
    dropped, said so, and the replay is that of the log without it, never of a cut number."""
    rows = _log_rows()
    log = _write_log(tmp_path / "log.csv", rows, cut=10)  # inside the last number: it parses
    whole = _write_log(tmp_path / "whole.csv", rows[:-1])
    with caplog.at_level("WARNING"):
        assert main(["plo", "replay", str(log), "--json"]) == 0
    assert "line 10" in caplog.text and "dropped" in caplog.text
    got = json.loads(capsys.readouterr().out)["power_limit"]
    assert main(["plo", "replay", str(whole), "--json"]) == 0
    assert got == json.loads(capsys.readouterr().out)["power_limit"]


def test_replay_refuses_a_row_with_missing_cells_of_another_window(tmp_path, capsys):
    rows = _log_rows()
    rows.insert(3, ["13585800.0", "__GlobalPowerLimitOptim"])  # cut inside the window name
    log = _write_log(tmp_path / "log.csv", rows)
    assert main(["plo", "replay", str(log)]) == 2
    assert "line 4: 2 fields, expected 4" in capsys.readouterr().err


# --- restore --------------------------------------------------------------------------------
def _state(folder: Path, name: str, pid, limit=200.0) -> Path:
    path = folder / name
    state = {
        "format": "zeus-nb device settings",
        "host": socket.gethostname(),
        "pid": pid,
        "backend": "sim",
        "cuda_visible_devices": None,
        "settings": [{"gpu": 0, "kind": "power_limit", "original": limit}],
    }
    path.write_text(json.dumps(state))
    return path


@pytest.mark.parametrize("bad_pid", ["abc", None, -3, 1.5, True, "12", 2**40])
def test_restore_handles_each_state_file_alone(tmp_path, capsys, bad_pid):
    dead_pid = _dead_pid()
    good = _state(tmp_path, "a-good.json", dead_pid)
    bad = _state(tmp_path, "b-bad.json", bad_pid)
    also_good = _state(tmp_path, "c-good.json", dead_pid)
    assert main(["restore", "--state-dir", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert f"failed: {bad.name}:" in out and ".pid:" in out
    assert f"restored: {good.name}" in out and f"restored: {also_good.name}" in out
    assert not good.exists() and not also_good.exists() and bad.exists()


@pytest.mark.parametrize("limit", ["nan", float("inf"), -200.0, 200_000.0, "200"])
def test_restore_refuses_an_impossible_recorded_limit(tmp_path, limit):
    path = _state(tmp_path, "x.json", _dead_pid(), limit=limit)
    (result,) = restore_from_state_files(tmp_path)
    assert result.action == "failed" and "original" in result.detail, result.detail
    assert path.exists()


def _dead_pid() -> int:
    """The pid of a process that has finished."""
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


# --- the monitor's log ----------------------------------------------------------------------
def test_end_window_returns_the_measurement_when_the_log_write_fails(tmp_path, caplog):
    system = device.use_simulated()
    log_file = tmp_path / "logs" / "monitor.csv"
    monitor = ZeusMonitor(log_file=log_file)
    log_file.unlink()
    log_file.parent.rmdir()
    log_file.parent.write_text("a file where the log's folder was")  # appends now fail
    monitor.begin_window("w")
    system.step(10)
    t_step, watts = system.step_cost(system.batch_size, system.gpu(0).get_power_limit())
    with caplog.at_level("WARNING"):
        m = monitor.end_window("w")
    assert m.time == pytest.approx(10 * t_step)
    assert m.gpu_energy[0] == pytest.approx(10 * t_step * watts)
    assert str(log_file) in caplog.text and "returned" in caplog.text
    # the row is written as soon as the log can be written again
    log_file.parent.unlink()
    log_file.parent.mkdir()
    log_file.write_text(",".join(monitor._log.header) + "\n")
    monitor.begin_window("v")
    with pytest.warns(UserWarning, match="step"):  # an empty window is worth a hint, not silence
        monitor.end_window("v")
    names = [r["window_name"] for r in csv.DictReader(log_file.open())]
    assert names == ["w", "v"]


# --- simulated GPU settings -----------------------------------------------------------------
@pytest.mark.parametrize("noise", ["nan", "inf", "-0.1", "abc", "5"])
def test_sim_noise_from_the_environment_is_checked(monkeypatch, noise):
    monkeypatch.setenv("ZEUS_NB_SIM_NOISE", noise)
    with pytest.raises(ZeusNbError, match="ZEUS_NB_SIM_NOISE"):
        device.current("sim")


@pytest.mark.parametrize("noise", [math.nan, math.inf, -0.1, 5.0])
def test_sim_noise_parameter_is_checked(noise):
    with pytest.raises(ZeusNbError, match="parameter noise"):
        device.use_simulated(noise=noise)


@pytest.mark.parametrize(
    ("var", "value"),
    [("ZEUS_NB_SIM_GPUS", "0"), ("ZEUS_NB_SIM_SEED", "-1"), ("ZEUS_NB_SIM_BATCH_SIZE", "x")],
)
def test_sim_integer_variables_are_checked(monkeypatch, var, value):
    monkeypatch.setenv(var, value)
    with pytest.raises(ZeusNbError, match=var):
        device.current("sim")


# --- power traces and the demo ----------------------------------------------------------------
@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "0.25"])  # 0.25 W: kW written as W
def test_demo_refuses_a_trace_with_an_impossible_power(tmp_path, capsys, value):
    lines = A40_TRACE.read_text().splitlines()
    header = lines[0].split(",")
    col = header.index("average_power")
    i = next(n for n, line in enumerate(lines) if line.startswith("cifar100,"))
    cells = lines[i].split(",")
    cells[col] = value
    lines[i] = ",".join(cells)
    trace = tmp_path / "trace.csv"
    trace.write_text("\n".join(lines) + "\n")
    assert main(["demo", "--gpu", str(trace), "--workload", "cifar100", "--epochs", "1"]) == 2
    captured = capsys.readouterr()
    assert " J" not in captured.out
    assert f"line {i + 1}, column average_power" in captured.err


# --- the CLI --------------------------------------------------------------------------------
def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "zeus_nb", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "ZEUS_NB_BACKEND": "sim", **(env or {})},
    )


def test_cli_prints_one_line_for_a_path_mistake_and_a_traceback_on_debug(tmp_path):
    folder = tmp_path / "a-folder"
    folder.mkdir()
    plain = _cli("plo", "replay", str(folder))
    assert plain.returncode == 2
    assert "Traceback" not in plain.stderr and len(plain.stderr.strip().splitlines()) == 1
    assert str(folder) in plain.stderr
    for debug in (
        _cli("--debug", "plo", "replay", str(folder)),
        _cli("plo", "replay", str(folder), env={"ZEUS_NB_DEBUG": "1"}),
    ):
        assert debug.returncode != 0 and "Traceback" in debug.stderr


def test_os_errors_name_the_path_and_what_to_do():
    from zeus_nb.cli import describe_os_error

    line = describe_os_error(PermissionError(13, "Permission denied", "/ro/out"))
    assert line.startswith("/ro/out: permission denied;") and "choose a path" in line
    line = describe_os_error(FileExistsError(17, "File exists", "/x/file"))
    assert "/x/file" in line and "a file is in the way" in line


# --- read commands never write --------------------------------------------------------------
def test_doctor_writes_nothing(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"), "ZEUS_NB_STATE_DIR": ""}
    result = _cli("doctor", "--backend", "sim", env=env)
    assert result.returncode == 0, result.stderr
    assert list(home.rglob("*")) == []


def test_restore_state_dir_that_is_a_file(tmp_path, capsys):
    not_a_folder = tmp_path / "state.json"
    not_a_folder.write_text("{}")
    assert main(["restore", "--state-dir", str(not_a_folder)]) == 2
    err = capsys.readouterr().err
    assert str(not_a_folder) in err and "choose another path" in err


# --- batch operations -----------------------------------------------------------------------
def test_collect_reports_an_unreadable_notebook_and_reads_the_others(tmp_path):
    import nbformat

    from zeus_nb.runner.records import MIMETYPE, collect

    good = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("x")
    cell.outputs = [
        nbformat.v4.new_output("display_data", data={MIMETYPE: {"name": "energy", "value": 5.0}})
    ]
    good.cells = [cell]
    nbformat.write(good, tmp_path / "a.ipynb")
    (tmp_path / "b.ipynb").write_text("{ not json")
    before = sorted(p.name for p in tmp_path.iterdir())
    df = collect(tmp_path).set_index("notebook")
    assert df.loc[str(tmp_path / "a.ipynb"), "energy"] == 5.0
    bad = df.loc[str(tmp_path / "b.ipynb")]
    assert bad["status"] == "unreadable" and "b.ipynb" in bad["error"]
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # reading wrote nothing


# --- docs/reliability.md stays true ---------------------------------------------------------
def _table_tests() -> list[str]:
    doc = (Path(__file__).resolve().parents[1] / "docs" / "reliability.md").read_text()
    rows = [line for line in doc.splitlines() if line.startswith("| ") and "::" in line]
    return [row.rstrip(" |").rsplit("| ", 1)[1].strip("` ") for row in rows]


def test_every_row_of_the_reliability_table_names_an_existing_test():
    import ast

    named = _table_tests()
    assert len(named) >= 20
    root = Path(__file__).resolve().parents[1]
    for ref in named:
        file, name = ref.split("::")
        tree = ast.parse((root / file).read_text())
        defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        assert name in defined, f"docs/reliability.md names {ref}, which does not exist"


# --- the power-limit optimizer --------------------------------------------------------------
def _optimizer(**kw):
    from zeus_nb.optimizer import GlobalPowerLimitOptimizer
    from zeus_nb.optimizer.power_limit.selectors import Energy

    args = dict(wait_steps=0, warmup_steps=1, profile_steps=3, verbose=False)
    return GlobalPowerLimitOptimizer(ZeusMonitor(), Energy(), **{**args, **kw})


def _profile(tmp_path) -> Path:
    """A profile saved by a real (simulated) profiling run."""
    path = tmp_path / "plo.json"
    device.use_simulated()
    plo = _optimizer(profile_path=path)
    while not plo.done:
        plo.on_step_begin()
        device.step()
        plo.on_step_end()
    plo.close()
    return path


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("energy", math.nan),
        ("energy", -1.0),
        ("time", -24.0),
        ("time", math.inf),
        ("time", 0.0),
        ("energy", "6000"),
        ("power_limit", 1e6),
        ("energy", 6e9),  # mJ written as J: 250 kW
    ],
)
def test_a_damaged_saved_profile_is_refused_not_applied(tmp_path, field, value):
    from zeus_nb.optimizer.power_limit.profile_file import ProfileError

    path = _profile(tmp_path)
    data = json.loads(path.read_text())
    data["measurements"][-1][field] = value
    path.write_text(json.dumps(data))
    device.use_simulated()
    with pytest.raises(ProfileError, match=r"measurements\[\d+\]\.?.*delete it"):
        _optimizer(profile_path=path)
    assert device.current().gpu(0).get_power_limit() == 300.0  # nothing applied


def test_callbacks_out_of_order_name_the_expected_order():
    from zeus_nb.errors import CallbackOrderError

    device.use_simulated()
    plo = _optimizer()
    plo.on_epoch_begin()
    plo.on_step_begin()  # a loop that calls on_step_end (Zeus's loops need not) is held to it
    plo.on_step_end()
    plo.on_step_begin()
    device.step()
    with pytest.raises(CallbackOrderError, match="on_epoch_end.*on_step_begin.*on_step_end"):
        plo.on_epoch_end()
    with pytest.raises(CallbackOrderError, match="on_step_begin"):
        plo.on_step_begin()  # the previous step never ended
    plo.on_step_end()  # the order resumes where it was
    with pytest.raises(CallbackOrderError, match="on_step_end.*without on_step_begin"):
        plo.on_step_end()
    plo.on_epoch_end()


def test_an_epoch_end_mid_step_no_longer_changes_the_choice():
    """The same run, with and without a misplaced on_epoch_end: same measurements or an error."""
    from zeus_nb.errors import CallbackOrderError

    def profile(misplaced: bool):
        device.use_simulated()
        plo = _optimizer()
        while not plo.done:
            plo.on_step_begin()
            if misplaced and plo.phase == "profile":
                with pytest.raises(CallbackOrderError):
                    plo.on_epoch_end()
            device.step()
            plo.on_step_end()
        plo.close()
        return [(m.power_limit, m.time, m.energy) for m in plo.measurements]

    assert profile(misplaced=True) == profile(misplaced=False)


@pytest.mark.parametrize("empty", [False, True])
def test_bso_show_reports_a_missing_or_empty_store_without_creating_it(tmp_path, capsys, empty):
    store = tmp_path / "bso.sqlite3"
    if empty:
        store.touch()
    assert main(["bso", "show", "--store", str(store)]) == 0
    assert "no jobs" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == (["bso.sqlite3"] if empty else [])
    assert not empty or store.stat().st_size == 0
    assert main(["bso", "show", "job", "--store", str(store)]) == 2
    assert "no batch-size optimizer state" in capsys.readouterr().err


# --- sweeps: one row per configuration, whoever writes ----------------------------------------
_WRITER = """
import pathlib, sys
from zeus_nb.runner.sweep import _append

def write(path):
    for b in range(1, 31):
        _append(path, {"batch_size": b, "power_limit": 150.0, "epochs": 1, "metric": 0.5,
                "reached": True, "time": 2.0, "energy": 300.0, "target_metric": 0.5,
                "max_epochs": 3, "higher_is_better": True, "pad": "x" * 5000})

if __name__ == "__main__":
    write(pathlib.Path(sys.argv[1]))
"""


def test_concurrent_writers_never_duplicate_or_tear_a_row(tmp_path):
    import threading

    path = tmp_path / "results.jsonl"
    import zeus_nb

    env = {**os.environ, "PYTHONPATH": str(Path(zeus_nb.__file__).resolve().parents[1])}
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(path)], env=env) for _ in range(3)
    ]
    namespace: dict = {"__name__": "writer"}
    exec(_WRITER, namespace)
    threads = [threading.Thread(target=namespace["write"], args=(path,)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(p.wait(timeout=120) == 0 for p in procs)
    lines = path.read_text().splitlines()
    rows = [json.loads(line) for line in lines]  # no torn line
    assert sorted(r["batch_size"] for r in rows) == list(range(1, 31))  # no duplicate


@pytest.mark.parametrize(
    ("field", "value"),
    [("energy", "NaN"), ("time", "-1"), ("power_limit", "1e6"), ("energy", '"5"')],
)
def test_a_sweep_results_line_with_a_bad_number_is_refused(tmp_path, field, value):
    from zeus_nb.runner.sweep import SweepResultsError, load_results

    good = {"batch_size": 32, "power_limit": 150.0, "epochs": 2, "metric": 0.6, "reached": True,
            "time": 20.0, "energy": 3000.0, "target_metric": 0.5, "max_epochs": 5,
            "higher_is_better": True}  # fmt: skip
    line = json.dumps(good).replace(f'"{field}": {json.dumps(good[field])}', f'"{field}": {value}')
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps({**good, "batch_size": 64}) + "\n" + line + "\n")
    with pytest.raises(SweepResultsError, match=f"line 2.*{field}"):
        load_results(path)


@pytest.mark.parametrize(
    "argv",
    [
        ["plo", "replay", "LOG", "--eta", "nan"],
        ["plo", "replay", "LOG", "--selector", "max-slowdown", "--factor", "inf"],
        ["demo", "--power-limit", "nan"],
    ],
)
def test_command_line_knobs_must_be_finite(capsys, argv):
    argv = [str(PROFILES / LOG) if a == "LOG" else a for a in argv]
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert "not a finite number" in capsys.readouterr().err


def test_a_gpu_without_a_valid_energy_gets_an_empty_cell_that_no_profile_reads(tmp_path, caplog):
    """A power source without readings returns -1 J (Zeus's mocks do): the row is kept for the
    other GPU with an empty cell, with a warning, and a replay refuses to profile from it."""
    from zeus_nb.device.replay import load_profile_log
    from zeus_nb.errors import TraceFormatError
    from zeus_nb.monitor.log_file import MonitorLog

    path = tmp_path / "log.csv"
    header = ["start_time", "window_name", "elapsed_time", "gpu0_energy", "gpu1_energy"]
    owner = type("Owner", (), {})()
    log = MonitorLog(path, header, owner)
    with caplog.at_level("WARNING"):
        log.write("__GlobalPowerLimitOptimizer_200", 1.0, 2.0, [400.0, -1.0])
        log.write("__GlobalPowerLimitOptimizer_150", 3.0, 2.0, [300.0, float("nan")])
    rows = path.read_text().splitlines()
    assert rows[1:] == [
        "1.0,__GlobalPowerLimitOptimizer_200,2.0,400.0,",
        "3.0,__GlobalPowerLimitOptimizer_150,2.0,300.0,",
    ]
    assert "gpu1_energy is -1.0, not an energy" in caplog.text
    with pytest.raises(TraceFormatError, match="has no energy for GPU 1"):
        load_profile_log(path)
