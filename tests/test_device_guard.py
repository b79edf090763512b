"""The settings guard restores each kind of setting through its own kind, live and after a crash."""

import json
import os
import socket

import pytest

from zeus_nb import device
from zeus_nb.device import guard as guard_mod
from zeus_nb.device.guard import (
    SETTING_KINDS,
    SettingKind,
    SettingsGuard,
    power_limits_restored,
    register_setting_kind,
    settings_restored,
    state_dir,
)
from zeus_nb.device.recovery import restore_from_state_files
from zeus_nb.errors import ZeusNbError

# A second setting kind standing in for, e.g., locked SM clocks: its values live in this dict,
# keyed by GPU index, so the test reads them without going through the guard.
CLOCKS: dict[int, object] = {}


@pytest.fixture
def clock_kind():
    CLOCKS.clear()
    kind = SettingKind(
        "test_clock",
        read=lambda g: CLOCKS.get(g.index),
        write=lambda g, v: CLOCKS.__setitem__(g.index, v),
        unit="MHz",
    )
    register_setting_kind(kind)
    yield kind
    SETTING_KINDS.pop("test_clock", None)


def test_each_kind_comes_back_and_the_state_file_lists_gpu_kind_original(clock_kind):
    system = device.use_simulated(num_gpus=2)
    lo, hi = system.gpus[0].power_limit_constraints()
    system.gpus[1].set_power_limit(lo + 50)
    CLOCKS.update({0: None, 1: [900, 1400]})  # unlocked / locked to a range
    with settings_restored(system.gpus, ["power_limit", "test_clock"], backend="sim") as g:
        for gpu in system.gpus:
            gpu.set_power_limit(lo)
            CLOCKS[gpu.index] = [1200, 1200]
        saved = json.loads(g.path.read_text())
    entries = {(e["gpu"], e["kind"]): e["original"] for e in saved["settings"]}
    assert entries == {
        (0, "power_limit"): hi,
        (1, "power_limit"): lo + 50,
        (0, "test_clock"): None,
        (1, "test_clock"): [900, 1400],
    }
    assert [gpu.get_power_limit() for gpu in system.gpus] == [hi, lo + 50]
    assert CLOCKS == {0: None, 1: [900, 1400]}
    assert not list(state_dir().glob("*.json"))


def test_a_rerun_guard_keeps_the_first_original():
    """A re-run notebook cell records the value from before the first guard, not its own change."""
    gpu = device.use_simulated().gpus[0]
    lo, hi = gpu.power_limit_constraints()
    first = SettingsGuard([gpu], backend="sim", persist=False)
    first.record()
    gpu.set_power_limit(lo)
    second = SettingsGuard([gpu], backend="sim", persist=False)
    second.record()
    assert second.originals == {(0, "power_limit"): hi}
    second.restore()
    first.restore()
    assert gpu.get_power_limit() == hi


def test_failed_restore_keeps_the_state_file_and_logs(clock_kind, caplog):
    def refuse(gpu, value):
        raise PermissionError("no permission")

    register_setting_kind(SettingKind("test_clock", lambda g: CLOCKS.get(g.index), refuse))
    gpu = device.use_simulated().gpus[0]
    g = SettingsGuard([gpu], ["power_limit", "test_clock"], backend="sim")
    g.record()
    gpu.set_power_limit(gpu.power_limit_constraints()[0])
    CLOCKS[0] = 1000
    with caplog.at_level("WARNING", logger="zeus_nb.device.guard"):
        g.restore()
    assert gpu.get_power_limit() == gpu.default_power_limit()  # the other kind still restored
    assert "GPU 0 test_clock: no permission" in caplog.text
    assert g.path is not None and g.path.exists()  # left for `zeus-nb restore`


def _write_state(folder, settings, pid):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "dead.json"
    state = {
        "format": guard_mod.FORMAT,
        "host": socket.gethostname(),
        "pid": pid,
        "backend": "sim",
        "cuda_visible_devices": None,
        "settings": settings,
    }
    path.write_text(json.dumps(state))
    return path


def test_restore_from_state_files_dispatches_per_kind(clock_kind, tmp_path, monkeypatch):
    monkeypatch.setenv("ZEUS_NB_SIM_GPUS", "2")
    mine = device.use_simulated(gpu="v100")
    settings = [
        {"gpu": 1, "kind": "power_limit", "original": 200.0},
        {"gpu": 0, "kind": "test_clock", "original": [1100, 1100]},
    ]
    path = _write_state(tmp_path, settings, pid=os.getpid())  # this pid: never "still running"
    (result,) = restore_from_state_files(tmp_path)
    assert result.action == "restored", result.detail
    assert "GPU 1 power_limit -> 200 W" in result.detail
    assert CLOCKS == {0: [1100, 1100]}
    assert not path.exists()
    assert device.current() is mine  # the process's own GPU system was left alone

    path = _write_state(tmp_path, [{"gpu": 0, "kind": "sm_magic", "original": 1}], os.getpid())
    (result,) = restore_from_state_files(tmp_path)
    assert result.action == "failed" and "unknown GPU setting kind 'sm_magic'" in result.detail
    assert path.exists()


def test_unknown_kind_is_refused_when_guarding():
    with pytest.raises(ZeusNbError, match="unknown GPU setting kind 'nope'"):
        SettingsGuard(device.use_simulated().gpus, ["nope"])


def test_gpus_that_do_not_outlive_the_process_get_no_state_file(tmp_path):
    from importlib import resources

    log = resources.files("zeus_nb") / "resources/zeus_profiles/A40+resnet50+gpu0.csv"
    replayed = device.use_replay(log).gpus
    with power_limits_restored(replayed, backend="replay") as g:
        replayed[0].set_power_limit(200)
    assert g.path is None and not state_dir().exists()
    assert replayed[0].get_power_limit() == 300
    simulated = device.use_simulated().gpus
    with power_limits_restored(simulated, backend="sim") as g:
        assert g.path is not None and g.path.exists()  # the default for GPUs that persist


def test_restore_numbers_gpus_as_the_crashed_process_saw_them(fake_nvml, tmp_path):
    """CUDA index 0 under CUDA_VISIBLE_DEVICES=1 is NVML GPU 1; this process's env is untouched."""
    folder = tmp_path / "states"
    state = _write_state(folder, [{"gpu": 0, "kind": "power_limit", "original": 150.0}], 0)
    data = json.loads(state.read_text())
    data.update(backend="nvml", cuda_visible_devices="1", pid=os.getpid())
    state.write_text(json.dumps(data))
    (result,) = restore_from_state_files(folder)
    assert result.action == "restored", result.detail
    assert fake_nvml.limits_w() == [300.0, 150.0]
    assert "CUDA_VISIBLE_DEVICES" not in os.environ
