"""``zeus-nb sweep``: grid parsing, one notebook per point, failures, and resuming after a kill."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pandas as pd
import pytest
from processes import descendants

from zeus_nb import cli
from zeus_nb.runner.notebooks import (
    PARTIAL_NOTEBOOK,
    find_notebook,
    grid_points,
    is_complete,
    notebooks_dir,
    parse_values,
    point_name,
)

REPO = Path(__file__).resolve().parents[1]


def _toy(path: Path, hold: Path | None = None) -> Path:
    """A tiny parameterised notebook that records a product (and fails for a == 3); with
    ``hold``, its points with a == 2 wait while that file exists."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    params = nbformat.v4.new_code_cell(
        'a: int = 1  # first factor\nb: float = 2.0  # second factor\nlabel: str = "x"  # a name'
    )
    params.metadata["tags"] = ["parameters"]
    wait = f"while a == 2 and os.path.exists({str(hold)!r}):\n    time.sleep(0.05)\n"
    body = nbformat.v4.new_code_cell(
        "import os, time\nimport zeus_nb\n"
        + (wait if hold is not None else "")
        + "if a == 3:\n    raise RuntimeError('a == 3 is not allowed')\n"
        "zeus_nb.record('product', a * b)\nzeus_nb.record('label', label)"
    )
    nb.cells = [params, body]
    nbformat.write(nb, path)
    return path


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env.pop("ZEUS_NB_RECORD_FILE", None)
    return env


def test_parse_values_types():
    assert parse_values("64,128, 256", "int") == [64, 128, 256]
    assert parse_values("150,200", "float") == [150.0, 200.0]
    assert parse_values("true,false", "bool") == [True, False]
    assert parse_values("a,b", "str") == ["a", "b"]
    assert parse_values("1,x", None) == [1, "x"]
    with pytest.raises(ValueError, match="not a valid int"):
        parse_values("64,big", "int")
    with pytest.raises(ValueError, match="no values"):
        parse_values(" , ", "int")


def test_grid_points_and_names():
    pts = grid_points({"batch_size": [64, 128], "power_limit": [150, 200]})
    assert pts[0] == {"batch_size": 64, "power_limit": 150} and len(pts) == 4
    assert point_name(pts[1]) == "batch_size=64,power_limit=200"
    assert point_name({"gpu": "a 40/x"}) == "gpu=a_40_x"
    with pytest.raises(ValueError, match="no values"):
        grid_points({"a": []})


