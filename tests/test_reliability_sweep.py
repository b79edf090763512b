"""Notebook sweeps: a point is its full parameter set and run settings, never a lossy file name;
output paths are checked before any work; relative paths mean what they say."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import nbformat
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import zeus_nb
from zeus_nb.cli import main
from zeus_nb.runner.notebooks import point_file, point_name

ROOT = Path(zeus_nb.__file__).resolve().parents[1]


def _toy(path: Path) -> Path:
    """A parameterised notebook that records its parameters back."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    params = nbformat.v4.new_code_cell('a: int = 1\nlabel: str = "x"\nsmoke: bool = False')
    params.metadata["tags"] = ["parameters"]
    body = nbformat.v4.new_code_cell("import zeus_nb\nzeus_nb.record('seen', [a, label, smoke])")
    nb.cells = [params, body]
    nbformat.write(nb, path)
    return path


def _sweep(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ZEUS_NB_BACKEND": "sim"}
    env.pop("ZEUS_NB_RECORD_FILE", None)
    return subprocess.run(
        [sys.executable, "-m", "zeus_nb", "sweep", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow  # runs notebooks: zeus-nb sweep in a subprocess
def test_points_whose_names_collide_still_run_and_report_separately(tmp_path):
    nb = _toy(tmp_path / "toy.ipynb")
    values = "/tmp/x/a,/tmp/x_a"  # both read _tmp_x_a in a file name
    res = _sweep(tmp_path, str(nb), "-p", "label", values, "-o", str(tmp_path / "out"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "done already" not in res.stdout
    table = pd.read_csv(tmp_path / "out" / "results.csv")
    assert sorted(table["label"]) == ["/tmp/x/a", "/tmp/x_a"]
    assert sorted(eval(s)[1] for s in table["seen"]) == ["/tmp/x/a", "/tmp/x_a"]


@pytest.mark.slow  # runs notebooks: zeus-nb sweep in a subprocess
def test_resume_never_takes_a_smoke_run_for_a_full_run(tmp_path):
    nb = _toy(tmp_path / "toy.ipynb")
    out = str(tmp_path / "out")
    smoke = _sweep(tmp_path, str(nb), "-p", "a", "0,1", "--smoke", "-o", out)
    assert smoke.returncode == 0, smoke.stdout + smoke.stderr
    full = _sweep(tmp_path, str(nb), "-p", "a", "0,1", "-o", out)
    assert full.returncode == 0, full.stdout + full.stderr
    assert "done already" not in full.stdout
    table = pd.read_csv(Path(out) / "results.csv")
    seen = sorted(tuple(eval(s.replace("true", "True").replace("false", "False")))
                  for s in table["seen"])  # fmt: skip
    assert seen == [(0, "x", False), (0, "x", True), (1, "x", False), (1, "x", True)]
    again = _sweep(tmp_path, str(nb), "-p", "a", "0,1", "-o", out)
    assert again.stdout.count("done already, skipped") == 2  # full runs are resumed


@pytest.mark.slow  # runs notebooks: zeus-nb sweep in a subprocess
def test_a_relative_output_dir_keeps_the_records_beside_the_notebooks(tmp_path):
    nb = _toy(tmp_path / "toy.ipynb")
    res = _sweep(tmp_path, str(nb), "-p", "a", "2", "-o", "runs/x")
    assert res.returncode == 0, res.stdout + res.stderr
    assert (tmp_path / "runs" / "x" / "a=2.records.json").exists()
    assert not (tmp_path / "runs" / "x" / "runs").exists()


# --- output path mistakes: one line, exit 2, before any work ---------------------------------
def _unwritable() -> Path:
    if os.geteuid() != 0:
        return Path("/proc/1/zeus-nb-out")  # nobody may create folders there
    if not Path("/sys").is_dir():
        pytest.skip("no folder this root user cannot write to")
    return Path("/sys/zeus-nb-out")  # sysfs refuses even root


@pytest.mark.parametrize("command", ["sweep", "tour", "course build", "course grade"])
@pytest.mark.parametrize("mistake", ["a file", "below a file", "unwritable"])
def test_output_path_mistakes_are_one_line(tmp_path, capsys, command, mistake):
    a_file = tmp_path / "results.txt"
    a_file.write_text("not a folder")
    target = {
        "a file": a_file,
        "below a file": a_file / "out",
        "unwritable": _unwritable(),
    }[mistake]
    argv = {
        "sweep": ["sweep", str(_toy(tmp_path / "toy.ipynb")), "-p", "a", "1"],
        "tour": ["tour", "--only", "01"],
        "course build": ["course", "build"],
        "course grade": ["course", "grade", str(tmp_path)],
    }[command]
    assert main([*argv, "-o", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("zeus-nb: error: ")
    assert str(target.parent if mistake == "below a file" else target) in err
    assert "Traceback" not in err


# --- point names ------------------------------------------------------------------------------
values = st.one_of(
    st.integers(-5, 300),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.text(max_size=12),
    st.sampled_from(["1", "1.0", "True", "a b", "a/b", "a_b", "x~smoke", "é", "0.5"]),
)
grids = st.dictionaries(st.sampled_from(["a", "b", "label", "out dir"]), values, max_size=3)


@settings(max_examples=300, deadline=None)
@given(p=grids, q=grids, smoke_p=st.booleans(), smoke_q=st.booleans())
def test_distinct_points_get_distinct_files(p, q, smoke_p, smoke_q):
    fp, fq = point_file("03.ipynb", p, smoke_p), point_file("03.ipynb", q, smoke_q)
    for f in (fp, fq):
        assert len(f.encode()) < 250 and "/" not in f and "\0" not in f
    same = (smoke_p == smoke_q) and repr(sorted(p.items())) == repr(sorted(q.items()))
    if not same:
        assert fp != fq, (p, q)


def test_plain_points_keep_their_readable_names():
    assert point_file("nb.ipynb", {"batch_size": 64, "power_limit": 200.0}) == (
        "batch_size=64,power_limit=200.0"
    )
    assert point_file("nb.ipynb", {"a": 1}, smoke=True) == "a=1~smoke"
    lossy = point_file("nb.ipynb", {"out_dir": "/tmp/x"})
    assert lossy.startswith(point_name({"out_dir": "/tmp/x"}) + "~")


# --- the results table ------------------------------------------------------------------------
def test_concurrent_sweeps_into_one_folder_keep_every_row_once(tmp_path):
    import json

    from zeus_nb.commands.sweep import write_results

    def sidecar(i: int) -> Path:
        p = tmp_path / f"p{i}.records.json"
        p.write_text(json.dumps({"records": {"i": i}}))
        return p

    groups = [[sidecar(i) for i in range(k, k + 10)] for k in (0, 10, 20)]
    groups.append(groups[0][:5])  # a second sweep over some of the same points
    threads = [threading.Thread(target=write_results, args=(tmp_path, g)) for g in groups * 3]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    table = pd.read_csv(tmp_path / "results.csv")
    assert sorted(table["i"]) == list(range(30))
