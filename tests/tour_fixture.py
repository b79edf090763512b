"""Notebook runs executed once per test session and shared by every test that needs them.

Two runs are defined here, each on the simulated backend in smoke mode:

* ``tour``: ``zeus-nb tour --smoke``, the shipped notebooks, which are the instructor edition's
  program (the marker comments aside). ``test_notebooks.py`` checks what it printed and
  recorded; ``test_notebooks.py`` and ``test_course.py`` judge its exercises as passed.
* ``student_editions``: the student edition of every notebook executed as the tutorial site
  shows it (``zeus_nb.docsite.execute_notebooks``). ``test_course.py`` judges every exercise as
  "not done yet" on it, and ``test_site.py`` builds the site from it (``--executed``) instead of
  executing the notebooks again.

A further run is one :func:`session_run` call in a fixture of its own: the first test that asks
for it runs it under a file lock, in a folder every pytest-xdist worker of the session shares
(without xdist, the session's own temporary folder), and saves the finished process; every
other test, on any worker, waits on the lock and reads that. A run is never repeated in a
session, not even after it failed or timed out (the failure is what the tests then report).

Time limits: each run has its own hard limit (:data:`RUN_LIMITS`), set at twice what it took on
this project's shared 2-core machine at load average 8; the first test to ask for a run pays for
it, so every test that uses a run gets pytest's per-test limit plus the run's
(:func:`pytest_collection_modifyitems`), and no test comes within 2x of its limit because of a
run it only reads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock

REPO = Path(__file__).resolve().parents[1]

# name -> seconds a run may take. Measured for the smoke runs of the six notebooks: the tour
# 1 min 23 s and the student editions about as long on a quiet machine (load average 0.1-2.8,
# the README's run-time table); at load average 8 on 2 cores a run takes about 4x longer
# (the whole suite took 29.5 min there against 9.5 min at load 0.6), about 340 s, hence 900 s.
RUN_LIMITS: dict[str, float] = {"tour": 900, "student_editions": 900}
TOUR_TIMEOUT_S = RUN_LIMITS["tour"]  # the name earlier tests used


def shared_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of this test session that every xdist worker sees (only its own without xdist).

    A worker's base folder is ``<session folder>/popen-gwN``; without xdist the parent would be
    the folder of *all* sessions, so the session's own folder is used instead.
    """
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def _text(b) -> str:
    return b.decode(errors="replace") if isinstance(b, bytes) else b or ""


def run_bounded(cmd: list[str], cwd: Path, env: dict, limit: float) -> subprocess.CompletedProcess:
    """``cmd`` with a hard time limit; a timeout comes back as a failed process that says so."""
    try:
        return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired as e:
        stderr = _text(e.stderr) + f"\nthe run timed out after {limit:g} s"
        return subprocess.CompletedProcess(cmd, -9, _text(e.stdout), stderr)


def session_run(
    tmp_path_factory: pytest.TempPathFactory,
    name: str,
    run: Callable[[Path], subprocess.CompletedProcess],
) -> tuple[Path, subprocess.CompletedProcess]:
    """``run(work)`` once per test session for all xdist workers; (work folder, its process).

    ``run`` gets an empty folder of its own and returns the finished process; its output files
    stay in that folder. Add ``name`` to :data:`RUN_LIMITS` so tests that use it get the time.
    """
    work = shared_dir(tmp_path_factory) / name
    result = work / "result.json"
    with FileLock(str(work) + ".lock"):
        if not result.exists():
            work.mkdir(exist_ok=True)
            out = run(work)
            saved = {"args": out.args, "returncode": out.returncode}
            saved |= {"stdout": out.stdout, "stderr": out.stderr}
            result.write_text(json.dumps(saved))
        saved = json.loads(result.read_text())
    return work, subprocess.CompletedProcess(
        saved["args"], saved["returncode"], saved["stdout"], saved["stderr"]
    )


def sim_env() -> dict[str, str]:
    """The environment of every session run: simulated GPU, this checkout's zeus_nb, no GUI."""
    env = dict(os.environ)
    env.update(
        ZEUS_NB_BACKEND="sim",
        PYTHONPATH=os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p),
        MPLBACKEND="Agg",
    )
    env.pop("ZEUS_NB_HEADLESS", None)
    env.pop("ZEUS_NB_CHECKS", None)
    return env


def _run_tour(work: Path) -> subprocess.CompletedProcess:
    """``zeus-nb tour --smoke -o executed`` from ``work``, an unrelated working directory."""
    cmd = [sys.executable, "-m", "zeus_nb", "tour", "--smoke", "-o", "executed"]
    return run_bounded(cmd, work, sim_env(), RUN_LIMITS["tour"])


STUDENT_EDITIONS = """
import sys
from pathlib import Path
from zeus_nb.docsite import execute_notebooks
for path in execute_notebooks(Path(sys.argv[1])):
    print(path.name, flush=True)
"""


def _run_student_editions(work: Path) -> subprocess.CompletedProcess:
    """The student edition of every shipped notebook, executed as the site shows it (with its
    figures: no MPLBACKEND, so the kernels draw inline)."""
    cmd = [sys.executable, "-c", STUDENT_EDITIONS, str(work / "executed")]
    env = sim_env()
    env.pop("MPLBACKEND", None)
    return run_bounded(cmd, work, env, RUN_LIMITS["student_editions"])


@pytest.fixture(scope="session")
def tour(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """The folder of executed notebooks and the tour's completed process (exit code, output)."""
    work, out = session_run(tmp_path_factory, "tour", _run_tour)
    return work / "executed", out


@pytest.fixture(scope="session")
def student_editions(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """The folder of executed student editions (smoke mode) and the run's completed process."""
    work, out = session_run(tmp_path_factory, "student_editions", _run_student_editions)
    return work / "executed", out


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that uses a session run gets the run's time limit on top of its own."""
    base = float(config.getoption("timeout", None) or config.getini("timeout") or 0)
    if not base:
        return
    for item in items:
        runs = [RUN_LIMITS[name] for name in RUN_LIMITS if name in item.fixturenames]
        marker = item.get_closest_marker("timeout")
        own = float(marker.args[0]) if marker and marker.args else base
        if runs:
            item.add_marker(pytest.mark.timeout(own + sum(runs)))
