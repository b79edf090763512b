"""Run times papermill recorded in executed notebooks, as a markdown table."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zeus_nb.course.markers import CourseError


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
