"""The notebooks' run times: one measured table that every statement of them is made from.

``benchmarks/bench_tour.py --write-table`` runs ``zeus-nb tour`` in full and in smoke mode and
writes :data:`TABLE` (seconds per notebook, the machine and its load). The README's run-time
table, each notebook header's "Expected run time" paragraph and the column in
``docs/notebooks.md`` are rendered from it by :func:`sync`; a test checks that all three still
say what the table says.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path
from typing import Any

from zeus_nb.inputs.registry import system_read
from zeus_nb.utils.files import atomic_write

TABLE = Path(__file__).resolve().parents[1] / "resources" / "run_times.json"
README_START = "<!-- run-times: generated from zeus_nb/resources/run_times.json -->"
README_END = "<!-- /run-times -->"
TOUR_START = "<!-- tour-times: generated from zeus_nb/resources/run_times.json -->"
TOUR_END = "<!-- /tour-times -->"
HEADER_START = "# **Expected run time**"
HEADER_END = "run-time table)."
MODES = ("full", "smoke")


@system_read("package data: the run-time table the tour benchmark wrote")
def load(path: Path = TABLE) -> dict[str, Any]:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def fmt(seconds: float) -> str:
    """Seconds as people read them: ``8 s``, ``1 min 35 s``."""
    s = max(1, round(seconds))
    return f"{s} s" if s < 60 else f"{s // 60} min {s % 60:02d} s"


def _machine(table: dict[str, Any]) -> str:
    m = table["machine"]
    return (
        f"{m['cpus']} CPU cores, {m['state']} (load average {m['load_before']:.1f} before and "
        f"{m['load_after']:.1f} after)"
    )


def load_words(table: dict[str, Any]) -> str:
    """Under what load the table was measured, as a clause: "measured on 2 CPU cores that other
    jobs were using, load average 0.1 before and 2.8 after"."""
    m = table["machine"]
    who = "that other jobs were using" if m["state"] != "idle" else "with nothing else running"
    return (
        f"measured on {m['cpus']} CPU cores {who}, load average {m['load_before']:.1f} before "
        f"and {m['load_after']:.1f} after"
    )


def busy_words(table: dict[str, Any], name: str | None = None) -> str:
    """What the smoke runs took beside busy processes (``--write-table`` measures it), as a
    clause, or "" when the table has no such measurement."""
    busy = table.get("busy")
    if not busy:
        return ""
    load = f"load average {busy['load_before']:.1f} to {busy['load_after']:.1f}"
    if name is None:
        total = sum(busy["notebooks"].values())
        return (
            f"beside {busy['background']} busy processes ({load}) the smoke runs took "
            f"{fmt(total)} in all"
        )
    return (
        f"beside {busy['background']} busy processes ({load}) the smoke run took "
        f"{fmt(busy['notebooks'][name])}"
    )


def readme_block(table: dict[str, Any]) -> str:
    """The README's run-time table with what it was measured on, between its markers."""
    busy = table.get("busy")
    head = "| notebook | full run | smoke run (`smoke = True`) |"
    rule = "|---|---:|---:|"
    if busy:
        head += f" smoke run beside {busy['background']} busy processes |"
        rule += "---:|"
    rows = [head, rule]
    for name, t in table["notebooks"].items():
        extra = f" {fmt(busy['notebooks'][name])} |" if busy else ""
        rows.append(f"| `{name}` | {fmt(t['full'])} | {fmt(t['smoke'])} |{extra}")
    total = {m: sum(t[m] for t in table["notebooks"].values()) for m in MODES}
    extra = f" **{fmt(sum(busy['notebooks'].values()))}** |" if busy else ""
    rows.append(f"| **total** | **{fmt(total['full'])}** | **{fmt(total['smoke'])}** |{extra}")
    loaded = (
        f" The busy processes (`bench_tour.py --busy`) each keep one core spinning, as other "
        f"jobs would: {busy_words(table)}."
        if busy
        else ""
    )
    intro = (
        f"Measured on {table['measured']} by `{table['command']}` on the simulated GPU: "
        f"papermill's duration of each notebook, kernel start excluded, on {_machine(table)}. "
        f"{table['machine']['note']}{loaded}"
    )
    body = "\n".join(textwrap.wrap(intro, 100)) + "\n\n" + "\n".join(rows)
    return f"{README_START}\n{body}\n{README_END}"


