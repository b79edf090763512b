"""Shared fixtures: a fresh simulated GPU per test, and the fake NVML."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

# Before anything loads OpenMP (torch reads this once, at import): the suite runs three workers
# on two cores, and an OpenMP thread that has finished its share spins for the others, so a
# parallel region beside busy processes burns a core while it waits for a thread another
# process has descheduled. benchmarks/bench_omp_wait.py (docs/tradeoff.md's live sweep, the same
# thread count and so the same records either way): beside two busy processes passive waits took
# 0.36x the CPU and 0.43x the time; idle, 1.20x the time. Every process the tests start inherits
# it; a value the caller set stands.
if not os.environ.get("OMP_WAIT_POLICY", "").strip():
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"

# Compiled bytecode kept, also where PYTHONDONTWRITEBYTECODE is set (container images set it;
# these machines do): without it every pytest-xdist worker rewrites and compiles every test module
# again (13.7 s of CPU a worker's collection here, 7.3 s with the bytecode kept), and so does
# every kernel, rank and command a test starts for the zeus-nb modules it imports. Python writes it
# to the git-ignored __pycache__ folders beside the sources, as it does wherever that variable is
# unset (a cache prefix instead would compile all of torch again into it: Python then ignores the
# bytecode pip installed). Every process the tests start inherits it. docs/development.md.
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
    sys.dont_write_bytecode = False

import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402
from processes import descendants

import zeus_nb.device.gpu.nvidia  # noqa: F401 - binds the real pynvml before a test fakes it
from zeus_nb import device
from zeus_nb.runner import kernels
from zeus_nb.train import launcher

FAKE_NVML_DIR = Path(__file__).parent / "fake_nvml"
REPO = Path(__file__).resolve().parents[1]

# The executed tour, one per session for every test that judges it; the longest files first.
pytest_plugins = ("tour_fixture", "slow_first")

# Property tests draw the same examples on every run by default, so CI is never red by chance;
# ZEUS_NB_HYPOTHESIS=explore draws fresh random examples on each run to hunt for new bugs.
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("explore", max_examples=1000, print_blob=True)
settings.load_profile(os.environ.get("ZEUS_NB_HYPOTHESIS", "ci"))


def pytest_configure(config):
    """Ctrl-C as a terminal has it, in this process and every child it starts.

    A shell starts a background job (``pytest ... &``, ``nohup``) with SIGINT ignored, and a
    child inherits that: the tests that press Ctrl-C on a sweep, a training script or this
    process itself would then wait for an interrupt that never comes. A handled signal is reset
    to its default in a child, so Python there raises KeyboardInterrupt again.
    """
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        with contextlib.suppress(ValueError):  # not the main thread: nothing to change
            signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True, scope="session")
def _no_process_left_behind():
    """The session fails if a test left a child process running (a server, a kernel, a
    worker): each test must stop what it starts. The leftovers are named, then killed. The
    forkrun launcher kept for this process's training jobs, and the kernel zygotes, end with
    the process: here."""
    before = set(descendants(os.getpid()))
    yield
    launcher.close_kept()
    kernels.close()
    deadline = time.monotonic() + 15  # let processes that were just told to stop finish
    while True:
        left = {p: c for p, c in descendants(os.getpid()).items() if p not in before}
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    assert not left, "tests left processes running: " + "; ".join(
        f"{p}: {c[:120]}" for p, c in left.items()
    )


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory):
    """Computed-value caches go to this test session's folder, never the user's ~/.cache.

    Set in ``os.environ`` so notebook kernels and torchrun ranks started by tests share it.
    """
    old = os.environ.get("ZEUS_NB_CACHE_DIR")
    os.environ["ZEUS_NB_CACHE_DIR"] = str(tmp_path_factory.mktemp("computed-cache"))
    yield
    if old is None:
        os.environ.pop("ZEUS_NB_CACHE_DIR", None)
    else:
        os.environ["ZEUS_NB_CACHE_DIR"] = old


@pytest.fixture(autouse=True)
def _fresh_device(monkeypatch, tmp_path):
    """Every test starts with no current GPU system and no backend from the environment.

    Power-limit state files go to the test's own folder, never the user's cache.
    """
    for var in (
        "ZEUS_NB_BACKEND",
        "ZEUS_NB_SIM_GPU",
        "ZEUS_NB_SIM_WORKLOAD",
        "ZEUS_NB_SIM_GPUS",
        "ZEUS_NB_SIM_CLOCK",
        "ZEUS_NB_SIM_RANK_SPREAD",
        "ZEUS_NB_SIM_STRAGGLER",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("ZEUS_NB_STATE_DIR", str(tmp_path / "zeus-nb-state"))
    device.reset()
    yield
    device.reset()


class FakeNvml:
    """Controls the fake ``pynvml`` of ``tests/fake_nvml`` through its JSON state file."""

    def __init__(self, path: Path, module):
        self.path = path
        self.module = module

    @property
    def state(self) -> dict:
        return json.loads(self.path.read_text())

    def update(self, **changes) -> None:
        self.module.update_state(**changes)

    def set_device(self, index: int, **changes) -> None:
        """Change a device; on a GPU-shaped one, a change of power (``limit_mw``, ``load``,
        ``power_mw``) first banks the energy drawn so far, as a real card's counter keeps it."""
        self.module.update_device(index, **changes)

    def limits_w(self) -> list[float]:
        return [d["limit_mw"] / 1000 for d in self.state["devices"]]

    def env(self) -> dict[str, str]:
        """Environment for subprocesses that should see the same fake GPUs."""
        import os

        env = dict(os.environ)
        env["ZEUS_NB_FAKE_NVML_STATE"] = str(self.path)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(FAKE_NVML_DIR), str(REPO), env.get("PYTHONPATH", "")]
        )
        env["ZEUS_NB_BACKEND"] = "nvml"
        env["ZEUS_NB_ENERGY_READS"] = "sync"  # its reads stand for instant ones
        return env


