"""Execute a built course: both editions run to the end; solutions pass, student stubs say so."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zeus_nb.course.feedback import exercise_results
from zeus_nb.course.markers import VERSIONS, CourseError
from zeus_nb.course.timings import _duration
from zeus_nb.errors import InputError
from zeus_nb.inputs.registry import not_input
from zeus_nb.inputs.table import read_ipynb
from zeus_nb.runner.notebooks import kernel_environment


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

    return kernel_environment(dict(extra or {}))


def execute_version(
    notebook: Path,
    version: str,
    output: Path,
    parameters: Mapping[str, Any] | None = None,
    kernel_name: str = "python3",
    env: Mapping[str, str] | None = None,
) -> Verification:
    """Execute one built notebook and judge it as ``version`` ("student" or "solution").

    Both run to the end. A solution passes when every exercise check passes (checks are
    strict here: a wrong reference raises); a student copy when every exercise shows its
    "not done yet" line and the notebook went on with the reference answers.
    ``env`` is set while the kernel runs (for example ``ZEUS_NB_BACKEND=sim``).
    """
    with _environ({"ZEUS_NB_CHECKS": "strict", **dict(env or {})}):
        return _run_version(notebook, version, output, parameters, kernel_name)


def _run_version(
    notebook: Path,
    version: str,
    output: Path,
    parameters: Mapping[str, Any] | None,
    kernel_name: str,
) -> Verification:
    """:func:`execute_version` in the current environment (safe to call from several threads)."""
    from zeus_nb.runner.execute import execute

    if version not in VERSIONS:
        raise InputError(f"version must be one of {VERSIONS}, got {version!r}")
    name = notebook.name
    run = execute(notebook.resolve(), output, parameters, notebook.parent, kernel_name)
    if run.problem:  # the kernel died or would not start: report it, go on with the rest
        detail = f"could not execute: {run.problem}"
        return Verification(name, version, False, detail, output, _duration(output))
    if run.ename:
        detail = f"failed: {run.ename}: {run.evalue}"
        return Verification(name, version, False, detail, output, _duration(output))
    return judge_executed(output, version, name)


@not_input("an executed notebook, read by nbformat")
def judge_executed(output: Path, version: str, name: str | None = None) -> Verification:
    """Judge an already executed notebook as ``version`` ("student" or "solution"): every
    exercise passed, or every exercise "not done yet" (see :func:`execute_version`). A run that
    stopped at an error fails, naming it."""
    if version not in VERSIONS:
        raise InputError(f"version must be one of {VERSIONS}, got {version!r}")
    name = name or output.name
    duration = _duration(output)
    nb = read_ipynb(output, "executed notebook")
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    if errors:
        e = errors[0]
        detail = f"failed: {e.get('ename')}: {e.get('evalue')}"
        return Verification(name, version, False, detail, output, duration)
    results = exercise_results(nb)
    want = "passed" if version == "solution" else "not attempted"
    off = [
        f"exercise {i}: {r.status} ({r.detail})"
        for i, r in enumerate(results, 1)
        if r.status != want
    ]
    if off:
        return Verification(name, version, False, "; ".join(off), output, duration)
    what = "every exercise passed" if version == "solution" else "every exercise says not done yet"
    return Verification(name, version, True, f"ran to the end, {what}", output, duration)


def verify(
    course_dir: str | os.PathLike,
    out_dir: str | os.PathLike | None = None,
    parameters: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    kernel_name: str = "python3",
    jobs: int = 1,
) -> list[Verification]:
    """Execute every notebook of a built course, solutions and student copies.

    Paths may be relative or absolute, from any working directory.

    Executed notebooks go to ``out_dir/<version>/`` (default ``course_dir/executed``); ``env`` is
    set while the kernels run (for example ``ZEUS_NB_BACKEND=sim``). ``jobs`` kernels run at once:
    most of a short run is kernel start-up and imports, which overlap well.
    """
    from concurrent.futures import ThreadPoolExecutor

    if jobs < 1:
        raise InputError(f"jobs must be at least 1, got {jobs}")
    course = Path(course_dir).resolve()
    out = Path(out_dir).resolve() if out_dir is not None else course / "executed"
    todo: list[tuple[Path, str]] = []
    for version in ("solution", "student"):
        notebooks = sorted((course / version).glob("*.ipynb"))
        if not notebooks:
            raise CourseError(
                f"{course / version} has no notebooks; run `zeus-nb course build` first"
            )
        todo += [(nb, version) for nb in notebooks]
    with (
        _environ({"ZEUS_NB_CHECKS": "strict", **dict(env or {})}),
        ThreadPoolExecutor(max_workers=jobs) as pool,
    ):
        return list(
            pool.map(
                lambda job: _run_version(
                    job[0], job[1], out / job[1] / job[0].name, parameters, kernel_name
                ),
                todo,
            )
        )
