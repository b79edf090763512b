"""Run times papermill recorded in executed notebooks, as a markdown table."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zeus_nb.course.markers import CourseError
from zeus_nb.errors import InputError, ZeusNbError
from zeus_nb.inputs.registry import not_input
from zeus_nb.inputs.table import read_ipynb
from zeus_nb.inputs.validate import DURATION, number


@dataclass
class Timing:
    notebook: str
    seconds: float
    status: str
    parameters: dict[str, Any]


@not_input("an executed notebook; its run time is checked there")
def _duration(path: Path) -> float | None:
    try:
        nb = read_ipynb(path, "executed notebook")
    except (OSError, ValueError):
        return None
    value = nb.metadata.get("papermill", {}).get("duration")
    try:
        return _checked_seconds(value, path) if value is not None else None
    except InputError:
        return None


def _checked_seconds(value: object, path: Path) -> float:
    """A recorded run time, checked: a damaged notebook must not print ``nan s`` or a negative
    total."""
    return number(
        value,
        f"{path}: metadata papermill.duration",
        DURATION,
        "execute the notebook again with papermill",
        text_ok=False,
    )


def timings(paths: Iterable[str | os.PathLike], problems: list[str] | None = None) -> list[Timing]:
    """Run times recorded by papermill in executed notebooks (files, or folders searched deeply).

    A notebook that cannot be read, or holds no valid run time, raises :class:`CourseError`;
    with a ``problems`` list it is described there instead and the others are still timed.
    """
    paths = [Path(p) for p in paths]
    files: list[tuple[Path, Path]] = []
    for p in paths:
        if p.is_dir():
            files += [
                (q, q.relative_to(p))
                for q in sorted(p.rglob("*.ipynb"))
                if ".ipynb_checkpoints" not in q.parts and not q.name.endswith(".partial.ipynb")
            ]
        elif p.is_file():
            files.append((p, Path(p.name)))
        else:
            raise CourseError(f"{p}: no such notebook or folder")
    if not files:
        raise CourseError("no notebooks (*.ipynb) found in " + ", ".join(map(str, paths)))
    rows, missing, bad = [], [], []
    for path, shown in files:
        try:
            meta = _papermill_metadata(path)
            if meta.get("duration") is None:
                missing.append(str(path))
                continue
            seconds = _checked_seconds(meta["duration"], path)
        except ZeusNbError as e:
            bad.append(str(e))
            continue
        status = "failed" if meta.get("exception") else "ok"
        rows.append(Timing(str(shown), seconds, status, dict(meta.get("parameters") or {})))
    if missing:
        bad.append(
            "no papermill run time in " + ", ".join(missing) + "; execute these notebooks with "
            "papermill (or `zeus-nb course verify`) first"
        )
    if bad and problems is None:
        raise CourseError("; ".join(bad))
    if problems is not None:
        problems += bad
    return rows


@not_input("an executed notebook, read by nbformat")
def _papermill_metadata(path: Path) -> dict:
    """The ``papermill`` metadata of one notebook, or a :class:`CourseError` naming it."""
    try:
        meta = read_ipynb(path, "executed notebook").metadata.get("papermill", {})
    except (OSError, ValueError, AttributeError, KeyError, TypeError) as e:  # not a notebook
        raise CourseError(f"{path}: not a readable notebook ({e})") from None
    if not isinstance(meta, dict):
        raise CourseError(f"{path}: metadata papermill is not an object; execute it again")
    return meta


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
