"""``zeus-nb sweep --scheduler / --workers``: notebooks run on workers, the client writes."""

from __future__ import annotations

import subprocess
import sys

import nbformat
import pandas as pd
import pytest
from dask_fixture import dask_env, dask_processes  # noqa: F401 (a fixture)

from zeus_nb.runner.notebooks import is_complete

pytestmark = pytest.mark.slow


def _toy(path):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    params = nbformat.v4.new_code_cell("a: int = 1\nb: float = 2.0")
    params.metadata["tags"] = ["parameters"]
    body = nbformat.v4.new_code_cell(
        "import os\nimport zeus_nb\n"
        "if a == 3:\n    raise RuntimeError('a == 3 is not allowed')\n"
        "zeus_nb.record('product', a * b)\nzeus_nb.record('pid', os.getpid())"
    )
    nb.cells = [params, body]
    nbformat.write(nb, path)
    return path


def test_notebook_sweep_on_a_scheduler_writes_each_point_here(
    dask_processes,  # noqa: F811
    tmp_path,
):
    nb = _toy(tmp_path / "toy.ipynb")
    out = tmp_path / "runs"
    cmd = [sys.executable, "-m", "zeus_nb", "sweep", str(nb), "-p", "a", "1,2,3", "-p", "b", "0.5"]
    cmd += ["-o", str(out), "--scheduler", dask_processes.address]
    res = subprocess.run(cmd, env=dask_env(), capture_output=True, text=True, timeout=300)
    assert res.returncode == 1, res.stdout + res.stderr  # a == 3 fails, the others go on
    assert "a=3,b=0.5: FAILED: RuntimeError: a == 3 is not allowed" in res.stdout
    assert res.stdout.count(": ok (") == 2 and " on " in res.stdout
    table = pd.read_csv(out / "results.csv")
    assert table.set_index("a").status.to_dict() == {1: "ok", 2: "ok", 3: "failed"}
    assert table.set_index("a")["product"][2] == 1.0
    assert is_complete(out / "a=1,b=0.5.ipynb") and (out / "a=1,b=0.5.records.json").exists()
    assert not list(out.glob(".*.tmp"))

    # A second run skips the finished points and re-runs only the failed one.
    res = subprocess.run(
        [*cmd[:-2], "--workers", "1"], env=dask_env(), capture_output=True, text=True, timeout=300
    )
    assert res.stdout.count("done already, skipped") == 2
    assert "a=3,b=0.5: FAILED" in res.stdout
    assert len(pd.read_csv(out / "results.csv")) == 3


def test_cluster_options_are_exclusive(tmp_path, capsys):
    from zeus_nb import cli

    nb = _toy(tmp_path / "toy.ipynb")
    with pytest.raises(SystemExit):
        cli.main(["sweep", str(nb), "--workers", "2", "--scheduler", "tcp://127.0.0.1:1"])
    assert "not allowed with" in capsys.readouterr().err