def header_paragraph(table: dict[str, Any], name: str) -> str:
    """A notebook header's run-time paragraph (jupytext percent lines)."""
    t = table["notebooks"][name]
    busy = busy_words(table, name)
    text = (
        f"**Expected run time**: {fmt(t['full'])} on the simulated GPU, {fmt(t['smoke'])} with "
        f"`smoke = True` ({load_words(table)}{'; ' + busy if busy else ''}; Run All in "
        f"JupyterLab adds the kernel's start; see the README's "
        f"{HEADER_END}"
    )
    return "\n".join("# " + line for line in textwrap.wrap(text, 96))


def docs_cell(table: dict[str, Any], name: str) -> str:
    t = table["notebooks"][name]
    return f"{fmt(t['full'])} ({fmt(t['smoke'])})"


def render_readme(text: str, table: dict[str, Any]) -> str:
    start, end = text.index(README_START), text.index(README_END) + len(README_END)
    return text[:start] + readme_block(table) + text[end:]


def render_header(source: str, table: dict[str, Any], name: str) -> str:
    lines = source.split("\n")
    first = next(i for i, ln in enumerate(lines) if ln.startswith(HEADER_START))
    last = next(i for i in range(first, len(lines)) if lines[i].rstrip().endswith(HEADER_END))
    return "\n".join([*lines[:first], header_paragraph(table, name), *lines[last + 1 :]])


def tour_paragraph(table: dict[str, Any]) -> str:
    """docs/notebooks.md's sentence on how long the whole tour takes, from the table."""
    total = {m: sum(t[m] for t in table["notebooks"].values()) for m in MODES}
    last = list(table["notebooks"])[-1]
    busy = busy_words(table)
    text = (
        f"The six notebooks took {fmt(total['smoke'])} in smoke mode and {fmt(total['full'])} "
        f"in full (papermill's durations, kernel starts excluded; {load_words(table)}"
        f"{'; ' + busy if busy else ''}): the README's run-time table, which "
        f"`python benchmarks/bench_tour.py --write-table` measures. Notebook {last[:2]} alone "
        f"takes {fmt(table['notebooks'][last]['smoke'])} and "
        f"{fmt(table['notebooks'][last]['full'])} of them, most of it starting its pipeline "
        "processes."
    )
    return "\n".join(textwrap.wrap(text, 100))


def render_docs(text: str, table: dict[str, Any]) -> str:
    def row(match: re.Match) -> str:
        name = match.group(1)
        if name not in table["notebooks"]:
            return match.group(0)
        return f"{match.group(2)}| {docs_cell(table, name)} |"

    text = re.sub(r"^(?=\| `(\d\d_\w+)`)(.*)\|[^|\n]*\|$", row, text, flags=re.M)
    if TOUR_START in text:
        start, end = text.index(TOUR_START), text.index(TOUR_END) + len(TOUR_END)
        text = text[:start] + f"{TOUR_START}\n{tour_paragraph(table)}\n{TOUR_END}" + text[end:]
    return text


@system_read("the project's own README and guides (a checkout)")
def sync(repo: Path, table: dict[str, Any] | None = None) -> list[Path]:
    """Rewrite the README, the notebook sources' headers and docs/notebooks.md from the table.

    Returns the files that changed (the notebooks still need ``jupytext --sync``).
    """
    table = table or load()
    changed = []
    targets: list[tuple[Path, Any]] = [
        (repo / "README.md", lambda t: render_readme(t, table)),
        (repo / "docs" / "notebooks.md", lambda t: render_docs(t, table)),
    ]
    for name in table["notebooks"]:
        src = repo / "notebooks" / "src" / f"{name}.py"
        targets.append((src, lambda t, n=name: render_header(t, table, n)))
    for path, render in targets:
        old = path.read_text(encoding="utf-8")
        new = render(old)
        if new != old:
            atomic_write(path, new)
            changed.append(path)
    return changed
