"""Zeus's power-limit profile JSON read by ``profile_path`` and written back in zeus-nb's format."""

from __future__ import annotations

import json

import pytest

from zeus_nb import device
from zeus_nb.monitor import ZeusMonitor
from zeus_nb.optimizer import GlobalPowerLimitOptimizer
from zeus_nb.optimizer.power_limit import Energy, MaxSlowdownConstraint, ProfileError
from zeus_nb.optimizer.power_limit.profile_file import PROFILE_FORMAT


def _zeus_file(path, rows):
    path.write_text(json.dumps({"measurements": rows}))
    return path


ROWS = [  # W, J, s as Zeus's optimizer writes them
    {"power_limit": 300, "energy": 3000.0, "time": 10.0},
    {"power_limit": 250, "energy": 2600.0, "time": 10.5},
    {"power_limit": 200, "energy": 2500.0, "time": 12.5},
]


def test_zeus_profile_is_read_and_written_back(tmp_path):
    device.use_simulated(gpu="a40")  # limits 100..300 W
    path = _zeus_file(tmp_path / "profile.json", ROWS)
    original = path.read_text()
    plo = GlobalPowerLimitOptimizer(
        ZeusMonitor(), MaxSlowdownConstraint(1.1), profile_path=path, verbose=False
    )
    # slowdown 1.1 allows 11 s: 250 W (10.5 s) is the lowest limit that qualifies
    assert plo.optimal_power_limit == 250.0
    assert [(m.power_limit, m.energy, m.time) for m in plo.measurements] == [
        (r["power_limit"], r["energy"], r["time"]) for r in ROWS
    ]
    ours = json.loads(path.read_text())
    assert ours["format"] == PROFILE_FORMAT
    assert ours["gpu_model"] == device.current().gpu(0).name
    assert ours["power_limit_constraints"] == [100.0, 300.0]
    assert (tmp_path / "profile.zeus.json").read_text() == original
    again = GlobalPowerLimitOptimizer(ZeusMonitor(), Energy(), profile_path=path, verbose=False)
    assert again.optimal_power_limit == 200.0  # the rewritten file loads as ours


def test_milliwatt_limits_are_scaled(tmp_path):
    device.use_simulated(gpu="a40")
    rows = [dict(r, power_limit=r["power_limit"] * 1000) for r in ROWS]
    path = _zeus_file(tmp_path / "mw.json", rows)
    plo = GlobalPowerLimitOptimizer(ZeusMonitor(), Energy(), profile_path=path, verbose=False)
    assert plo.optimal_power_limit == 200.0


@pytest.mark.parametrize(
    "rows, match",
    [
        ([{"power_limit": 350, "energy": 1.0, "time": 1.0}], "350 W, outside"),
        ([], "no measurements"),
        ([{"power_limit": 300}], "unreadable"),
        ([{"power_limit": 200, "energy": float("nan"), "time": 1.0}], r"measurements\[0\]\.energy"),
        ([{"power_limit": 200, "energy": 1.0, "time": -1.0}], r"measurements\[0\]\.time"),
    ],
)
def test_bad_zeus_profiles_are_refused(tmp_path, rows, match):
    device.use_simulated(gpu="a40")
    path = _zeus_file(tmp_path / "bad.json", rows)
    with pytest.raises(ProfileError, match=match):
        GlobalPowerLimitOptimizer(ZeusMonitor(), profile_path=path, verbose=False)
