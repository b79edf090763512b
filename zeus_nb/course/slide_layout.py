"""Cut an executed notebook into slides that each fit the screen.

A slide's height is estimated in text lines (a plot counts as :data:`IMAGE_LINES`); cells are
packed onto a slide until the next one would not fit, then a new (vertical) slide starts. A
markdown heading ``#``/``##`` starts a new slide, ``###`` a sub-slide. What cannot fit is shortened
visibly, never cut by the screen edge: long code is shown as its outputs only, long text output
keeps its first lines and says how many more the notebook has, long markdown is split at
paragraphs. Exercise cells show the student's version (the "your turn" stub), never the solution
or the check's verdict, and outputs that only keep records (``zeus_nb.record``) are dropped.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

from zeus_nb.course.markers import EXERCISE_TAG, CourseError, _source, split_source
from zeus_nb.course.slide_notes import notes_cell
from zeus_nb.inputs.jsonschema_formats import skip_iri_grammar
from zeus_nb.runner.records import MIMETYPE

_CHECK_CALL = re.compile(r"^\s*\w+\s*=\s*check\.(\w+)\(")  # the exercise's check call

SLIDE_KEY = "slideshow"
HIDE_INPUT = "slides-hide-input"  # tag: the input is not shown (its outputs are)
BUDGET = 30  # lines of code or printout (18 px each) that fit one 700 px slide, with margins
IMAGE_LINES = 21  # a plot, at the 380 px the deck's stylesheet allows
MAX_OUTPUT_LINES = 18  # text output lines kept per cell
MAX_CODE_LINES = 10  # longer code shows its outputs only
MAX_MARKDOWN_LINES = 14
MARKDOWN_LINE = 1.4  # a line of prose (about 100 characters) in printout lines
SKIP_TAGS = {"parameters", "injected-parameters"}


def _shorten(text: str, limit: int) -> str:
    lines = text.rstrip("\n").split("\n")
    if len(lines) <= limit:
        return text
    more = len(lines) - (limit - 1)
    return "\n".join(lines[: limit - 1]) + f"\n… {more} more lines in the notebook\n"


def smaller_png(data: str) -> str:
    """A base64 PNG plot in 256 colours: about a third of the bytes, no visible difference."""
    import base64
    import io

    from PIL import Image

    raw = base64.b64decode(data)
    image = Image.open(io.BytesIO(raw)).convert("RGB").quantize(256, Image.Quantize.MEDIANCUT)
    out = io.BytesIO()
    image.save(out, "PNG", optimize=True)
    small = out.getvalue()
    return base64.b64encode(small).decode("ascii") if len(small) < len(raw) else data


def _visible_outputs(outputs: list[Any]) -> list[Any]:
    """Outputs worth a slide, consecutive text merged and shortened; records and widgets dropped."""
    skip_iri_grammar()
    import nbformat

    kept: list[Any] = []
    for out in outputs:
        data = out.get("data", {})
        if MIMETYPE in data or "application/vnd.jupyter.widget-view+json" in data:
            continue
        if out.get("output_type") == "stream":
            if kept and kept[-1].get("output_type") == "stream":
                kept[-1] = nbformat.v4.new_output(
                    "stream", name="stdout", text=kept[-1].text + out.text
                )
            else:
                kept.append(nbformat.v4.new_output("stream", name="stdout", text=out.text))
            continue
        if out.get("output_type") == "error":
            continue
        kept.append(copy.deepcopy(out))
    for out in kept:
        if out.get("output_type") == "stream":
            out.text = _shorten(out.text, MAX_OUTPUT_LINES)
        elif "image/png" in out.get("data", {}):
            png = out["data"]["image/png"]
            out["data"]["image/png"] = smaller_png("".join(png) if isinstance(png, list) else png)
        elif "text/plain" in out.get("data", {}) and len(out["data"]) == 1:
            text = out["data"]["text/plain"]
            out["data"]["text/plain"] = _shorten("".join(text), MAX_OUTPUT_LINES)
    return kept


def _output_lines(outputs: list[Any]) -> int:
    lines = 0
    for out in outputs:
        data = out.get("data", {})
        if any(k.startswith("image/") for k in data):
            lines += IMAGE_LINES
        elif out.get("output_type") == "stream":
            lines += out.text.rstrip("\n").count("\n") + 1
        elif "text/html" in data:
            lines += "".join(data["text/html"]).count("<tr") + 1
        else:
            lines += "".join(data.get("text/plain", "")).count("\n") + 1
    return lines


def _bookkeeping(source: str) -> bool:
    """Whether a cell only imports and records results (``zeus_nb.record``): not lecture matter."""
    import ast

    try:
        body = ast.parse(source).body
    except SyntaxError:
        return False

    def plain(node: ast.stmt) -> bool:
        if isinstance(node, ast.Import | ast.ImportFrom):
            return True
        call = node.value if isinstance(node, ast.Expr) else None
        return isinstance(call, ast.Call) and ast.unparse(call.func).endswith("record")

    return bool(body) and all(plain(node) for node in body)


def _markdown_parts(text: str) -> list[str]:
    """``text`` split at blank lines into parts of at most :data:`MAX_MARKDOWN_LINES` lines."""
    parts, current = [], []
    for paragraph in text.strip().split("\n\n"):
        lines = paragraph.split("\n")
        if current and len(current) + len(lines) + 1 > MAX_MARKDOWN_LINES:
            parts.append("\n".join(current))
            current = []
        current += ([""] if current else []) + lines
    if current:
        parts.append("\n".join(current))
    return parts


def _markdown_lines(text: str) -> float:
    """Height in printout lines: prose wraps at about 100 characters, headings are larger."""
    lines = 0.0
    for line in text.split("\n"):
        size = 2.5 if line.startswith("#") else MARKDOWN_LINE
        lines += size * max(1, -(-len(line) // 100))
    return lines


def _is_exercise(cell: Any) -> bool:
    if cell.cell_type != "code":
        return False
    if EXERCISE_TAG in cell.metadata.get("tags", []):
        return True
    return split_source(_source(cell), "cell")[2] > 0


def student_sources(source: Any, name: str = "notebook") -> list[str]:
    """The student edition's code of each exercise cell of ``source`` (a notebook with markers)."""
    out = []
    for index, cell in enumerate(source.cells):
        if cell.cell_type == "code":
            student, _, blocks = split_source(_source(cell), f"{name}, cell {index}")
            if blocks:
                out.append(student)
    return out


