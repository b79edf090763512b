"""Lecture slides from the notebooks: the executed instructor edition, plots included, as reveal.js.

Each notebook is executed (headless, with the parameters given, e.g. ``smoke=True``) or taken
from a folder of executed copies (``zeus-nb tour``'s output, a ``course
verify`` run), laid out by :mod:`zeus_nb.course.slide_layout` so every slide fits, and exported
with nbconvert's reveal.js template, minus everything it would load from the network. Exercise
cells show the student's version, so a deck never gives a solution away, and every deck carries
speaker notes for the teacher (:mod:`zeus_nb.course.slide_notes`; ``s`` shows them). The decks load
reveal.js, require.js and JupyterLab's stylesheet from the folder they are written to
(:mod:`zeus_nb.course.reveal` puts them there), so they open offline, from a file or a server.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from zeus_nb.course.markers import CourseError, _collect
from zeus_nb.course.reveal import vendor
from zeus_nb.course.slide_layout import HIDE_INPUT, SLIDE_KEY, lay_out, student_sources
from zeus_nb.course.slide_notes import deck_notes
from zeus_nb.inputs.jsonschema_formats import skip_iri_grammar
from zeus_nb.inputs.registry import not_input, system_read
from zeus_nb.inputs.table import read_ipynb
from zeus_nb.runner.notebooks import run_notebook
from zeus_nb.utils.environ import temp_environ
from zeus_nb.utils.files import atomic_write

__all__ = ["SLIDE_KEY", "build_slides", "executed_copy"]

TEMPLATE = Path(__file__).resolve().parents[1] / "resources" / "slides" / "zeus_nb_slides.html.j2"
STYLESHEET = "jupyterlab.css"
_STYLE_PARTS = (
    "lab/static/index.css",
    "lab/static/theme-light.css",
    "reveal/static/custom_reveal.css",
)


@not_input("a notebook, read by nbformat")
def executed_copy(
    path: Path,
    executed: str | os.PathLike | None,
    work: Path,
    parameters: Mapping[str, Any] | None,
) -> Any:
    """The executed notebook for ``path``: from the ``executed`` folder, else run here."""

    if executed is not None:
        found = Path(executed) / path.name
        if not found.is_file():
            raise CourseError(f"{found}: no executed copy of {path.name}; run `zeus-nb tour` first")
        return read_ipynb(found, "executed notebook")
    out = work / path.name
    with temp_environ(MPLBACKEND=None):  # the kernel's inline backend: plots become outputs
        result = run_notebook(path, out, dict(parameters or {}), cwd=work)
    if not result.ok:
        raise CourseError(f"{path.name} failed while executing for the slides: {result.error}")
    return read_ipynb(out, "executed notebook")


def _current_prose(executed: Any, source: Any) -> None:
    """The source's markdown in the executed copy (in place), so a deck made from an earlier run
    shows today's text; left alone when the two notebooks have different markdown cells."""
    done = [c for c in executed.cells if c.cell_type == "markdown"]
    now = [c for c in source.cells if c.cell_type == "markdown"]
    if len(done) == len(now):
        for old, new in zip(done, now, strict=True):
            old.source = new.source


def _exporter(reveal_url_prefix: str | None):
    skip_iri_grammar()
    from nbconvert import SlidesExporter
    from nbconvert.preprocessors import TagRemovePreprocessor

    exporter = SlidesExporter(
        template_file=str(TEMPLATE),
        exclude_input_prompt=True,
        exclude_output_prompt=True,
    )
    exporter.reveal_theme = "white"
    exporter.reveal_url_prefix = reveal_url_prefix or "reveal.js"
    exporter.require_js_url = "require.js" if reveal_url_prefix is None else exporter.require_js_url
    exporter.register_preprocessor(
        TagRemovePreprocessor(remove_input_tags={HIDE_INPUT}, enabled=True), enabled=True
    )
    return exporter


@system_read("the JupyterLab theme installed with nbconvert")
def _stylesheet(exporter: Any) -> str:
    """JupyterLab's cell styles as nbconvert ships them, written once beside the decks."""
    parts = []
    for rel in _STYLE_PARTS:
        found = next(
            (Path(p) / rel for p in _template_roots(exporter) if (Path(p) / rel).is_file()), None
        )
        if found is None:
            raise CourseError(f"nbconvert's {rel} is missing; reinstall nbconvert")
        parts.append(found.read_text(encoding="utf-8"))
    return "\n".join(parts)


def _template_roots(exporter: Any) -> list[str]:
    roots = []
    for p in exporter.template_paths:
        path = Path(p)
        roots += [str(path), str(path.parent)]
    return roots


@not_input("a notebook, read by nbformat")
def build_slides(
    notebooks: Iterable[str | os.PathLike] | None = None,
    out_dir: str | os.PathLike = "slides",
    reveal_url_prefix: str | None = None,
    executed: str | os.PathLike | None = None,
    parameters: Mapping[str, Any] | None = None,
    report: Callable[[str], None] | None = None,
) -> list[Path]:
    """Write ``<name>.slides.html`` per notebook into ``out_dir``; the written decks.

    ``report`` gets a line as each notebook starts and is done (executing one takes minutes).

    ``executed``: a folder of executed notebooks to use instead of executing them here with
    papermill ``parameters``. ``reveal_url_prefix``: load reveal.js from there instead of the copy
    put beside the decks (which needs ``npm`` once, to fetch it).
    """

    exporter = _exporter(reveal_url_prefix)
    params = dict(parameters or {})
    out = Path(out_dir)
    pages = {}
    with tempfile.TemporaryDirectory(prefix="zeus-nb-slides-") as tmp:
        paths = _collect(notebooks)
        for i, path in enumerate(paths, start=1):
            start = time.monotonic()
            if report is not None:
                doing = "executing" if executed is None else "reading"
                report(f"[{i}/{len(paths)}] {path.name}: {doing} ...")
            nb = executed_copy(path, executed, Path(tmp), params)
            source = read_ipynb(path)
            _current_prose(nb, source)
            laid = lay_out(nb, student_sources(source, path.name), notes=deck_notes(path.stem))
            body, _ = exporter.from_notebook_node(laid)
            pages[f"{path.stem}.slides.html"] = body
            if report is not None:
                report(f"[{i}/{len(paths)}] {path.name}: done ({time.monotonic() - start:.0f} s)")
    out.mkdir(parents=True, exist_ok=True)
    if reveal_url_prefix is None:
        vendor(out)
    atomic_write(out / STYLESHEET, _stylesheet(exporter))
    for name, body in pages.items():
        atomic_write(out / name, body)
    return [out / name for name in pages]
