"""Slides from the notebooks: nbconvert's reveal.js exporter over the student edition.

A cell's ``slideshow`` metadata (``{"slide_type": "slide" | "subslide" | "fragment" | "skip" |
"notes" | "-"}``, set in a source with jupytext's ``# %% [markdown] slideshow={...}``) decides where
it goes. Cells without it get a default so that every notebook makes a usable deck without
hand-tagging: a markdown cell that opens with a ``#``/``##`` heading starts a new slide, one with a
``###`` heading a sub-slide, and everything else continues the slide before it. Slides are built
from the student edition, so they never show an exercise's solution.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from zeus_nb.course.markers import _collect, _source, edition
from zeus_nb.utils.files import atomic_write

SLIDE_KEY = "slideshow"


def _default_slide_type(cell: Any) -> str:
    if cell.cell_type != "markdown":
        return "-"
    first = next((ln.strip() for ln in _source(cell).splitlines() if ln.strip()), "")
    if first.startswith(("# ", "## ")):
        return "slide"
    if first.startswith("### "):
        return "subslide"
    return "-"


def with_slide_types(nb: Any) -> Any:
    """``nb`` with a slide type on every cell: the source's own where it has one (in place)."""
    for cell in nb.cells:
        cell.metadata.setdefault(SLIDE_KEY, {"slide_type": _default_slide_type(cell)})
    return nb


def build_slides(
    notebooks: Iterable[str | os.PathLike] | None = None,
    out_dir: str | os.PathLike = "slides",
    reveal_url_prefix: str | None = None,
) -> list[Path]:
    """Write ``<name>.slides.html`` (reveal.js) per notebook into ``out_dir``; the written files.

    ``notebooks`` defaults to the shipped ones. ``reveal_url_prefix`` is where the browser loads
    reveal.js from (nbconvert's default: a public CDN; a local copy for offline rooms).
    """
    import nbformat
    from nbconvert import SlidesExporter

    exporter = SlidesExporter()
    if reveal_url_prefix:
        exporter.reveal_url_prefix = reveal_url_prefix
    out = Path(out_dir)
    pages = {}
    for path in _collect(notebooks):
        nb = with_slide_types(edition(nbformat.read(path, as_version=4), False, path.name))
        body, _ = exporter.from_notebook_node(nb)
        pages[f"{path.stem}.slides.html"] = body
    out.mkdir(parents=True, exist_ok=True)
    for name, body in pages.items():
        atomic_write(out / name, body)
    return [out / name for name in pages]