def _install_fake_nvml(tmp_path, monkeypatch, make_state, energy_reads: str) -> FakeNvml:
    """The fake ``pynvml`` first on the path, its state file written by ``make_state(module)``,
    monitors reading energy counters as ``energy_reads`` says (``ZEUS_NB_ENERGY_READS``)."""
    monkeypatch.syspath_prepend(str(FAKE_NVML_DIR))
    for name in ("pynvml", "nvml_rows"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    import pynvml

    assert Path(pynvml.__file__).parent == FAKE_NVML_DIR
    # zeus-nb's NVML calls go through its list of NVML names (device/gpu/nvml.py), which forwards
    # each to the pynvml it imported: the fake, from here on (a name not listed fails the test)
    monkeypatch.setattr("zeus_nb.device.gpu.nvml._nvml", pynvml)
    monkeypatch.setenv("ZEUS_NB_ENERGY_READS", energy_reads)
    path = tmp_path / "fake_nvml.json"
    monkeypatch.setenv("ZEUS_NB_FAKE_NVML_STATE", str(path))
    path.write_text(json.dumps(make_state(pynvml)))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return FakeNvml(path, pynvml)


@pytest.fixture
def fake_nvml(tmp_path, monkeypatch) -> FakeNvml:
    """Two smooth fake A40s (100-300 W) behind ``import pynvml``.

    Smooth: each counter read adds ``power x read_interval_s`` and no read costs time, so the
    unit tests of the NVML backend (its calls, errors, restores) get exact energies without
    sleeping. Tests of timing or of what a real counter does use :func:`nvml_gpus`.
    """
    # Its reads stand for instant ones: a JSON round trip slowed by a busy machine must not send
    # monitors to the background counter reader (tests of that mode ask for it).
    yield _install_fake_nvml(tmp_path, monkeypatch, lambda m: m.default_state(), "sync")
    sys.modules.pop("pynvml", None)


@pytest.fixture
def nvml_gpus(tmp_path, monkeypatch):
    """``nvml_gpus("h100", 1)``: fake GPUs shaped like a measured row (``tests/fake_nvml/
    nvml_rows.py``): the counter moves every 100 ms with wall time and reads cost what they cost
    on the hardware, so monitors choose how to read them as they would on that GPU."""

    def make(row: str = "h100", num_gpus: int = 1) -> FakeNvml:
        state = lambda m: m.row_state(row, num_gpus)  # noqa: E731
        return _install_fake_nvml(tmp_path, monkeypatch, state, "auto")

    yield make
    sys.modules.pop("pynvml", None)
    sys.modules.pop("nvml_rows", None)


@pytest.fixture
def spawn():
    """``spawn(args, **popen_kwargs)``: a text-mode :class:`subprocess.Popen` with piped
    stdin/stdout/stderr that is killed when the test ends, so a test that fails while its child
    trains on leaves nothing running (and the session's leftover check names only real leaks)."""
    started: list[subprocess.Popen] = []

    def start(args, **kwargs) -> subprocess.Popen:
        pipes = dict(stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        proc = subprocess.Popen(args, text=True, **(pipes | kwargs))
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
