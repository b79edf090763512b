"""What ``zeus-nb course grade`` prints and writes: per submission, per student, per outcome.

Grades add up: every run of ``course grade`` into one folder keeps the grades already there
(``grades.json``, the ledger ``grades.csv`` and ``totals.csv`` are written from) and replaces
only those of the notebooks it graded again (the same student's same notebook, i.e. the same
executed copy). A student is the folder a submission sits in
(``submissions/alice/01_x.ipynb`` is alice's); a notebook handed in loose is its own student.
Outcomes whose reason is always the same
("not attempted": the "your turn" line is still there) are explained once, in a legend, instead
of on every row; a failed check keeps its own line, since it says what went wrong.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from filelock import FileLock

from zeus_nb.course.grade import ExerciseResult
from zeus_nb.course.markers import CourseError
from zeus_nb.inputs.registry import not_input
from zeus_nb.inputs.source import read_json
from zeus_nb.utils.files import atomic_write

LEDGER = "grades.json"  # every grade of the folder, one object per exercise row

STATUSES = ("passed", "failed", "not attempted", "error", "not run")
# status -> the one sentence that explains it, shown once instead of on each row
LEGEND = {
    "not attempted": "the exercise cell still holds its 'your turn' line",
    "not run": "an earlier cell stopped the notebook before this exercise",
}


@dataclass
class StudentTotal:
    """One student's exercises over all their notebooks."""

    student: str
    notebooks: set[str] = field(default_factory=set)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STATUSES, 0))

    @property
    def exercises(self) -> int:
        return sum(self.counts.values())

    @property
    def passed(self) -> int:
        return self.counts["passed"]


@not_input(
    "grades.json, which course grade wrote into its output folder; a row it did not write is"
    " refused with a CourseError naming the file"
)
def read_ledger(path: Path) -> list[ExerciseResult]:
    """The grades an earlier ``course grade`` wrote into this folder (none if it is new)."""
    if not path.exists():
        return []
    data = read_json(path, "grade ledger")
    names = {f.name: f.type for f in fields(ExerciseResult)}
    fix = f"; move {path} away to start the grades over"
    if not isinstance(data, list):
        raise CourseError(f"{path}: not a list of grades{fix}")
    rows = []
    for i, row in enumerate(data):
        if (
            not isinstance(row, dict)
            or set(row) != set(names)
            or not isinstance(row["exercise"], int)
            or row["status"] not in STATUSES
            or not all(isinstance(row[k], str) for k in names if k != "exercise")
        ):
            raise CourseError(f"{path}: grade {i + 1} is not one zeus-nb wrote{fix}")
        rows.append(ExerciseResult(**row))
    return rows


def merge(
    previous: Sequence[ExerciseResult], new: Sequence[ExerciseResult]
) -> list[ExerciseResult]:
    """The earlier grades with those of every notebook graded again replaced by ``new`` (a
    notebook is its executed copy: the same student's same notebook), then the new ones."""
    again = {r.copy or r.submission for r in new}
    kept = [r for r in previous if (r.copy or r.submission) not in again]
    return [*kept, *new]


def record(out: Path, batch: Sequence[ExerciseResult]) -> list[ExerciseResult]:
    """Add ``batch`` to the folder's ledger and write ``grades.csv`` and ``totals.csv`` from it;
    every grade of the folder, returned. Under a lock: two graders into one folder both count."""
    path = out / LEDGER
    with FileLock(f"{path}.lock", timeout=60):
        results = merge(read_ledger(path), batch)
        atomic_write(path, json.dumps([asdict(r) for r in results], indent=1) + "\n")
        write_grades(out / "grades.csv", results)
        write_totals(out / "totals.csv", totals(results))
    return results


def student_of(submission: str | os.PathLike) -> str:
    """The student a submission belongs to: its folder's name (or the file's, when loose)."""
    path = Path(submission)
    parent = path.parent.name
    return parent if parent not in ("", ".") else path.stem


def totals(results: Iterable[ExerciseResult]) -> list[StudentTotal]:
    """Per-student totals, in the order students first appear."""
    by: dict[str, StudentTotal] = {}
    for r in results:
        total = by.setdefault(student_of(r.submission), StudentTotal(student_of(r.submission)))
        total.notebooks.add(r.submission)
        if r.exercise > 0:
            total.counts[r.status if r.status in STATUSES else "error"] += 1
    return list(by.values())


def _write_csv(path: Path, header: list[str], rows: Iterable[list]) -> None:
    """A whole CSV file through the one write path (never a half-written grade sheet)."""
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(header)
    writer.writerows(rows)
    atomic_write(path, text.getvalue())


def write_totals(path: Path, rows: Sequence[StudentTotal]) -> None:
    _write_csv(
        path,
        ["student", "notebooks", "exercises", *STATUSES],
        (
            [t.student, len(t.notebooks), t.exercises, *(t.counts[s] for s in STATUSES)]
            for t in rows
        ),
    )


def write_grades(path: Path, results: Sequence[ExerciseResult]) -> None:
    _write_csv(
        path,
        ["student", "submission", "exercise", "title", "status", "detail"],
        (
            [student_of(r.submission), r.submission, r.exercise, r.title, r.status,
             "" if r.status in LEGEND else r.detail]
            for r in results
        ),
    )  # fmt: skip


def submission_lines(rows: Sequence[ExerciseResult]) -> list[str]:
    """One summary line for a submission, then one line per exercise that did not pass.

    Exercises with a legend status are listed together, without repeating the reason.
    """
    passed = sum(r.status == "passed" for r in rows)
    total = sum(r.exercise > 0 for r in rows)
    lines = [f"{rows[0].submission}: {passed}/{total} passed"]
    for status in LEGEND:
        named = [r.label.removeprefix("exercise ") for r in rows if r.status == status]
        if named:
            lines.append(f"  {status}: exercise {', '.join(named)}")
    for r in rows:
        if r.status != "passed" and r.status not in LEGEND:
            lines.append(f"  {r.label}: {r.status}: {r.detail}")
    return lines


def legend_lines(results: Sequence[ExerciseResult]) -> list[str]:
    """The legend for the statuses that occurred."""
    seen = {r.status for r in results}
    return [f"{status}: {LEGEND[status]}" for status in LEGEND if status in seen]


def totals_lines(rows: Sequence[StudentTotal]) -> list[str]:
    """A fixed-width table: student, notebooks, passed of exercises, then each other outcome."""
    width = max([len("student"), *(len(t.student) for t in rows)])
    head = f"{'student':<{width}}  notebooks  passed  " + "  ".join(STATUSES[1:])
    lines = [head]
    for t in rows:
        others = "  ".join(f"{t.counts[s]:>{len(s)}}" for s in STATUSES[1:])
        lines.append(
            f"{t.student:<{width}}  {len(t.notebooks):>9}  {t.passed:>2}/{t.exercises:<3}  {others}"
        )
    return lines
