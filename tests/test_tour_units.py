"""Every value the shipped notebooks record has its unit in the tour's summary."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from zeus_nb.runner.record_units import UNITS, unit_of

SOURCES = sorted((Path(__file__).resolve().parents[1] / "notebooks" / "src").glob("[0-9]*.py"))
_RECORD = re.compile(r"record\(\s*\"(\w+)\"")
_LOOPED = re.compile(r"for column in \(([^)]*)\):\s*\n\s*zeus_nb\.record\(column")


def _names(path: Path) -> set[str]:
    text = path.read_text()
    names = set(_RECORD.findall(text))
    for group in _LOOPED.findall(text):  # record(column, ...) over a tuple of names
        names |= set(re.findall(r"\"(\w+)\"", group))
    return names - {"takeaway"}


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem[:2])
def test_every_shipped_record_has_a_unit(path):
    names = _names(path)
    assert names, f"{path.name}: no records found (did the record call change shape?)"
    missing = sorted(n for n in names if unit_of(n, path.stem) is None)
    assert not missing, f"{path.name}: add the unit of {missing} to zeus_nb/runner/record_units"


def test_units_name_no_record_the_notebooks_dropped():
    shipped = set().union(*(_names(p) for p in SOURCES))
    assert not set(UNITS) - shipped, sorted(set(UNITS) - shipped)


def test_the_tour_prints_units(monkeypatch, tmp_path, capsys):
    """`max_clock = [1.826, 1171.0]` reads with what its numbers are."""
    import json

    from zeus_nb.cli import main
    from zeus_nb.commands import tour
    from zeus_nb.runner.notebooks import RunResult

    nb = tmp_path / "06_pipeline_frequency.ipynb"

    def fake_run(path, output, params, timeout=None):
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text("{}")
        side = output.with_name(output.stem + ".records.json")
        side.write_text(json.dumps({"records": {"max_clock": [1.826, 1171.0], "backend": "sim"}}))
        return RunResult(path, output, params, True, 1.0)

    # the tour command's own names (bound at its import, which another test may have done)
    monkeypatch.setattr(tour, "run_notebook", fake_run)
    monkeypatch.setattr(tour, "find_notebook", lambda n: nb)
    monkeypatch.setattr(
        tour,
        "read_notebook",
        lambda p: {"records": {"max_clock": [1.826, 1171.0], "backend": "sim"}},
    )
    assert main(["tour", "--only", "06", "-o", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "max_clock = [1.826, 1171.0] (iteration time s, energy J)" in out
    assert 'backend = "sim"\n' in out


def test_a_long_unit_goes_on_its_own_line(monkeypatch, tmp_path, capsys):
    from zeus_nb.cli import main
    from zeus_nb.commands import tour
    from zeus_nb.runner.notebooks import RunResult

    nb = tmp_path / "03_energy_time_tradeoff.ipynb"
    ratios = {f"workload number {i}": 0.123 for i in range(6)}

    def fake_run(path, output, params, timeout=None):
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text("{}")
        return RunResult(path, output, params, True, 1.0)

    # the tour command's own names (bound at its import, which another test may have done)
    monkeypatch.setattr(tour, "run_notebook", fake_run)
    monkeypatch.setattr(tour, "find_notebook", lambda n: nb)
    monkeypatch.setattr(tour, "read_notebook", lambda p: {"records": {"best_both_ratio": ratios}})
    assert main(["tour", "--only", "03", "-o", str(tmp_path / "out")]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("  best_both_ratio = "))
    assert lines[at + 1].strip() == f"({UNITS['best_both_ratio']})"
    assert all(len(line) < 140 for line in lines)