def test_find_shipped_notebook_from_anywhere(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert notebooks_dir() == REPO / "notebooks"
    assert find_notebook("01").name == "01_measuring_energy.ipynb"
    assert find_notebook("measuring_energy").stem == "01_measuring_energy"
    with pytest.raises(FileNotFoundError, match="matches no notebook"):
        find_notebook("nonexistent")
    monkeypatch.setenv("ZEUS_NB_NOTEBOOKS", str(tmp_path / "nope"))
    with pytest.raises(FileNotFoundError, match="ZEUS_NB_NOTEBOOKS"):
        notebooks_dir()


def test_bad_parameter_is_a_clear_cli_error(tmp_path, capsys):
    nb = _toy(tmp_path / "toy.ipynb")
    assert cli.main(["sweep", str(nb), "-p", "batch", "1,2", "-o", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "has no parameter 'batch'" in err and "a, b, label" in err
    assert cli.main(["sweep", str(nb), "-p", "a", "1,x", "-o", str(tmp_path / "r")]) == 2
    assert "'x' is not a valid int" in capsys.readouterr().err


@pytest.mark.slow  # runs notebooks: zeus-nb sweep in a subprocess
def test_sweep_goes_on_past_a_failing_point(tmp_path):
    nb = _toy(tmp_path / "toy.ipynb")
    out = tmp_path / "runs"
    cmd = [sys.executable, "-m", "zeus_nb", "sweep", str(nb), "-p", "a", "3,4", "-p", "b", "0.5"]
    res = subprocess.run(
        [*cmd, "-o", str(out)], env=_env(), capture_output=True, text=True, cwd=tmp_path
    )
    assert res.returncode == 1
    assert "a=3,b=0.5: FAILED: RuntimeError: a == 3 is not allowed" in res.stdout
    assert "a=3,b=0.5" in res.stderr
    # the failing point shows its own error and nothing of the kernel's transport
    assert "IPKernelApp" not in res.stdout + res.stderr
    assert "without encryption" not in res.stdout + res.stderr
    table = pd.read_csv(out / "results.csv")
    assert table.set_index("a").status.to_dict() == {3: "failed", 4: "ok"}
    assert table.set_index("a")["product"][4] == 2.0
    assert (out / "a=4,b=0.5.records.json").exists()


def finished(out: Path) -> list[str]:
    """The points a sweep has finished: complete notebooks under their final name. A point whose
    cells all ran but which was killed before its NAME.partial.ipynb was renamed is not finished
    (on a busy machine that gap is wide enough to be hit), and the sweep runs it again."""
    return sorted(
        p.name
        for p in out.glob("*.ipynb")
        if not p.name.endswith(PARTIAL_NOTEBOOK) and is_complete(p)
    )


@pytest.mark.slow  # runs notebooks: zeus-nb sweep in a subprocess, interrupted
def test_interrupted_sweep_resumes_to_all_results(tmp_path):
    """A 6-point sweep killed after 3 finished points resumes and ends with 6 results. The
    fourth point is held until the kill, so a test slowed by a busy machine finds 3, not more."""
    hold = tmp_path / "hold"
    hold.touch()
    nb = _toy(tmp_path / "toy.ipynb", hold)
    out = tmp_path / "runs"
    cmd = [sys.executable, "-m", "zeus_nb", "sweep", str(nb), "-o", str(out)]
    cmd += ["-p", "a", "1,2", "-p", "b", "1,10,100"]
    proc = subprocess.Popen(
        cmd,
        env=_env(),
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if len(finished(out)) >= 3:
                break
            time.sleep(0.05)
    finally:
        kernels = descendants(proc.pid)  # a kernel runs in a session of its own
        os.killpg(proc.pid, signal.SIGKILL)  # the sweep
        for pid in kernels:  # and its kernel: orphaned, it would outlive a subreaper parent
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        proc.wait()
    done_before = finished(out)
    assert len(done_before) == 3, done_before
    assert not (out / "results.csv").exists()
    hold.unlink()

    res = subprocess.run(cmd, env=_env(), capture_output=True, text=True, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count("done already, skipped") == len(done_before)
    assert "6/6 point(s) done" in res.stdout
    table = pd.read_csv(out / "results.csv")
    assert len(table) == 6 and set(table.status) == {"ok"}
    assert sorted(table["product"]) == sorted(a * b for a in (1, 2) for b in (1, 10, 100))
    assert all(is_complete(out / name) for name in done_before)  # untouched, still done


def test_kernel_environment_is_restored_even_after_an_error(monkeypatch):
    from zeus_nb.runner.notebooks import kernel_environment
    from zeus_nb.utils.environ import temp_environ

    monkeypatch.setenv("ZEUS_NB_BACKEND", "nvml")
    monkeypatch.delenv("ZEUS_NB_HEADLESS", raising=False)
    before = dict(os.environ)
    with pytest.raises(KeyError), kernel_environment({"ZEUS_NB_BACKEND": "sim"}):
        assert os.environ["ZEUS_NB_HEADLESS"] == "1" and os.environ["ZEUS_NB_BACKEND"] == "sim"
        assert os.environ["PYTHONPATH"].split(os.pathsep)[0] == str(REPO)
        raise KeyError
    assert dict(os.environ) == before
    with temp_environ(ZEUS_NB_BACKEND=None):
        assert "ZEUS_NB_BACKEND" not in os.environ
    assert os.environ["ZEUS_NB_BACKEND"] == "nvml"
