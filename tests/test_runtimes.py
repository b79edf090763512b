"""One run-time table: the README, the notebook headers and docs/notebooks.md say what it says."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from zeus_nb.course import runtimes

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p.stem for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.fixture(scope="module")
def table():
    return runtimes.load()


def test_the_table_has_every_notebook_measured_both_ways(table):
    assert list(table["notebooks"]) == NOTEBOOKS
    for t in table["notebooks"].values():
        assert t["full"] > 0 and t["smoke"] > 0
    machine = table["machine"]
    assert machine["cpus"] >= 1 and machine["state"] and machine["note"]


def test_readme_quotes_the_table(table):
    text = (REPO / "README.md").read_text()
    assert runtimes.render_readme(text, table) == text, "run benchmarks/bench_tour.py"
    assert runtimes.readme_block(table) in text


def test_docs_quote_the_table(table):
    text = (REPO / "docs" / "notebooks.md").read_text()
    assert runtimes.render_docs(text, table) == text
    for name in NOTEBOOKS:
        assert f"| {runtimes.docs_cell(table, name)} |" in text


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_each_notebook_header_quotes_the_table(table, name):
    source = (REPO / "notebooks" / "src" / f"{name}.py").read_text()
    assert runtimes.render_header(source, table, name) == source
    header = nbformat.read(REPO / "notebooks" / f"{name}.ipynb", as_version=4).cells[0].source
    flat = " ".join(header.split())
    paragraph = " ".join(runtimes.header_paragraph(table, name).replace("# ", "").split())
    assert paragraph in flat


def test_a_changed_number_is_caught(table):
    """The checks above can fail: one notebook's time changed gives other text everywhere."""
    changed = {**table, "notebooks": dict(table["notebooks"])}
    first = NOTEBOOKS[0]
    changed["notebooks"][first] = {"full": 1234.0, "smoke": 1.0}
    readme = (REPO / "README.md").read_text()
    assert runtimes.render_readme(readme, changed) != readme
    source = (REPO / "notebooks" / "src" / f"{first}.py").read_text()
    assert runtimes.render_header(source, changed, first) != source


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.2, "1 s"), (7.7, "8 s"), (59.4, "59 s"), (95, "1 min 35 s")]
)
def test_seconds_read_as_people_say_them(seconds, text):
    assert runtimes.fmt(seconds) == text


def test_every_statement_says_under_what_load_it_was_measured(table):
    """The headers, the README and docs/notebooks.md give the load average of the measurement,
    and docs/notebooks.md's sentence on the whole tour is generated from the table too."""
    load = f"load average {table['machine']['load_before']:.1f}"
    for name in NOTEBOOKS:
        assert load in " ".join(runtimes.header_paragraph(table, name).replace("# ", "").split())
    docs = (REPO / "docs" / "notebooks.md").read_text()
    assert runtimes.TOUR_START in docs and runtimes.TOUR_END in docs
    assert runtimes.tour_paragraph(table) in docs
    assert load in " ".join(runtimes.tour_paragraph(table).split())


def test_a_busy_measurement_reaches_every_statement(table):
    busy = {
        **table,
        "busy": {
            "background": 2,
            "load_before": 2.5,
            "load_after": 4.5,
            "notebooks": {n: 2 * t["smoke"] for n, t in table["notebooks"].items()},
        },
    }
    first = NOTEBOOKS[0]
    assert "beside 2 busy processes" in runtimes.readme_block(busy)
    header = " ".join(runtimes.header_paragraph(busy, first).replace("# ", "").split())
    expected = runtimes.fmt(busy["busy"]["notebooks"][first])
    assert f"beside 2 busy processes (load average 2.5 to 4.5) the smoke run took {expected}" in (
        header
    )
    assert "beside 2 busy processes" in runtimes.tour_paragraph(busy)
    idle_only = {k: v for k, v in table.items() if k != "busy"}
    assert "busy" not in runtimes.header_paragraph(idle_only, first)  # only what was measured
