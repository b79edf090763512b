"""What ``zeus-nb course grade`` prints and writes: per submission, per student, per outcome.

A student is the folder a submission sits in (``submissions/alice/01_x.ipynb`` is alice's);
a notebook handed in loose is its own student. Outcomes whose reason is always the same
("not attempted": the "your turn" line is still there) are explained once, in a legend, instead
of on every row; a failed check keeps its own line, since it says what went wrong.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from zeus_nb.course.grade import ExerciseResult
from zeus_nb.utils.files import atomic_write

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
