"""zeus_nb.record / zeus_nb.collect without a kernel: sidecars, notebook outputs, the table."""

from __future__ import annotations

import json
import math

import nbformat
import numpy as np
import pandas as pd
import pytest

import zeus_nb
from zeus_nb.runner import records


@pytest.fixture(autouse=True)
def _no_sidecar(monkeypatch):
    monkeypatch.delenv(records.ENV_FILE, raising=False)
    monkeypatch.delenv(records.ENV_DIR, raising=False)
    records.configure()
    records._records.clear()
    yield
    records.configure()


def _executed(path, params, recs, exception=False, end_time="2026-01-01T00:00:01"):
    """An executed-looking notebook: papermill metadata and record outputs."""
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("zeus_nb.record(...)")
    cell.outputs = [
        nbformat.v4.new_output(
            "display_data",
            data={records.MIMETYPE: {"name": k, "value": v}, "text/plain": f"{k} = {v}"},
        )
        for k, v in recs.items()
    ]
    nb.cells.append(cell)
    nb.metadata["papermill"] = {
        "parameters": params,
        "exception": exception,
        "end_time": end_time,
    }
    nbformat.write(nb, path)
    return path


def test_record_returns_value_and_writes_sidecar(tmp_path, monkeypatch):
    side = tmp_path / "out.records.json"
    monkeypatch.setenv(records.ENV_FILE, str(side))
    assert zeus_nb.record("energy", 12.5) == 12.5
    zeus_nb.record("curve", np.array([1.0, 2.0]))
    zeus_nb.record("energy", np.float32(13.0))  # replaces, numpy scalar becomes float
    data = json.loads(side.read_text())["records"]
    assert data == {"energy": 13.0, "curve": [1.0, 2.0]}
    assert records.recorded()["energy"] == 13.0


def test_record_converts_pandas_and_rejects_objects(tmp_path):
    records.configure(file=tmp_path / "r.json")
    df = pd.DataFrame({"a": [1, 2], "b": [0.5, 1.5]})
    zeus_nb.record("table", df)
    zeus_nb.record("nan", math.nan)
    got = json.loads((tmp_path / "r.json").read_text())["records"]
    assert got["table"] == [{"a": 1, "b": 0.5}, {"a": 2, "b": 1.5}]
    assert got["nan"] is None
    with pytest.raises(TypeError, match="not JSON-serialisable"):
        zeus_nb.record("bad", object())
    with pytest.raises(ValueError, match="non-empty string"):
        zeus_nb.record("", 1)


def test_record_dir_names_sidecar_after_session(tmp_path, monkeypatch):
    monkeypatch.setenv(records.ENV_DIR, str(tmp_path))
    monkeypatch.setenv("JPY_SESSION_NAME", "/home/me/02_power.ipynb")
    zeus_nb.record("x", 1)
    assert json.loads((tmp_path / "02_power.records.json").read_text())["records"] == {"x": 1}


def test_no_sidecar_without_configuration(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    zeus_nb.record("x", 1)
    assert list(tmp_path.iterdir()) == []


def test_collect_builds_one_row_per_notebook(tmp_path):
    _executed(tmp_path / "a.ipynb", {"batch_size": 64, "power_limit": 150}, {"energy": 10.0})
    _executed(tmp_path / "b.ipynb", {"batch_size": 128, "power_limit": 150}, {"energy": 7.5})
    _executed(tmp_path / "c.ipynb", {"batch_size": 256, "power_limit": 150}, {}, exception=True)
    _executed(tmp_path / "d.ipynb", {"batch_size": 512, "power_limit": 150}, {}, end_time=None)
    df = zeus_nb.collect(tmp_path)
    assert list(df.columns[:4]) == ["notebook", "status", "batch_size", "power_limit"]
    assert df.set_index("batch_size").status.to_dict() == {
        64: "ok",
        128: "ok",
        256: "failed",
        512: "incomplete",
    }
    assert df.set_index("batch_size").energy.loc[[64, 128]].tolist() == [10.0, 7.5]


def test_collect_merges_sidecar_and_renames_clashes(tmp_path):
    nb = _executed(tmp_path / "p.ipynb", {"eta": 0.5}, {"eta": 0.25})
    records.sidecar_of(nb).write_text(json.dumps({"records": {"extra": [1, 2], "eta": 9}}))
    row = zeus_nb.collect([nb]).iloc[0]
    assert row["eta"] == 0.5 and row["result.eta"] == 0.25  # the notebook's output wins
    assert row["extra"] == [1, 2]


def test_collect_reads_lone_sidecars_and_globs(tmp_path):
    (tmp_path / "x.records.json").write_text(json.dumps({"records": {"k": 3}}))
    _executed(tmp_path / "y.ipynb", {}, {"k": 4})
    assert sorted(zeus_nb.collect(tmp_path).k) == [3, 4]
    assert zeus_nb.collect(str(tmp_path / "*.ipynb")).k.tolist() == [4]
    with pytest.raises(FileNotFoundError, match="no notebook matches"):
        zeus_nb.collect(tmp_path / "missing-*.ipynb")


def test_display_rounds_floats_for_people_and_the_record_keeps_every_digit():
    from zeus_nb.runner.records import _for_people

    value = {"time_s": 24.011604165658326, "rows": [6224.8859999924825, 3], "name": "a"}
    assert _for_people(value) == {"time_s": 24.012, "rows": [6224.9, 3], "name": "a"}
    assert _for_people(float("inf")) == float("inf")