def exercise_stub(student: str) -> str:
    """An exercise cell's stub as a slide shows it: the code up to its check call (what the
    student writes and how it is checked), without the lines after it that use the answer."""
    lines = student.rstrip().split("\n")
    last = next((i for i, ln in enumerate(lines) if _CHECK_CALL.search(ln)), None)
    return "\n".join(lines if last is None else lines[: last + 1])


def lay_out(
    executed: Any,
    exercises: list[str] | None = None,
    notes: Callable[[str], str | None] | None = None,
) -> Any:
    """A copy of the executed notebook with a slide type on every cell, cut to fit.

    ``exercises``: the student edition's code of each exercise cell, in order (see
    :func:`student_sources`); an executed exercise cell shows its stub (:func:`exercise_stub`)
    instead of its solution, on a slide of its own, whatever its length. ``notes(key)`` gives
    the speaker notes for a slide: ``key`` is a heading's text, ``"title"`` for the first
    slide, or ``"check:<name>"`` for an exercise that calls ``check.<name>``.
    """
    skip_iri_grammar()
    import nbformat

    nb = copy.deepcopy(executed)
    stubs = list(exercises or [])
    found = sum(_is_exercise(c) for c in nb.cells)
    if found != len(stubs):
        raise CourseError(
            f"the executed notebook has {found} exercise cell(s) but its source {len(stubs)}; "
            "execute the notebook again from the same source"
        )
    cells: list[Any] = []
    used = 0.0

    def note(key: str) -> None:
        text = notes(key) if notes is not None else None
        if text:
            cells.append(notes_cell(text))
            cells[-1].id = f"notes-{len(cells)}"  # the same deck on every build

    for cell in nb.cells:
        tags = set(cell.metadata.get("tags", []))
        if cell.cell_type == "code":
            if tags & SKIP_TAGS or _bookkeeping(_source(cell)):
                continue
            if _is_exercise(cell):  # the assignment, never its solution or the check's verdict
                stub = exercise_stub(stubs.pop(0))
                new = nbformat.v4.new_code_cell(stub)
                new.id, new.metadata = cell.get("id") or new.id, copy.deepcopy(cell.metadata)
                new.metadata[SLIDE_KEY] = {"slide_type": "subslide"}
                cells.append(new)
                used = BUDGET  # the stub has its slide to itself: what follows starts anew
                called = _CHECK_CALL.search(stub.split("\n")[-1])
                if called:
                    note(f"check:{called[1]}")
                continue
            cell.outputs = _visible_outputs(cell.get("outputs", []))
            code = _source(cell).strip().count("\n") + 1
            if not cell.outputs and code > MAX_CODE_LINES:
                continue
            height = _output_lines(cell.outputs)
            if code > MAX_CODE_LINES or (height >= IMAGE_LINES and code + height > BUDGET):
                cell.metadata.setdefault("tags", []).append(HIDE_INPUT)
            else:
                height += code
            slide = "-" if cells and used + height <= BUDGET else "subslide"
            used = height if slide == "subslide" else used + height
            cell.metadata[SLIDE_KEY] = {"slide_type": slide}
            cells.append(cell)
            continue
        for i, part in enumerate(_markdown_parts(_source(cell))):
            new = nbformat.v4.new_markdown_cell(part)
            new.id = f"{cell.get('id') or 'md'}-{i}"[-64:]  # the same deck on every build
            height = _markdown_lines(part)
            first = part.lstrip().split("\n", 1)[0]
            if i == 0 and first.startswith(("# ", "## ")):
                slide = "slide"
            elif i == 0 and first.startswith("### "):
                slide = "subslide"
            else:
                slide = "-" if cells and used + height <= BUDGET else "subslide"
            used = height if slide != "-" else used + height
            new.metadata[SLIDE_KEY] = {"slide_type": slide}
            cells.append(new)
            if i == 0 and first.startswith("#"):  # the notes go on the heading's own slide
                title = not any(c.metadata[SLIDE_KEY]["slide_type"] == "slide" for c in cells[:-1])
                note("title" if title else first.lstrip("#").strip())
    nb.cells = cells
    return nb
