"""Zeus-style example scripts run with only their imports changed (tests/zeus_scripts/).

Each script is written in the shape of Zeus's published examples from Zeus's documented API and
calls nothing zeus-nb-specific; the environment chooses the simulated GPU on the wall clock, as
docs/zeus_compat.md tells Zeus users to do. (The batch-size client, Prometheus, NSDI '23
simulator and Perseus planner examples live beside their features' tests.)
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).parent / "zeus_scripts"


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "ZEUS_NB_BACKEND": "sim", "ZEUS_NB_SIM_CLOCK": "wall", **extra}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parents[1]), env.get("PYTHONPATH", "")])
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def test_carbon_example_runs_offline_and_explains_a_failed_online_lookup_in_one_line():
    out = subprocess.run(
        [sys.executable, str(SCRIPTS / "carbon_monitor.py"), "--offline"],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    grams = float(out.stdout.split()[-2])
    assert grams > 0
    with socket.socket() as s:  # a proxy that refuses: the lookup fails without leaving
        s.bind(("127.0.0.1", 0))  # this machine
        proxy = f"http://127.0.0.1:{s.getsockname()[1]}"
    online = subprocess.run(
        [sys.executable, str(SCRIPTS / "carbon_monitor.py")],
        env=_env(HTTP_PROXY=proxy, http_proxy=proxy, NO_PROXY="", no_proxy=""),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert online.returncode != 0
    last = online.stderr.strip().splitlines()[-1]
    assert "LocationLookupError" in last and "latitude, longitude" in last


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["ddp", "fsdp"])
def test_data_parallel_power_limit_example_under_torchrun(mode, tmp_path):
    args = [str(SCRIPTS / "plo_distributed.py")] + (["--fsdp"] if mode == "fsdp" else [])
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "2",
            *args,
        ],
        env=_env(ZEUS_MAX_SLOWDOWN="1.5", ZEUS_NB_STATE_DIR=str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    # Both ranks write to one pipe, so their lines may interleave: read the pairs, not lines.
    choices = dict(re.findall(r"rank (\d+) chose (\d+) W", out.stdout))
    assert sorted(choices) == ["0", "1"], out.stdout
    assert len(set(choices.values())) == 1, choices  # the ranks' measurements are combined
