"""The notebook tour (``zeus-nb tour --smoke``), executed once per test session and shared.

``test_notebooks.py`` checks what the tour printed and what each notebook recorded;
``test_course.py`` judges the same executed notebooks as the instructor edition (the instructor
edition is the shipped notebook with its marker comments dropped, the same program). Running the
six notebooks once for both is most of what a test session spends on notebooks.

Two more tours run the six notebooks on the NVML backend over fake GPUs shaped like real ones
(``tests/fake_nvml``): one H100 (``nvml_tour_h100``) and four A40s (``nvml_tour_a40x4``). Their
energy counters move every 100 ms and every read costs what it costs on the hardware, so they
show what a real GPU does to the notebooks; ``test_tour_nvml.py`` judges them.

Under pytest-xdist every worker that needs the tour asks for it: the first one runs it under a file
lock in a folder all workers of the session share and leaves the result there; the others wait on
the lock and read it. Without xdist the session's own temporary folder holds it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from filelock import FileLock

REPO = Path(__file__).resolve().parents[1]
FAKE_NVML = REPO / "tests" / "fake_nvml"
TOUR_TIMEOUT_S = 900  # six notebooks; about 400 s on a busy 2-core machine


def shared_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of this test session that every xdist worker sees (only its own without xdist).

    A worker's base folder is ``<session folder>/popen-gwN``; without xdist the parent would be
    the folder of *all* sessions, so the session's own folder is used instead.
    """
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def _run_tour(work: Path, extra: dict[str, str]) -> subprocess.CompletedProcess:
    """``zeus-nb tour --smoke -o executed`` from ``work``, an unrelated working directory, with
    ``extra`` in its environment (``PYTHONPATH`` entries go first)."""
    env = dict(os.environ)
    path = [extra.pop("PYTHONPATH", ""), str(REPO), env.get("PYTHONPATH", "")]
    env.update(extra, PYTHONPATH=os.pathsep.join(p for p in path if p), MPLBACKEND="Agg")
    env.pop("ZEUS_NB_HEADLESS", None)
    env.pop("CUDA_VISIBLE_DEVICES", None)
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


def _shared_tour(
    tmp_path_factory, name: str, environment
) -> tuple[Path, subprocess.CompletedProcess]:
    """The tour ``name``, run once per session under a file lock; ``environment(work)`` gives
    its extra environment variables (and prepares what they point at)."""
    work = shared_dir(tmp_path_factory) / name
    result = work / "result.json"
    with FileLock(str(work) + ".lock"):
        if not result.exists():
            work.mkdir(exist_ok=True)
            out = _run_tour(work, environment(work))
            saved = {"args": out.args, "returncode": out.returncode}
            saved |= {"stdout": out.stdout, "stderr": out.stderr}
            result.write_text(json.dumps(saved))
        saved = json.loads(result.read_text())
    out = subprocess.CompletedProcess(
        saved["args"], saved["returncode"], saved["stdout"], saved["stderr"]
    )
    return work / "executed", out


@pytest.fixture(scope="session")
def tour(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """The folder of executed notebooks and the tour's completed process (exit code, output)."""
    return _shared_tour(tmp_path_factory, "tour", lambda work: {"ZEUS_NB_BACKEND": "sim"})


def _fake_gpus(row: str, num_gpus: int):
    """The environment of a tour on ``num_gpus`` fake GPUs shaped like ``row``; their state file
    is ``work/fake_nvml.json`` (written by the fake itself, in a subprocess)."""

    def environment(work: Path) -> dict[str, str]:
        state = work / "fake_nvml.json"
        code = (
            "import json, sys, pynvml; "
            f"open(sys.argv[1], 'w').write(json.dumps(pynvml.row_state({row!r}, {num_gpus})))"
        )
        env = dict(os.environ, PYTHONPATH=str(FAKE_NVML))
        subprocess.run([sys.executable, "-c", code, str(state)], env=env, check=True)
        return {
            "ZEUS_NB_BACKEND": "nvml",
            "ZEUS_NB_ENERGY_READS": "auto",  # monitors judge the counter as on the real card
            "ZEUS_NB_FAKE_NVML_STATE": str(state),
            "ZEUS_NB_STATE_DIR": str(work / "zeus-nb-state"),
            "PYTHONPATH": str(FAKE_NVML),
        }

    return environment


@dataclass
class NvmlTour:
    """An executed tour on fake GPUs: its notebooks, its process, and the GPUs' final state."""

    out_dir: Path
    run: subprocess.CompletedProcess
    state_path: Path

    @property
    def state(self) -> dict:
        return json.loads(self.state_path.read_text())


@pytest.fixture(scope="session")
def nvml_tour_h100(tmp_path_factory) -> NvmlTour:
    """The smoke tour on the NVML backend over one fake H100."""
    out_dir, run = _shared_tour(tmp_path_factory, "tour-nvml-h100", _fake_gpus("h100", 1))
    return NvmlTour(out_dir, run, out_dir.parent / "fake_nvml.json")


@pytest.fixture(scope="session")
def nvml_tour_a40x4(tmp_path_factory) -> NvmlTour:
    """The smoke tour on the NVML backend over four fake A40s."""
    out_dir, run = _shared_tour(tmp_path_factory, "tour-nvml-a40x4", _fake_gpus("a40", 4))
    return NvmlTour(out_dir, run, out_dir.parent / "fake_nvml.json")
