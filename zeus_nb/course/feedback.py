"""Read what the exercise checks showed in an executed notebook: passed, failed, not attempted.

Shared by ``course verify`` (the student edition must show every exercise "not done yet", the
instructor edition every exercise passed) and ``course grade``. What it reports is for the
teacher: each exercise by its title (the notebook's "Exercise: ..." heading above it), the check's
line without the sentence addressed to the student, and an error that a student's code caused in
a later cell (a cell that uses a name the exercise cell defined), which the check alone cannot
see.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

from zeus_nb.course.check import FAILED_MARK, GOING_ON, NOT_DONE_MARK, PASSED_MARK

EXERCISE_TAG = "exercise"
WENT_ON = "later cells ran with the reference answer"
_HEADING = re.compile(r"^#+\s*(Exercise\b[^\n]*)$", re.M | re.I)
_CHECK_CALL = re.compile(r"^\s*\w+\s*=\s*check\.(\w+)\(", re.M)  # an exercise's check


@dataclass
class CellResult:
    """One exercise cell of an executed notebook."""

    status: str  # "passed", "failed", "not attempted", "error", "not run"
    detail: str
    title: str = ""  # the exercise's heading ("the Zeus cost"), else its check's name


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


def for_teacher(line: str) -> str:
    """A check's line as the teacher reads it: the student's "goes on" sentence replaced."""
    line = line.strip()
    if line.endswith(GOING_ON.strip()):
        line = line[: -len(GOING_ON.strip())].rstrip()
        return f"{line} ({WENT_ON})"
    return line


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
            return CellResult("failed", for_teacher(line[1:]))
        if line.startswith(NOT_DONE_MARK):
            return CellResult("not attempted", line[1:].strip())
    return CellResult("failed", "no check result: keep the check call at the end of the cell")


def exercise_title(cells: list[Any], index: int) -> str:
    """The title of the exercise in ``cells[index]``: the last "Exercise ..." heading of the
    markdown since the previous code cell with a check (its words after "Exercise N:"), else
    the name of the check the cell calls."""
    for cell in reversed(cells[:index]):
        if cell.get("cell_type") == "markdown":
            found = _HEADING.findall(_source(cell))
            if found:
                title = found[-1].strip()
                return re.sub(r"^Exercise\s*\d*\s*[:.-]?\s*", "", title, flags=re.I) or title
        elif _CHECK_CALL.search(_source(cell)):
            break
    called = _CHECK_CALL.findall(_source(cells[index]))
    return called[0].replace("_", " ") if called else ""


def _defined(cell: Any) -> set[str]:
    """Names an exercise cell binds (its function, the check's result)."""
    try:
        tree = ast.parse(_source(cell))
    except SyntaxError:
        return set()
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


def _used(cell: Any) -> set[str]:
    try:
        tree = ast.parse(_source(cell))
    except SyntaxError:
        return set(re.findall(r"\b\w+\b", _source(cell)))
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


@dataclass
class LaterError:
    """A cell outside the exercises that failed, and the exercise whose names it used, if any."""

    cell: int
    text: str
    exercise: int | None  # position in the list of exercise results, or None
    names: list[str]
    after_last: bool = False  # no exercise cell follows it


def _later_note(err: LaterError) -> str:
    uses = ", ".join(err.names)
    return f"later, {err.text}; that cell uses {uses} from this exercise"


def exercise_results(nb: Any) -> list[CellResult]:
    """The result of each exercise cell, in order; a failing cell before one is named in it,
    and one after it that uses the exercise's names is added to that exercise's detail."""
    return exercise_report(nb)[0]


def exercise_report(nb: Any) -> tuple[list[CellResult], list[LaterError]]:
    """:func:`exercise_results` and every failing cell outside the exercises."""
    out: list[CellResult] = []
    defined: list[set[str]] = []
    errors: list[LaterError] = []
    stopped: str | None = None
    cells = list(nb.cells)
    for number, cell in enumerate(cells, start=1):
        if cell.get("cell_type") != "code":
            continue
        is_exercise = EXERCISE_TAG in cell.get("metadata", {}).get("tags", [])
        if is_exercise:
            result = _judge_cell(cell, number)
            result.title = exercise_title(cells, number - 1)
            if stopped and result.status == "not run":
                result = CellResult("error", stopped, result.title)
            out.append(result)
            defined.append(_defined(cell))
            continue
        found = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        if not found:
            continue
        e = found[0]
        text = f"cell {number} ({_first_line(cell)}) failed: {e.get('ename')}: {e.get('evalue')}"
        if stopped is None:
            stopped = f"the notebook stopped at {text.replace(' failed:', ':', 1)}"
        used = _used(cell)
        culprit = next((i for i in range(len(defined) - 1, -1, -1) if defined[i] & used), None)
        names = sorted(defined[culprit] & used) if culprit is not None else []
        errors.append(LaterError(number, text, culprit, names))
        if culprit is not None:
            result = out[culprit]
            if result.status == "passed":
                result.status = "error"
                result.detail = f"its check passed ({result.detail}), but {_later_note(errors[-1])}"
            else:
                result.detail = f"{result.detail}; {_later_note(errors[-1])}"
    tagged = [
        i for i, c in enumerate(cells, 1) if EXERCISE_TAG in c.get("metadata", {}).get("tags", [])
    ]
    last = max(tagged, default=0)
    for err in errors:
        err.after_last = err.cell > last
    return out, errors
