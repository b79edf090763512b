"""Execute a built course: solutions run to the end, student copies stop at their first exercise."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zeus_nb.course.markers import STUB, VERSIONS, CourseError, _source
from zeus_nb.course.timings import _duration


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
