"""Bad input reaching the notebooks and the read commands: notebook parameters of the wrong
form, executed notebooks with damaged run times, read commands pointed at missing paths.

Rows of docs/reliability.md name these tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

import zeus_nb
from zeus_nb import course
from zeus_nb.cli import main
from zeus_nb.course import CourseError

ROOT = Path(zeus_nb.__file__).resolve().parents[1]

# Runs a shipped notebook's first cells (parameters, then each cell up to the one that parses
# the number-list parameters) once per override set, printing one JSON line per set: the
# parsed lists, or the error's type and message. Each set starts from the defaults.
_RUNNER = r"""
import json, sys
cells, names, variants, out_dir = json.loads(sys.stdin.read())
scope = {}
for source in cells[:-1]:
    exec(source, scope)
defaults = dict(scope)
for overrides in variants:
    scope = {**defaults, **overrides, "out_dir": out_dir}
    try:
        exec(cells[-1], scope)
        print(json.dumps({"ok": {n: scope[n] for n in names}}))
    except Exception as e:
        print(json.dumps({"error": [type(e).__name__, str(e)]}))
"""


def _first_cells(notebook: str, names: list[str]) -> list[str]:
    """The parameters cell and the code cells after it up to the first that uses ``names``."""
    nb = nbformat.read(ROOT / "notebooks" / notebook, as_version=4)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    assert code[0].lstrip().startswith("backend: str")  # the parameters cell
    end = next(i for i, src in enumerate(code) if i > 0 and names[-1] in src)
    return code[: end + 1]


def _parse_parameters(tmp_path, notebook, names, variants) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ZEUS_NB_BACKEND": "sim", "MPLBACKEND": "Agg"}
    payload = json.dumps([_first_cells(notebook, names), names, variants, str(tmp_path)])
    run = subprocess.run(
        [sys.executable, "-c", _RUNNER],
        input=payload,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    return [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]


@pytest.mark.slow  # runs a notebook's first cells in a subprocess
def test_notebook_number_list_parameters_take_one_number_a_list_or_text(tmp_path):
    variants = [
        {"live_power_limits": 250},  # `-p live_power_limits 250` passes an int
        {"live_power_limits": "300, 200"},
        {"live_power_limits": [250, 150.5], "live_batch_sizes": 64},
        {"live_power_limits": "nan"},
        {"live_power_limits": "300,200e3"},  # 200 kW: a unit mistake
        {"live_batch_sizes": "32,6.5"},
        {"live_power_limits": 500},  # possible for a GPU, not for the simulated A40
        {"live_power_limits": "auto"},  # the GPU's own: its maximum, middle and minimum
    ]
    got = _parse_parameters(
        tmp_path,
        "03_energy_time_tradeoff.ipynb",
        ["batch_sizes", "power_limits"],
        variants,
    )
    assert [g.get("ok") for g in got[:3]] == [
        {"batch_sizes": [32, 128, 512], "power_limits": [250.0]},
        {"batch_sizes": [32, 128, 512], "power_limits": [300.0, 200.0]},
        {"batch_sizes": [64], "power_limits": [250.0, 150.5]},
    ]
    kind, message = got[6]["error"]
    assert kind == "InputError" and "500 W lie outside" in message and "100-300 W" in message
    assert got[7]["ok"]["power_limits"] == [300.0, 200.0, 100.0]
    for g, name, item in zip(
        got[3:6],
        ["live_power_limits", "live_power_limits", "live_batch_sizes"],
        [1, 2, 2],
        strict=True,
    ):
        kind, message = g["error"]
        assert kind == "InputError", g
        assert f"notebook parameter {name}, item {item}" in message


@pytest.mark.slow  # runs a notebook's first cells in a subprocess
def test_notebook_04_batch_sizes_parameter_takes_one_number(tmp_path):
    got = _parse_parameters(
        tmp_path,
        "04_batch_size_optimizer.ipynb",
        ["candidates"],
        [{"live_batch_sizes": 64}, {"live_batch_sizes": "16,0"}],
    )
    assert got[0] == {"ok": {"candidates": [64]}}
    assert got[1]["error"][0] == "InputError"
    assert "notebook parameter live_batch_sizes, item 2" in got[1]["error"][1]


# --- course timings: a batch read over executed notebooks -----------------------------------
def _executed(path: Path, duration) -> Path:
    """An executed notebook as papermill leaves it (``duration`` None: killed mid-run)."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["papermill"] = {"duration": duration, "exception": False, "parameters": {}}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


