"""Notebook runs executed once per test session and shared by every test that needs them.

Two runs are defined here, each on the simulated backend in smoke mode:

* ``tour``: ``zeus-nb tour --smoke``, the shipped notebooks, which are the instructor edition's
  program (the marker comments aside). ``test_notebooks.py`` checks what it printed and
  recorded; ``test_notebooks.py`` and ``test_course.py`` judge its exercises as passed.
* ``student_editions``: the student edition of every notebook executed as the tutorial site
  shows it (``zeus_nb.docsite.execute_notebooks``). ``test_course.py`` judges every exercise as
  "not done yet" on it, and ``test_site.py`` builds the site from it (``--executed``) instead of
  executing the notebooks again.

Three more tours run the notebooks on the NVML backend over fake GPUs shaped like real ones
(``tests/fake_nvml``): one H100 (``nvml_tour_h100``), four A40s (``nvml_tour_a40x4``), and one
H100 this process may read but not change (``nvml_tour_h100_readonly``: every setter refused). Their
energy counters move every 100 ms and every read costs what it costs on the hardware, so they
show what a real GPU does to the notebooks; ``test_tour_nvml.py`` judges them. The read-only
tour runs all six; the other two run 01 to 05 (:data:`SHAPED_ONLY`): notebook 06 computes on
simulated GPUs whatever GPU its kernel found (its records say so), so its run on the read-only
H100 stands for all three, and ``test_tour_nvml.py`` checks that its numbers there are the
simulated tour's, digit for digit. Their fake GPUs wait in real time (the H100 tour alone: 41 s
of CPU in 90 s, at load 9), so the first test that asks for one of them runs all three side by
side (:func:`session_runs`) and their waits overlap.

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

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from filelock import FileLock

REPO = Path(__file__).resolve().parents[1]
FAKE_NVML = REPO / "tests" / "fake_nvml"

# name -> seconds a run may take. Measured for the smoke runs of the six notebooks: the tour
# 1 min 23 s and the student editions about as long on a quiet machine (load average 0.1-2.8,
# the README's run-time table); at load average 8 on 2 cores a run takes about 4x longer
# (the whole suite took 29.5 min there against 9.5 min at load 0.6), about 340 s, hence 900 s.
# The tours on fake NVML GPUs took about 2.5 min each beside the others, hence the same limit.
RUN_LIMITS: dict[str, float] = {
    "tour": 900,
    "student_editions": 900,
    "tour-nvml-h100": 900,
    "tour-nvml-a40x4": 900,
    "tour-nvml-h100-readonly": 900,  # the same tour; the limit changes run simulated
}
TOUR_TIMEOUT_S = RUN_LIMITS["tour"]  # the name earlier tests used
#: fixture -> the run it reads (a test that asks for one dynamically sets its own timeout)
FIXTURE_RUNS = {
    "tour": "tour",
    "student_editions": "student_editions",
    "nvml_tour_h100": "tour-nvml-h100",
    "nvml_tour_a40x4": "tour-nvml-a40x4",
    "nvml_tour_h100_readonly": "tour-nvml-h100-readonly",
}


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
    return session_runs(tmp_path_factory, {name: run})[name]


def session_runs(
    tmp_path_factory: pytest.TempPathFactory,
    runs: dict[str, Callable[[Path], subprocess.CompletedProcess]],
) -> dict[str, tuple[Path, subprocess.CompletedProcess]]:
    """:func:`session_run` for several runs at once: those not done yet run side by side.

    For runs that wait (the NVML tours: their fake GPUs' reads and counter steps take real time,
    as on the card), so their waits overlap instead of adding up on one worker. The
    locks are taken in name order, so workers asking for overlapping sets never deadlock.
    """
    base = shared_dir(tmp_path_factory)
    with contextlib.ExitStack() as held:
        for name in sorted(runs):
            held.enter_context(FileLock(str(base / name) + ".lock"))
        todo = [name for name in runs if not (base / name / "result.json").exists()]
        with ThreadPoolExecutor(max_workers=max(1, len(todo))) as pool:
            list(pool.map(lambda name: _save(base / name, runs[name]), todo))
        return {name: (base / name, _load(base / name)) for name in runs}


def _save(work: Path, run: Callable[[Path], subprocess.CompletedProcess]) -> None:
    work.mkdir(exist_ok=True)
    out = run(work)
    saved = {"args": out.args, "returncode": out.returncode}
    saved |= {"stdout": out.stdout, "stderr": out.stderr}
    (work / "result.json").write_text(json.dumps(saved))


def _load(work: Path) -> subprocess.CompletedProcess:
    saved = json.loads((work / "result.json").read_text())
    return subprocess.CompletedProcess(
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
    for name in ("ZEUS_NB_HEADLESS", "ZEUS_NB_CHECKS", "ZEUS_NB_ENERGY_READS"):
        env.pop(name, None)
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env


TOUR = [sys.executable, "-m", "zeus_nb", "tour", "--smoke", "-o", "executed"]
#: the notebooks the H100 and A40 tours run (``--only``): all but 06, which the read-only tour runs
SHAPED_ONLY = "01,02,03,04,05"


def _run_tour(work: Path) -> subprocess.CompletedProcess:
    """``zeus-nb tour --smoke -o executed`` from ``work``, an unrelated working directory."""
    return run_bounded(TOUR, work, sim_env(), RUN_LIMITS["tour"])


def nvml_env(work: Path, row: str, num_gpus: int, deny_setters: bool = False) -> dict[str, str]:
    """The environment of a run on ``num_gpus`` fake GPUs shaped like ``row`` (with
    ``deny_setters``, GPUs this process may read but not change); their state file is
    ``work/fake_nvml.json`` (written by the fake itself, in a subprocess)."""
    state = work / "fake_nvml.json"
    shape = f"{row!r}, {num_gpus}, deny_setters={deny_setters}"
    code = (
        "import json, sys, pynvml; "
        f"open(sys.argv[1], 'w').write(json.dumps(pynvml.row_state({shape})))"
    )
    env = dict(os.environ, PYTHONPATH=str(FAKE_NVML))
    subprocess.run([sys.executable, "-c", code, str(state)], env=env, check=True)
    env = sim_env()
    env.update(
        ZEUS_NB_BACKEND="nvml",
        ZEUS_NB_ENERGY_READS="auto",  # monitors judge the counter as on the real card
        ZEUS_NB_FAKE_NVML_STATE=str(state),
        ZEUS_NB_STATE_DIR=str(work / "zeus-nb-state"),
        PYTHONPATH=os.pathsep.join((str(FAKE_NVML), env["PYTHONPATH"])),
    )
    return env


def _nvml_tour(
    row: str, num_gpus: int, name: str, deny_setters: bool = False, only: str | None = None
) -> Callable[[Path], subprocess.CompletedProcess]:
    """The tour on fake GPUs (:func:`nvml_env`); with ``only``, those notebooks."""

    def run(work: Path) -> subprocess.CompletedProcess:
        env = nvml_env(work, row, num_gpus, deny_setters)
        cmd = TOUR + (["--only", only] if only else [])
        return run_bounded(cmd, work, env, RUN_LIMITS[name])

    return run


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


@dataclass
class NvmlTour:
    """An executed tour on fake GPUs: its notebooks, its process, and the GPUs' final state."""

    out_dir: Path
    run: subprocess.CompletedProcess
    state_path: Path

    @property
    def state(self) -> dict:
        return json.loads(self.state_path.read_text())


