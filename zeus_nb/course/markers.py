"""Exercise markers: split a notebook into its student and solution versions, build a course."""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zeus_nb.course.check import FAILED_MARK, NOT_DONE_MARK, PASSED_MARK  # noqa: F401 (re-exported)
from zeus_nb.errors import ZeusNbError
from zeus_nb.inputs.jsonschema_formats import skip_iri_grammar
from zeus_nb.inputs.registry import not_input
from zeus_nb.inputs.table import read_ipynb
from zeus_nb.runner.notebooks import list_notebooks
from zeus_nb.utils.files import atomic_write

BEGIN = "# BEGIN SOLUTION"
END = "# END SOLUTION"
STUB = 'raise NotImplementedError("your turn: replace this line with your code")'
VERSIONS = ("student", "solution")
EDITION_KEY = "zeus_nb"  # notebook metadata: {"edition": "student" | "instructor"}
EXERCISE_TAG = "exercise"


class CourseError(ZeusNbError, ValueError):
    """A notebook's exercise markers or a course folder cannot be processed."""


def _source(cell: Any) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _marker(line: str) -> str | None:
    stripped = line.strip()
    if stripped == BEGIN:
        return "begin"
    if stripped == END:
        return "end"
    if re.match(r"#\s*(BEGIN|END)\s+SOLUTION\b", stripped, re.IGNORECASE):
        return "malformed"
    return None


def split_source(source: str, where: str = "cell") -> tuple[str, str, int]:
    """(student source, solution source, number of solution blocks) of one code cell.

    ``where`` names the notebook and cell in error messages.
    """
    student: list[str] = []
    solution: list[str] = []
    blocks = 0
    begin_line: int | None = None
    indent = ""
    for number, line in enumerate(source.splitlines(keepends=True), start=1):
        kind = _marker(line)
        if kind == "malformed":
            raise CourseError(
                f"{where}, line {number}: write the marker exactly as {BEGIN!r} or {END!r}, "
                f"got {line.strip()!r}"
            )
        if kind == "begin":
            if begin_line is not None:
                raise CourseError(
                    f"{where}, line {number}: {BEGIN!r} inside the block opened on line "
                    f"{begin_line}; close it with {END!r} first"
                )
            begin_line = number
            indent = line[: len(line) - len(line.lstrip())]
            student.append(f"{indent}{STUB}\n")
        elif kind == "end":
            if begin_line is None:
                raise CourseError(f"{where}, line {number}: {END!r} without a {BEGIN!r} before it")
            if line[: len(line) - len(line.lstrip())] != indent:
                raise CourseError(
                    f"{where}, line {number}: {END!r} must have the same indentation as the "
                    f"{BEGIN!r} on line {begin_line}"
                )
            begin_line = None
            blocks += 1
        else:
            solution.append(line)
            if begin_line is None:
                student.append(line)
    if begin_line is not None:
        raise CourseError(f"{where}, line {begin_line}: {BEGIN!r} is never closed by {END!r}")
    return "".join(student).rstrip("\n"), "".join(solution).rstrip("\n"), blocks


def _compiles(source: str) -> bool:
    """Whether plain Python compiles; cells with IPython magics or shell lines are not checked."""
    if any(line.lstrip().startswith(("%", "!")) for line in source.splitlines()):
        return True
    try:
        compile(source, "<cell>", "exec")
    except SyntaxError:
        return False
    return True


def strip_outputs(nb: Any) -> Any:
    """Drop outputs, execution counts and papermill's run records, in place."""
    nb.metadata.pop("papermill", None)
    for cell in nb.cells:
        cell.metadata.pop("papermill", None)
        cell.metadata.pop("execution", None)
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    return nb


def split_notebook(nb: Any, name: str = "notebook") -> tuple[Any, Any, int]:
    """(student notebook, solution notebook, number of exercises); ``nb`` is not changed."""
    student, solution = copy.deepcopy(nb), copy.deepcopy(nb)
    exercises = 0
    for index, (s_cell, k_cell) in enumerate(zip(student.cells, solution.cells, strict=True)):
        if s_cell.cell_type != "code":
            continue
        where = f"{name}, cell {index}"
        s_src, k_src, blocks = split_source(_source(s_cell), where)
        if not blocks:
            continue
        for version, src in (("student", s_src), ("solution", k_src)):
            if not _compiles(src):
                raise CourseError(
                    f"{where}: the {version} version is not valid Python; check the indentation "
                    "of the solution markers"
                )
        s_cell.source, k_cell.source = s_src, k_src
        for cell in (s_cell, k_cell):
            tags = cell.metadata.setdefault("tags", [])
            if EXERCISE_TAG not in tags:
                tags.append(EXERCISE_TAG)
        exercises += 1
    student.metadata[EDITION_KEY] = {"edition": "student"}
    solution.metadata[EDITION_KEY] = {"edition": "instructor"}
    return strip_outputs(student), strip_outputs(solution), exercises


