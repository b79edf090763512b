"""Read what the exercise checks showed in an executed notebook: passed, failed, not attempted.

Shared by ``course verify`` (the student edition must show every exercise "not done yet", the
instructor edition every exercise passed) and ``course grade``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from zeus_nb.course.check import FAILED_MARK, NOT_DONE_MARK, PASSED_MARK

EXERCISE_TAG = "exercise"


@dataclass
class CellResult:
    """One exercise cell of an executed notebook."""

    status: str  # "passed", "failed", "not attempted", "error", "not run"
    detail: str


def _source(cell: Any) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def cell_text(cell: Any) -> str:
    """Everything a cell printed or displayed as plain text."""
    parts = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            parts.append(o.get("text", ""))
        elif o.get("output_type") in ("display_data", "execute_result"):
            text = o.get("data", {}).get("text/plain", "")
            parts.append("".join(text) if isinstance(text, list) else text)
    return "\n".join(parts)


def _first_line(cell: Any) -> str:
    lines = [ln for ln in _source(cell).splitlines() if ln.strip() and not ln.startswith("#")]
    return lines[0].strip()[:60] if lines else ""


def _judge_cell(cell: Any, number: int) -> CellResult:
    errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    text = cell_text(cell)
    if errors:
        e = errors[0]
        if e.get("ename") == "NotImplementedError":
            return CellResult("not attempted", "the 'your turn' line is still there")
        if e.get("ename") == "CheckError":
            return CellResult("failed", e.get("evalue", ""))
        return CellResult(
            "error", f"{e.get('ename')}: {e.get('evalue')} in cell {number} ({_first_line(cell)})"
        )
    if cell.get("execution_count") is None:
        return CellResult("not run", "an earlier cell failed")
    for line in text.splitlines():
        if line.startswith(PASSED_MARK):
            return CellResult("passed", line[1:].strip())
        if line.startswith(FAILED_MARK):
            return CellResult("failed", line[1:].strip())
        if line.startswith(NOT_DONE_MARK):
            return CellResult("not attempted", line[1:].strip())
    return CellResult("failed", "no check result: keep the check call at the end of the cell")


def exercise_results(nb: Any) -> list[CellResult]:
    """The result of each exercise cell, in order; a failing cell before one is named in it."""
    out: list[CellResult] = []
    stopped: str | None = None
    for number, cell in enumerate(nb.cells, start=1):
        if cell.get("cell_type") != "code":
            continue
        is_exercise = EXERCISE_TAG in cell.get("metadata", {}).get("tags", [])
        if is_exercise:
            result = _judge_cell(cell, number)
            if stopped and result.status == "not run":
                result = CellResult("error", stopped)
            out.append(result)
            continue
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        if errors and stopped is None:
            e = errors[0]
            stopped = (
                f"the notebook stopped at cell {number} ({_first_line(cell)}): "
                f"{e.get('ename')}: {e.get('evalue')}"
            )
    return out
