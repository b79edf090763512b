"""The notebook tour (``zeus-nb tour --smoke``), executed once per test session and shared.

``test_notebooks.py`` checks what the tour printed and what each notebook recorded;
``test_course.py`` judges the same executed notebooks as the instructor edition (the instructor
edition is the shipped notebook with its marker comments dropped, the same program). Running the
six notebooks once for both is most of what a test session spends on notebooks.

Under pytest-xdist every worker that needs the tour asks for it: the first one runs it under a file
lock in a folder all workers of the session share and leaves the result there; the others wait on
the lock and read it. Without xdist the session's own temporary folder holds it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from filelock import FileLock

REPO = Path(__file__).resolve().parents[1]
TOUR_TIMEOUT_S = 900  # six notebooks; about 400 s on a busy 2-core machine


def shared_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of this test session that every xdist worker sees (only its own without xdist).

    A worker's base folder is ``<session folder>/popen-gwN``; without xdist the parent would be
    the folder of *all* sessions, so the session's own folder is used instead.
    """
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def _run_tour(work: Path) -> subprocess.CompletedProcess:
    """``zeus-nb tour --smoke -o executed`` from ``work``, an unrelated working directory."""
    env = dict(os.environ)
    env.update(
        ZEUS_NB_BACKEND="sim",
        PYTHONPATH=os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p),
        MPLBACKEND="Agg",
    )
    env.pop("ZEUS_NB_HEADLESS", None)
    cmd = [sys.executable, "-m", "zeus_nb", "tour", "--smoke", "-o", "executed"]
    try:
        return subprocess.run(
            cmd, cwd=work, env=env, capture_output=True, text=True, timeout=TOUR_TIMEOUT_S
        )
    except subprocess.TimeoutExpired as e:  # recorded as a failed run, never run again

        def text(b):
            return b.decode(errors="replace") if isinstance(b, bytes) else b or ""

        stderr = text(e.stderr) + f"\ntour timed out after {TOUR_TIMEOUT_S} s"
        return subprocess.CompletedProcess(cmd, -9, text(e.stdout), stderr)


@pytest.fixture(scope="session")
def tour(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """The folder of executed notebooks and the tour's completed process (exit code, output)."""
    work = shared_dir(tmp_path_factory) / "tour"
    result = work / "result.json"
    with FileLock(str(work) + ".lock"):
        if not result.exists():
            work.mkdir(exist_ok=True)
            out = _run_tour(work)
            saved = {"args": out.args, "returncode": out.returncode}
            saved |= {"stdout": out.stdout, "stderr": out.stderr}
            result.write_text(json.dumps(saved))
        saved = json.loads(result.read_text())
    out = subprocess.CompletedProcess(
        saved["args"], saved["returncode"], saved["stdout"], saved["stderr"]
    )
    return work / "executed", out
