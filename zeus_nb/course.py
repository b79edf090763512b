"""Course kit: student and solution versions of the notebooks, their verification, run times.

An exercise cell marks its solution code between two comment lines::

    def average_power(measurement):
        # BEGIN SOLUTION
        return measurement.total_energy / measurement.time
        # END SOLUTION

    check.average_power(average_power)

The student version replaces the marked lines by one ``raise NotImplementedError`` at the marker's
indentation, so the cell still runs and the check call after it reports the missing answer; the
solution version keeps the code and drops the markers. Exercise cells are tagged ``exercise`` in
both versions, and both are stripped of outputs, so nothing from an instructor's run leaks into
the students' copies.

:func:`verify` executes both versions with papermill: solutions must run to the end, and students'
copies must stop at their first exercise with ``NotImplementedError`` and nothing else.
:func:`grade` executes students' submissions and reports each exercise as passed, failed or not
run. :func:`timings` reads the run times papermill records in executed notebooks, for the course's
run-time table.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zeus_nb.errors import ZeusNbError

BEGIN = "# BEGIN SOLUTION"
END = "# END SOLUTION"
STUB = 'raise NotImplementedError("Exercise: replace this line with your solution")'
VERSIONS = ("student", "solution")
EXERCISE_TAG = "exercise"
PASSED_MARK = "\N{CHECK MARK}"  # what a passing ``zeus_nb.check`` call prints


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
        from zeus_nb.notebooks import list_notebooks

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


def build(
    notebooks: Iterable[str | os.PathLike] | None = None, out_dir: str | os.PathLike = "course"
) -> list[BuiltNotebook]:
    """Write ``out_dir/student/*.ipynb`` and ``out_dir/solution/*.ipynb``.

    ``notebooks`` are notebook files or folders of them (default: the shipped, numbered notebooks,
    found as :func:`zeus_nb.notebooks.notebooks_dir` says, whatever the current directory). All
    notebooks are checked before anything is written, so a marker error leaves no half-built course.
    """
    import nbformat

    sources = _collect(notebooks)
    split = []
    for path in sources:
        try:
            nb = nbformat.read(path, as_version=4)
        except Exception as e:
            raise CourseError(f"{path}: not a readable notebook ({e})") from e
        split.append((path, *split_notebook(nb, path.name)))
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


@dataclass
class Verification:
    """The outcome of executing one version of one notebook."""

    notebook: str
    version: str
    ok: bool
    detail: str
    output: Path
    duration: float | None = None


def _environ(extra: Mapping[str, str] | None = None):
    """Environment for the papermill kernels: headless, importing this zeus_nb, plus ``extra``."""
    from zeus_nb.notebooks import kernel_environment

    return kernel_environment(dict(extra or {}))


def _first_exercise_source(nb_path: Path) -> str | None:
    import nbformat

    nb = nbformat.read(nb_path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code" and STUB in _source(cell):
            return _source(cell)
    return None


def execute_version(
    notebook: Path,
    version: str,
    output: Path,
    parameters: Mapping[str, Any] | None = None,
    kernel_name: str = "python3",
    env: Mapping[str, str] | None = None,
) -> Verification:
    """Execute one built notebook and judge it as ``version`` ("student" or "solution").

    A solution passes when it runs to the end. A student copy passes when it stops with
    ``NotImplementedError`` in its first exercise cell, or runs to the end if it has no exercises.
    ``env`` is set while the kernel runs (for example ``ZEUS_NB_BACKEND=sim``).
    """
    with _environ(env):
        return _run_version(notebook, version, output, parameters, kernel_name)


def _run_version(
    notebook: Path,
    version: str,
    output: Path,
    parameters: Mapping[str, Any] | None,
    kernel_name: str,
) -> Verification:
    """:func:`execute_version` in the current environment (safe to call from several threads)."""
    from zeus_nb.execute import execute

    if version not in VERSIONS:
        raise ValueError(f"version must be one of {VERSIONS}, got {version!r}")
    stub_cell = _first_exercise_source(notebook) if version == "student" else None
    name = notebook.name
    run = execute(notebook, output, parameters, notebook.parent, kernel_name)
    if run.problem:  # the kernel died or would not start: report it, go on with the rest
        return Verification(
            name, version, False, f"could not execute: {run.problem}", output, _duration(output)
        )
    error = run if run.ename else None
    duration = _duration(output)
    if version == "solution" or stub_cell is None:
        if error is None:
            return Verification(name, version, True, "ran to the end", output, duration)
        return Verification(
            name, version, False, f"failed: {error.ename}: {error.evalue}", output, duration
        )
    if error is None:
        return Verification(
            name, version, False, "ran to the end although it has exercises", output, duration
        )
    if error.ename != "NotImplementedError":
        return Verification(
            name, version, False, f"failed with {error.ename}: {error.evalue}", output, duration
        )
    if error.cell_source.strip() != stub_cell.strip():
        return Verification(
            name,
            version,
            False,
            "NotImplementedError raised before the first exercise cell",
            output,
            duration,
        )
    return Verification(
        name, version, True, "stopped at its first exercise (NotImplementedError)", output, duration
    )


def verify(
    course_dir: str | os.PathLike,
    out_dir: str | os.PathLike | None = None,
    parameters: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    kernel_name: str = "python3",
    jobs: int = 1,
) -> list[Verification]:
    """Execute every notebook of a built course, solutions and student copies.

    Executed notebooks go to ``out_dir/<version>/`` (default ``course_dir/executed``); ``env`` is
    set while the kernels run (for example ``ZEUS_NB_BACKEND=sim``). ``jobs`` kernels run at once:
    most of a short run is kernel start-up and imports, which overlap well.
    """
    from concurrent.futures import ThreadPoolExecutor

    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    course = Path(course_dir)
    out = Path(out_dir) if out_dir is not None else course / "executed"
    todo: list[tuple[Path, str]] = []
    for version in ("solution", "student"):
        notebooks = sorted((course / version).glob("*.ipynb"))
        if not notebooks:
            raise CourseError(
                f"{course / version} has no notebooks; run `zeus-nb course build` first"
            )
        todo += [(nb, version) for nb in notebooks]
    with _environ(env), ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(
            pool.map(
                lambda job: _run_version(
                    job[0], job[1], out / job[1] / job[0].name, parameters, kernel_name
                ),
                todo,
            )
        )


@dataclass
class ExerciseResult:
    """One exercise of one graded submission."""

    submission: str
    exercise: int
    status: str  # "passed", "failed" or "not run"
    detail: str


def _grade_cells(nb: Any) -> list[tuple[str, str]]:
    """(status, detail) of each exercise cell of an executed notebook, in order."""
    out = []
    for cell in nb.cells:
        if cell.cell_type != "code" or EXERCISE_TAG not in cell.metadata.get("tags", []):
            continue
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        text = "".join(
            o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream"
        )
        if errors:
            e = errors[0]
            if e.get("ename") == "NotImplementedError":
                out.append(("failed", "not attempted (NotImplementedError)"))
            else:
                out.append(("failed", f"{e.get('ename')}: {e.get('evalue')}"))
        elif cell.get("execution_count") is None:
            out.append(("not run", "an earlier cell failed"))
        elif PASSED_MARK in text:
            out.append(("passed", text.strip().splitlines()[-1]))
        else:
            out.append(("failed", "no check result: keep the check call at the end of the cell"))
    return out


def _unique_output(out: Path, path: Path, taken: set[Path]) -> Path:
    base = f"{path.parent.name}_{path.name}" if path.parent.name else path.name
    target, n = out / base, 1
    while target in taken:
        n += 1
        target = out / f"{Path(base).stem}_{n}.ipynb"
    taken.add(target)
    return target


def _grade_one(
    path: Path,
    target: Path,
    parameters: Mapping[str, Any] | None,
    kernel_name: str,
    timeout: float | None,
) -> list[ExerciseResult]:
    """Execute one submission into ``target`` and judge its exercise cells."""
    import nbformat

    from zeus_nb.execute import execute

    name = str(path)
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as e:
        return [ExerciseResult(name, 0, "failed", f"not a readable notebook: {e}")]
    strip_outputs(nb)
    exercise_cells = [c for c in nb.cells if EXERCISE_TAG in c.metadata.get("tags", [])]
    if not exercise_cells:
        return [ExerciseResult(name, 0, "failed", "no cells tagged 'exercise' to grade")]
    for cell in exercise_cells:
        cell.metadata["tags"].append("raises-exception")  # go on to the next exercise
    # a failing cell is judged cell by cell below; a timeout or a dead kernel is the problem
    problem = execute(nb, target, parameters, path.parent, kernel_name, timeout).problem
    graded = _grade_cells(nbformat.read(target, as_version=4)) if target.exists() else []
    if len(graded) != len(exercise_cells):
        graded = [("not run", "")] * len(exercise_cells)
    results = []
    for number, (status, detail) in enumerate(graded, start=1):
        if problem and (status == "not run" or detail.startswith("KeyboardInterrupt")):
            detail = f"execution stopped: {problem}"
        results.append(ExerciseResult(name, number, status, detail))
    return results


def grade(
    submissions: Iterable[str | os.PathLike],
    out_dir: str | os.PathLike = "graded",
    parameters: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    kernel_name: str = "python3",
    timeout: float | None = 600.0,
    jobs: int = 1,
) -> list[ExerciseResult]:
    """Execute students' notebooks and judge every exercise cell.

    Submissions are notebooks (or folders of them, searched deeply) built by :func:`build`, so
    their exercise cells carry the ``exercise`` tag. A failing exercise does not stop the run, so
    later exercises are graded too; a failing cell outside the exercises does, and the exercises
    after it count as not run, as do those after a cell that runs longer than ``timeout`` seconds
    (None: no limit). Executed copies go to ``out_dir``; ``jobs`` submissions run at once.
    """
    from concurrent.futures import ThreadPoolExecutor

    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    files: list[Path] = []
    for p in map(Path, submissions):
        if p.is_dir():
            files += sorted(q for q in p.rglob("*.ipynb") if ".ipynb_checkpoints" not in q.parts)
        elif p.is_file():
            files.append(p)
        else:
            raise CourseError(f"{p}: no such notebook or folder")
    if not files:
        raise CourseError("no submissions (*.ipynb) found")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    taken: set[Path] = set()
    targets = [_unique_output(out, path, taken) for path in files]
    with _environ(env), ThreadPoolExecutor(max_workers=jobs) as pool:
        per_file = pool.map(
            lambda pair: _grade_one(pair[0], pair[1], parameters, kernel_name, timeout),
            zip(files, targets, strict=True),
        )
        return [r for results in per_file for r in results]


@dataclass
class Timing:
    notebook: str
    seconds: float
    status: str
    parameters: dict[str, Any]


def _duration(path: Path) -> float | None:
    import nbformat

    try:
        nb = nbformat.read(path, as_version=4)
    except (OSError, ValueError):
        return None
    value = nb.metadata.get("papermill", {}).get("duration")
    return float(value) if value is not None else None


def timings(paths: Iterable[str | os.PathLike]) -> list[Timing]:
    """Run times recorded by papermill in executed notebooks (files, or folders searched deeply)."""
    import nbformat

    paths = [Path(p) for p in paths]
    files: list[tuple[Path, Path]] = []
    for p in paths:
        if p.is_dir():
            files += [
                (q, q.relative_to(p))
                for q in sorted(p.rglob("*.ipynb"))
                if ".ipynb_checkpoints" not in q.parts
            ]
        elif p.is_file():
            files.append((p, Path(p.name)))
        else:
            raise CourseError(f"{p}: no such notebook or folder")
    if not files:
        raise CourseError("no notebooks (*.ipynb) found in " + ", ".join(map(str, paths)))
    rows, missing = [], []
    for path, shown in files:
        meta = nbformat.read(path, as_version=4).metadata.get("papermill", {})
        if meta.get("duration") is None:
            missing.append(str(path))
            continue
        status = "failed" if meta.get("exception") else "ok"
        rows.append(
            Timing(str(shown), float(meta["duration"]), status, dict(meta.get("parameters") or {}))
        )
    if missing:
        raise CourseError(
            "no papermill run time in " + ", ".join(missing) + "; execute these notebooks with "
            "papermill (or `zeus-nb course verify`) first"
        )
    return rows


def _fmt_seconds(s: float) -> str:
    if s < 60:
        return f"{s:.1f} s"
    minutes, seconds = divmod(round(s), 60)
    return f"{minutes} min {seconds:02d} s"


def timings_table(rows: Iterable[Timing]) -> str:
    """A markdown table of run times, with the total."""
    rows = list(rows)
    lines = ["| notebook | parameters | status | run time |", "|---|---|---|---:|"]
    for r in rows:
        params = ", ".join(f"{k}={v!r}" for k, v in r.parameters.items()) or "defaults"
        params = params.replace("|", "\\|")
        lines.append(f"| {r.notebook} | {params} | {r.status} | {_fmt_seconds(r.seconds)} |")
    total = sum(r.seconds for r in rows)
    lines.append(f"| **total** | | | **{_fmt_seconds(total)}** |")
    return "\n".join(lines) + "\n"