#: fixture -> (GPU row, GPUs, setters refused, notebooks): the tours on fake GPUs
NVML_TOURS = {
    "nvml_tour_h100": ("h100", 1, False, SHAPED_ONLY),
    "nvml_tour_a40x4": ("a40", 4, False, SHAPED_ONLY),
    "nvml_tour_h100_readonly": ("h100", 1, True, None),
}


def _shared_nvml_tour(tmp_path_factory, fixture: str) -> NvmlTour:
    """The tour of ``fixture``; the first test asking for any NVML tour runs all three side by
    side (:func:`session_runs`), so that their fake GPUs' real-time waits overlap."""
    runs = {}
    for each, (row, num_gpus, deny, only) in NVML_TOURS.items():
        name = FIXTURE_RUNS[each]
        runs[name] = _nvml_tour(row, num_gpus, name, deny, only)
    work, out = session_runs(tmp_path_factory, runs)[FIXTURE_RUNS[fixture]]
    return NvmlTour(work / "executed", out, work / "fake_nvml.json")


@pytest.fixture(scope="session")
def nvml_tour_h100(tmp_path_factory) -> NvmlTour:
    """The smoke tour of notebooks 01 to 05 on the NVML backend over one fake H100."""
    return _shared_nvml_tour(tmp_path_factory, "nvml_tour_h100")


@pytest.fixture(scope="session")
def nvml_tour_a40x4(tmp_path_factory) -> NvmlTour:
    """The smoke tour of notebooks 01 to 05 on the NVML backend over four fake A40s."""
    return _shared_nvml_tour(tmp_path_factory, "nvml_tour_a40x4")


@pytest.fixture(scope="session")
def nvml_tour_h100_readonly(tmp_path_factory) -> NvmlTour:
    """The smoke tour on the NVML backend over one fake H100 whose setters all refuse."""
    return _shared_nvml_tour(tmp_path_factory, "nvml_tour_h100_readonly")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that uses a session run gets the run's time limit on top of its own."""
    base = float(config.getoption("timeout", None) or config.getini("timeout") or 0)
    if not base:
        return
    for item in items:
        uses = {FIXTURE_RUNS.get(name) for name in item.fixturenames}
        runs = [RUN_LIMITS[name] for name in RUN_LIMITS if name in uses]
        marker = item.get_closest_marker("timeout")
        own = float(marker.args[0]) if marker and marker.args else base
        if runs:
            item.add_marker(pytest.mark.timeout(own + sum(runs)))