@dataclass
class BuiltNotebook:
    name: str
    exercises: int
    student: Path
    solution: Path


def _collect(given: Iterable[str | os.PathLike] | None) -> list[Path]:
    paths = [Path(p) for p in given or []]
    if not paths:
        shipped = list_notebooks()
        if not shipped:
            raise CourseError("no shipped notebooks found; pass notebook paths")
        return shipped
    found: list[Path] = []
    for p in paths:
        if p.is_dir():
            found += sorted(q for q in p.glob("*.ipynb") if q.is_file())
        elif p.is_file():
            found.append(p)
        else:
            raise CourseError(f"{p}: no such notebook or folder")
    if not found:
        raise CourseError("no notebooks (*.ipynb) found in " + ", ".join(map(str, paths)))
    names = [p.name for p in found]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise CourseError(f"two notebooks share the name {', '.join(dupes)}; rename one")
    return found


@not_input("the shipped notebooks (or the user's), read by nbformat")
def build(
    notebooks: Iterable[str | os.PathLike] | None = None, out_dir: str | os.PathLike = "course"
) -> list[BuiltNotebook]:
    """Write ``out_dir/student/*.ipynb`` and ``out_dir/solution/*.ipynb``.

    ``notebooks`` are notebook files or folders of them (default: the shipped, numbered notebooks,
    found as :func:`zeus_nb.runner.paths.notebooks_dir` says, whatever the current directory).
    All notebooks are checked before anything is written, so a marker error leaves no half-built
    course.
    """
    skip_iri_grammar()
    import nbformat

    sources = _collect(notebooks)
    split = []
    for path in sources:
        nb = read_ipynb(path)  # our error, naming the file, for anything that is not one
        split.append((path, *split_notebook(nb, path.name)))
    _refuse_editions([(path, read_ipynb(path), n) for path, _, _, n in split])
    out = Path(out_dir)
    built = []
    for path, student, solution, exercises in split:
        targets = {}
        for version, nb in (("student", student), ("solution", solution)):
            target = out / version / path.name
            target.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, target)
            targets[version] = target
        built.append(BuiltNotebook(path.name, exercises, targets["student"], targets["solution"]))
    return built


SOURCES_HINT = (
    "build the course from the notebooks with their solutions between the markers: a source "
    "checkout's notebooks/ (git clone the project, then `zeus-nb course build notebooks/`), or, "
    "in the Docker image built with --build-arg EDITION=instructor, "
    "`zeus-nb course build /workspace/course-source`"
)


def _refuse_editions(found: list[tuple[Path, Any, int]]) -> None:
    """A student or instructor edition has no solution markers left to split: building from it
    would write a course of 0 exercises. Refused with the edition found and what to do."""
    editions = {}
    for path, nb, exercises in found:
        meta = nb.metadata.get(EDITION_KEY)
        kind = meta.get("edition") if isinstance(meta, dict) else None
        if exercises == 0 and kind in ("student", "instructor"):
            editions.setdefault(kind, []).append(path.name)
    if editions and sum(n for *_, n in found) == 0:
        said = "; ".join(
            f"{', '.join(names)} {'is' if len(names) == 1 else 'are'} the {kind} edition"
            + (" (exercises blank)" if kind == "student" else " (solutions without markers)")
            for kind, names in editions.items()
        )
        raise CourseError(f"{said}: there are no solution markers to split; {SOURCES_HINT}")


def edition(nb: Any, solutions: bool = False, name: str = "notebook") -> Any:
    """The student edition of notebook node ``nb`` (instructor edition with ``solutions``)."""
    student, solution, _ = split_notebook(nb, name)
    return solution if solutions else student


@not_input("a notebook, read by nbformat")
def edition_text(path: str | os.PathLike, solutions: bool = False) -> str:
    """The student (or instructor) edition of the notebook file ``path``, as ``.ipynb`` text.

    What anything that hands notebooks to students writes (``zeus-nb notebooks``, the Docker
    image, the docs site): the same bytes for the same source, so copies can be compared.
    """
    skip_iri_grammar()
    import nbformat

    p = Path(path)
    nb = read_ipynb(p)  # our error, naming the file, for anything that is not one
    return nbformat.writes(edition(nb, solutions, p.name)) + "\n"


def write_edition(
    dest: str | os.PathLike,
    solutions: bool = False,
    notebooks: Iterable[str | os.PathLike] | None = None,
) -> list[Path]:
    """Write the student edition (or, with ``solutions``, the instructor edition) into ``dest``.

    The shipped notebooks hold each exercise's solution between markers; what a student opens is
    this function's output: exercise bodies replaced by a "your turn" stub that the check reads as
    "not done yet". ``notebooks`` defaults to the shipped ones. Returns the written files.
    """
    out = Path(dest)
    texts = {path.name: edition_text(path, solutions) for path in _collect(notebooks)}
    out.mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        atomic_write(out / name, text)
    return [out / name for name in texts]