@pytest.mark.parametrize("duration", [float("nan"), float("inf"), -3.0, "12", True, 1e12])
def test_timings_refuse_a_damaged_run_time_naming_the_notebook(tmp_path, capsys, duration):
    _executed(tmp_path / "a.ipynb", 12.5)
    bad = _executed(tmp_path / "b.ipynb", 1.0)
    nb = json.loads(bad.read_text())
    nb["metadata"]["papermill"]["duration"] = duration
    bad.write_text(json.dumps(nb))  # json writes NaN/Infinity, as a damaged file may hold
    with pytest.raises(CourseError, match=r"b\.ipynb: metadata papermill\.duration"):
        course.timings([tmp_path])
    problems: list[str] = []
    rows = course.timings([tmp_path], problems)
    assert [(r.notebook, r.seconds) for r in rows] == [("a.ipynb", 12.5)]
    assert len(problems) == 1 and str(bad) in problems[0]
    # the command prints the table of the others, names the bad one, and exits 1
    assert main(["course", "timings", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert "| a.ipynb |" in captured.out and "nan" not in captured.out
    assert "b.ipynb" not in captured.out and str(bad) in captured.err


def test_timings_name_an_unreadable_notebook_and_time_the_others(tmp_path, capsys):
    _executed(tmp_path / "a.ipynb", 3.0)
    (tmp_path / "b.ipynb").write_bytes(b"\xff\xfe not a notebook")
    (tmp_path / "c.ipynb").write_text("[1, 2]")  # JSON, not a notebook
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["course", "timings", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert "| a.ipynb |" in captured.out
    err = captured.err.strip().splitlines()
    assert len(err) == 2 and "Traceback" not in captured.err
    assert str(tmp_path / "b.ipynb") in err[0] and str(tmp_path / "c.ipynb") in err[1]
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # a read command wrote nothing
    # every notebook unreadable: one line, exit 2
    assert main(["course", "timings", str(tmp_path / "b.ipynb")]) == 2
    assert str(tmp_path / "b.ipynb") in capsys.readouterr().err


# --- the training runs' slowdown budget -----------------------------------------------------
@pytest.mark.parametrize("raw", ["inf", "nan", "-1", "0.5", "1e4", "fast"])
def test_max_slowdown_from_the_environment_is_checked(monkeypatch, raw):
    from zeus_nb.errors import InputError
    from zeus_nb.train.config import max_slowdown_factor

    monkeypatch.setenv("ZEUS_NB_MAX_SLOWDOWN", raw)
    with pytest.raises(InputError, match="environment variable ZEUS_NB_MAX_SLOWDOWN"):
        max_slowdown_factor()
    monkeypatch.setenv("ZEUS_NB_MAX_SLOWDOWN", " 1.25 ")
    assert max_slowdown_factor() == 1.25


@pytest.mark.parametrize("value", [float("inf"), float("nan"), 0.9, 1e4, "1.2", True])
def test_max_slowdown_argument_is_checked(value):
    from zeus_nb.train.config import max_slowdown_factor

    with pytest.raises(ValueError, match="maximum slowdown factor"):
        max_slowdown_factor(value)
    assert max_slowdown_factor(1.0) == 1.0


# --- a sweep's results table ----------------------------------------------------------------
@pytest.mark.parametrize("damage", [b"\xff\xfe,,\n", b'notebook,i\n"unterminated\n'])
def test_a_damaged_results_table_is_kept_aside_not_overwritten(tmp_path, caplog, damage):
    import pandas as pd

    from zeus_nb.commands.sweep import write_results

    sidecar = tmp_path / "p1.records.json"
    sidecar.write_text(json.dumps({"records": {"i": 1}}))
    (tmp_path / "results.csv").write_bytes(damage)
    with caplog.at_level("WARNING"):
        csv, _ = write_results(tmp_path, [sidecar])
    assert (tmp_path / "results.csv.damaged").read_bytes() == damage
    assert "results.csv.damaged" in caplog.text and str(csv) in caplog.text
    assert list(pd.read_csv(csv)["i"]) == [1]


# --- relative output paths (the runner `zeus-nb tour` and `sweep` share) ---------------------
def test_a_relative_tour_output_keeps_the_records_beside_the_notebook(tmp_path, monkeypatch):
    from zeus_nb.runner.notebooks import run_notebook

    nb = nbformat.v4.new_notebook()
    kernel = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["kernelspec"] = kernel
    nb.cells = [nbformat.v4.new_code_cell("import zeus_nb\nzeus_nb.record('seen', 7)")]
    nbformat.write(nb, tmp_path / "toy.ipynb")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.delenv("ZEUS_NB_RECORD_FILE", raising=False)
    res = run_notebook("toy.ipynb", Path("runs/tour/toy.ipynb"), timeout=120)
    assert res.ok, res.error
    side = tmp_path / "runs" / "tour" / "toy.records.json"
    assert json.loads(side.read_text())["records"] == {"seen": 7}
    assert not (tmp_path / "runs" / "tour" / "runs").exists()


# --- read commands never write ----------------------------------------------------------------
_LOG = ROOT / "zeus_nb" / "resources" / "zeus_profiles" / "A40+resnet50+gpu0.csv"


@pytest.mark.parametrize(
    ("argv", "status"),
    [
        (["plo", "replay", str(_LOG), "--json"], 0),
        (["tradeoff", "savings"], 0),
        (["tradeoff", "pareto", "--workload", "imagenet"], 0),
        (["bso", "simulate", "--workload", "cifar100", "--recurrences", "3"], 0),
        (["bso", "show"], 0),
        (["bso", "show", "a-job"], 2),
        (["restore"], 0),
        (["course", "timings", "{data}"], 0),
        (["course", "timings", "{data}/missing"], 2),
        (["plo", "replay", "{data}/missing.csv"], 2),
    ],
)
def test_read_commands_create_nothing(tmp_path, monkeypatch, capsys, argv, status):
    data = tmp_path / "data"
    _executed(data / "run.ipynb", 4.0)
    home = tmp_path / "home"
    home.mkdir()
    for var, value in {"HOME": home, "XDG_CACHE_HOME": home / ".cache"}.items():
        monkeypatch.setenv(var, str(value))
    monkeypatch.delenv("ZEUS_NB_STATE_DIR", raising=False)
    monkeypatch.chdir(home)
    before = sorted(tmp_path.rglob("*"))
    assert main([a.format(data=data) for a in argv]) == status, capsys.readouterr()
    assert sorted(tmp_path.rglob("*")) == before


# --- a notebook that is not one ---------------------------------------------------------------
@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"cells": 5}', ""])
def test_sweep_of_a_file_that_is_not_a_notebook_is_one_line(tmp_path, capsys, content):
    bad = tmp_path / "bad.ipynb"
    bad.write_text(content)
    out = tmp_path / "out"
    assert main(["sweep", str(bad), "-p", "a", "1", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(bad) in err and "not a readable notebook" in err
    assert not out.exists()  # refused before the output folder was made


def test_verify_still_reports_every_notebook_when_one_has_no_run_time(
    tmp_path, monkeypatch, capsys
):
    from types import SimpleNamespace

    from zeus_nb.commands import course as course_command

    out = tmp_path / "executed"

    def fake_verify(course_dir, out_dir, *args):
        # one solution timed by papermill, one killed before papermill wrote its run time
        _executed(Path(out_dir) / "solution" / "01.ipynb", 9.0)
        _executed(Path(out_dir) / "solution" / "02.ipynb", None)
        return [
            SimpleNamespace(ok=True, version="solution", notebook="01.ipynb", detail="ran"),
            SimpleNamespace(ok=False, version="solution", notebook="02.ipynb", detail="killed"),
        ]

    # the command's own name (bound when it was imported, which another test may have done)
    monkeypatch.setattr(course_command, "verify", fake_verify)
    (tmp_path / "course").mkdir()
    assert main(["course", "verify", str(tmp_path / "course"), "-o", str(out)]) == 1
    captured = capsys.readouterr()
    assert "FAIL solution 02.ipynb: killed" in captured.out
    assert "1 of 2 executions failed" in captured.out
    assert "| 01.ipynb |" in (out / "timings.md").read_text()
    assert "02.ipynb" in captured.err and "Traceback" not in captured.err


COUNT_CASES = [
    ("01_measuring_energy.ipynb", ["batch_size"], {"epochs": -1}),
    ("01_measuring_energy.ipynb", ["batch_size"], {"steps_per_epoch": 0}),
    ("01_measuring_energy.ipynb", ["batch_size"], {"batch_size": 2.5}),
    ("01_measuring_energy.ipynb", ["sample_period"], {"sample_period": float("nan")}),
    ("02_power_limit_optimizer.ipynb", ["steps_per_epoch"], {"warmup_steps": -1}),
    ("02_power_limit_optimizer.ipynb", ["steps_per_epoch"], {"profile_steps": 0}),
    ("02_power_limit_optimizer.ipynb", ["steps_per_epoch"], {"epochs": 2.5}),
    ("03_energy_time_tradeoff.ipynb", ["power_limits"], {"max_epochs": 0}),
    ("04_batch_size_optimizer.ipynb", ["candidates"], {"live_recurrences": -2}),
    ("04_batch_size_optimizer.ipynb", ["candidates"], {"compare_seeds": 0}),
]


@pytest.fixture(scope="module")
def count_results(tmp_path_factory):
    """Each notebook's cases of :data:`COUNT_CASES` (and its defaults) run in one subprocess, as
    they are asked for: each override set starts from the defaults, so one interpreter serves
    them all and pays for the notebook's imports once."""
    runs: dict[tuple[str, tuple[str, ...]], dict[str, dict]] = {}

    def result(notebook: str, names: list[str], bad: dict) -> tuple[dict, dict]:
        key = (notebook, tuple(names))
        if key not in runs:
            bads = [b for nb, n, b in COUNT_CASES if (nb, tuple(n)) == key]
            got = _parse_parameters(tmp_path_factory.mktemp("counts"), notebook, names, [*bads, {}])
            runs[key] = {repr(b): g for b, g in zip([*bads, {}], got, strict=True)}
        return runs[key][repr(bad)], runs[key][repr({})]

    return result


@pytest.mark.slow  # runs a notebook's first cells in a subprocess
@pytest.mark.parametrize(("notebook", "names", "bad"), COUNT_CASES)
def test_notebook_count_parameters_must_be_whole_and_positive(count_results, notebook, names, bad):
    # epochs=-1 once ran no training and recorded 0 J and 0 W with status ok
    got, defaults = count_results(notebook, names, bad)
    (name,) = bad
    assert got["error"][0] == "InputError", got
    assert f"notebook parameter {name}" in got["error"][1]
    assert "ok" in defaults, defaults  # the defaults pass


def test_grade_of_missing_submissions_creates_no_output_folder(tmp_path, capsys):
    out = tmp_path / "graded"
    missing = tmp_path / "no-such-submissions"
    assert main(["course", "grade", str(missing), "-o", str(out)]) == 2
    assert str(missing) in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0"])
@pytest.mark.parametrize(
    "command", [["tour"], ["sweep", "01", "-p", "seed", "0"], ["course", "grade", "."]]
)
def test_cell_timeouts_must_be_finite_and_positive(tmp_path, capsys, command, value):
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exit_:
        main([*command, "--timeout", value, "-o", str(out)])
    assert exit_.value.code == 2
    assert "argument --timeout" in capsys.readouterr().err
    assert not out.exists()
