"""Grade students' submissions exercise by exercise."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zeus_nb.course.feedback import CellResult, exercise_report, exercise_title
from zeus_nb.course.markers import EXERCISE_TAG, CourseError, strip_outputs
from zeus_nb.course.verify import _environ
from zeus_nb.errors import InputError
from zeus_nb.inputs.registry import not_input
from zeus_nb.inputs.table import read_ipynb


@dataclass
class ExerciseResult:
    """One exercise of one graded submission."""

    submission: str
    exercise: int  # 1, 2, ... in the notebook's order; 0 for the notebook as a whole
    status: str  # "passed", "failed", "not attempted", "error" or "not run"
    detail: str
    title: str = ""  # the exercise's heading in the notebook ("the Zeus cost")
    copy: str = ""  # the executed copy's name in the output folder: one per student's notebook

    @property
    def label(self) -> str:
        """How a teacher reads which exercise it is: "exercise 2 (the Zeus cost)"."""
        if self.exercise == 0:
            return "notebook"
        return f"exercise {self.exercise}" + (f" ({self.title})" if self.title else "")


def _unique_output(out: Path, path: Path, taken: set[Path]) -> Path:
    base = f"{path.parent.name}_{path.name}" if path.parent.name else path.name
    target, n = out / base, 1
    while target in taken:
        n += 1
        target = out / f"{Path(base).stem}_{n}.ipynb"
    taken.add(target)
    return target


@not_input("a submitted notebook, read by nbformat; unreadable is that submission's grade")
def _grade_one(
    path: Path,
    target: Path,
    parameters: Mapping[str, Any] | None,
    kernel_name: str,
    timeout: float | None,
) -> list[ExerciseResult]:
    """Execute one submission into ``target`` and judge its exercise cells."""
    from zeus_nb.runner.execute import execute

    name = str(path)
    try:
        nb = read_ipynb(path, "submitted notebook")
    except Exception as e:
        return [ExerciseResult(name, 0, "failed", f"not a readable notebook: {e}", "", target.name)]
    strip_outputs(nb)
    exercise_cells = [c for c in nb.cells if EXERCISE_TAG in c.metadata.get("tags", [])]
    if not exercise_cells:
        detail = "no cells tagged 'exercise' to grade"
        return [ExerciseResult(name, 0, "failed", detail, "", target.name)]
    for cell in exercise_cells:
        cell.metadata["tags"].append("raises-exception")  # go on to the next exercise
    # a failing cell is judged cell by cell below; a timeout or a dead kernel is the problem
    problem = execute(nb, target, parameters, path.parent, kernel_name, timeout).problem
    graded, errors = exercise_report(read_ipynb(target)) if target.exists() else ([], [])
    if len(graded) != len(exercise_cells):
        titles = [
            exercise_title(nb.cells, next(i for i, x in enumerate(nb.cells) if x is c))
            for c in exercise_cells
        ]
        graded = [CellResult("not run", "", t) for t in titles]
    results = []
    for number, r in enumerate(graded, start=1):
        status, detail = r.status, r.detail
        if problem and (status == "not run" or "KeyboardInterrupt" in detail):
            status, detail = "failed", f"execution stopped: {problem}"
        results.append(ExerciseResult(name, number, status, detail, r.title, target.name))
    # a failing cell after the last exercise that no exercise's names explain: the notebook's
    for e in errors:
        if e.exercise is None and e.after_last and "KeyboardInterrupt" not in e.text:
            text = f"after the last exercise, {e.text}"
            results.append(ExerciseResult(name, 0, "error", text, "", target.name))
    return results


def grade(
    submissions: Iterable[str | os.PathLike],
    out_dir: str | os.PathLike = "graded",
    parameters: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    kernel_name: str = "python3",
    timeout: float | None = 600.0,
    jobs: int = 1,
    progress: Callable[[int, int, list[ExerciseResult], float], None] | None = None,
) -> list[ExerciseResult]:
    """Execute students' notebooks and judge every exercise cell.

    Submissions are notebooks (or folders of them, searched deeply) built by :func:`build`, so
    their exercise cells carry the ``exercise`` tag. A failing exercise does not stop the run, so
    later exercises are graded too; a failing cell outside the exercises does, and the exercises
    after it count as not run, as do those after a cell that runs longer than ``timeout`` seconds
    (None: no limit). Executed copies go to ``out_dir``; ``jobs`` submissions run at once.
    Paths may be relative or absolute, from any working directory; an untouched exercise is
    "not attempted", one whose code raised is "error" with the cell named. ``progress(done,
    total, results, seconds)`` is called as each submission finishes (in finishing order).
    """
    from concurrent.futures import ThreadPoolExecutor, as_completed

    if jobs < 1:
        raise InputError(f"jobs must be at least 1, got {jobs}")
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

    # lenient checks: a wrong answer is reported and the notebook goes on with the reference,
    # so every later exercise is graded on its own
    def one(path: Path, target: Path) -> tuple[list[ExerciseResult], float]:
        start = time.monotonic()
        results = _grade_one(path, target, parameters, kernel_name, timeout)
        return results, time.monotonic() - start

    with (
        _environ({"ZEUS_NB_CHECKS": "lenient", **dict(env or {})}),
        ThreadPoolExecutor(max_workers=jobs) as pool,
    ):
        futures = [pool.submit(one, f, t) for f, t in zip(files, targets, strict=True)]
        for done, future in enumerate(as_completed(futures), start=1):
            results, seconds = future.result()
            if progress is not None:
                progress(done, len(files), results, seconds)
        return [r for future in futures for r in future.result()[0]]
