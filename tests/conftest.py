"""Shared fixtures: a fresh simulated GPU per test, and the fake NVML."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

from zeus_nb import device

FAKE_NVML_DIR = Path(__file__).parent / "fake_nvml"
REPO = Path(__file__).resolve().parents[1]

# The executed tour, one per session for every test that judges it; the longest files first.
pytest_plugins = ("tour_fixture", "slow_first")

# Property tests draw the same examples on every run by default, so CI is never red by chance;
# ZEUS_NB_HYPOTHESIS=explore draws fresh random examples on each run to hunt for new bugs.
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("explore", max_examples=1000, print_blob=True)
settings.load_profile(os.environ.get("ZEUS_NB_HYPOTHESIS", "ci"))


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
        state = self.state
        state.update(changes)
        self.path.write_text(json.dumps(state))

    def set_device(self, index: int, **changes) -> None:
        state = self.state
        state["devices"][index].update(changes)
        self.path.write_text(json.dumps(state))

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
        return env


@pytest.fixture
def fake_nvml(tmp_path, monkeypatch) -> FakeNvml:
    """Two fake A40s (100-300 W) behind ``import pynvml``; the NVML backend becomes current."""
    monkeypatch.syspath_prepend(str(FAKE_NVML_DIR))
    monkeypatch.delitem(sys.modules, "pynvml", raising=False)
    import pynvml

    assert Path(pynvml.__file__).parent == FAKE_NVML_DIR
    path = tmp_path / "fake_nvml.json"
    monkeypatch.setenv("ZEUS_NB_FAKE_NVML_STATE", str(path))
    path.write_text(json.dumps(pynvml.default_state()))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    yield FakeNvml(path, pynvml)
    sys.modules.pop("pynvml", None)
