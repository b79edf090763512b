"""Zeus's device API (get_gpus, GPUs in mW/mJ, Zeus's errors) on the simulated GPU and fake NVML."""

from __future__ import annotations

import importlib
import inspect
import json
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import zeus_nb
from zeus_nb import device
from zeus_nb.device import doctor
from zeus_nb.device.guard import restore_all, state_dir
from zeus_nb.device.recovery import restore_from_state_files
from zeus_nb.errors import InputError, UnsupportedError, ZeusNbError

REPO = Path(__file__).resolve().parents[1]
OURS = (
    "zeus.device.gpu",
    "zeus.device.soc",
    "zeus.device.common",
    "zeus.device.exception",
    "zeus.exception",
    "zeus.utils.zeusd",
    "zeus.monitor.power_streaming",
    "zeus.show_env",
)


@pytest.fixture(autouse=True)
def _restore_after():
    """Settings changed through the API come back at the end of each test, as at exit."""
    yield
    restore_all()


@pytest.fixture
def nvml(fake_nvml):
    """The fake NVML as the current backend; restored while the fake is still in place."""
    device.current("nvml")
    yield fake_nvml
    restore_all()


@pytest.fixture
def compat(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "tools"))
    import zeus_compat

    return zeus_compat


# --- errors -------------------------------------------------------------------------------------
def test_zeus_base_error_is_zeus_nb_error_and_keeps_zeus_call_shape():
    from zeus_nb.device.gpu import ZeusGPUInitError
    from zeus_nb.exception import ZeusBaseError

    assert ZeusBaseError is ZeusNbError
    with pytest.raises(ZeusBaseError):
        raise InputError("parameter x: not a number")  # zeus-nb's own errors are caught too
    e = ZeusGPUInitError(message="NVML did not start")
    assert e.message == str(e) == "NVML did not start"
    assert isinstance(e, ZeusNbError)
    again = pickle.loads(pickle.dumps(e))
    assert type(again) is ZeusGPUInitError and again.message == e.message


# --- the simulated GPU ----------------------------------------------------------------------------
def test_simulated_gpus_in_zeus_units():
    system = device.use_simulated(num_gpus=2, workload="cifar100")
    from zeus_nb.device import get_gpus
    from zeus_nb.device.gpu import GPUs

    gpus = get_gpus(ensure_homogeneous=True)
    assert isinstance(gpus, GPUs) and len(gpus) == 2 and get_gpus() is gpus
    g = system.gpu(1)
    lo, hi = g.power_limit_constraints()
    assert gpus.get_name(1) == g.name
    assert gpus.get_power_management_limit_constraints(1) == (round(lo * 1000), round(hi * 1000))
    assert gpus.get_power_management_limit(1) == round(g.get_power_limit() * 1000)
    assert gpus.supports_get_total_energy_consumption(1) is True
    zeus_nb.step(5)
    assert gpus.get_total_energy_consumption(1) == round(g.energy() * 1000)
    assert isinstance(gpus.get_instant_power_usage(1), int)
    assert gpus.get_instant_power_usage(1) == round(g.power() * 1000)
    assert gpus.get_average_power_usage(1) == round(g.read_power("device_average") * 1000)
    assert gpus.get_supported_graphics_clocks(1) == g.supported_clocks()
    assert gpus.gpus[1].device is g and gpus.gpus[1].gpu_index == 1
    assert device.use_simulated() is not system and get_gpus() is not gpus  # new system, new API


def test_simulated_gpu_says_what_it_does_not_model():
    device.use_simulated()
    from zeus_nb.device.gpu import ZeusGPUInvalidArgError, ZeusGPUNotSupportedError, get_gpus

    gpus = get_gpus()
    with pytest.raises(ZeusGPUNotSupportedError, match="does not model memory clocks"):
        gpus.get_supported_memory_clocks(0)
    with pytest.raises(ZeusGPUNotSupportedError, match="does not model memory clocks"):
        gpus.get_supported_graphics_clocks(0, 7251)
    with pytest.raises(ZeusGPUNotSupportedError, match="memory_average"):
        gpus.get_average_memory_power_usage(0)
    with pytest.raises(ZeusGPUNotSupportedError, match="temperature"):
        gpus.get_gpu_temperature(0)
    with pytest.raises(ZeusGPUInvalidArgError, match=r"outside GPU 0's range.*takes mW: 50 mW"):
        gpus.set_power_management_limit(0, 50)  # watts passed where Zeus wants mW
    assert gpus.get_persistence_mode(0) is False
    gpus.set_persistence_mode(0, True)
    assert gpus.get_persistence_mode(0) is True


def test_growable_simulated_system_adds_the_gpu_a_call_names():
    device.use_simulated()  # num_gpus=None: grows on demand, as for ZeusMonitor
    from zeus_nb.device.gpu import get_gpus

    gpus = get_gpus()
    assert len(gpus) == 1
    assert gpus.get_name(3) == device.current().gpu(3).name
    assert len(gpus) == 4


def test_unknown_index_is_zeus_invalid_argument():
    device.use_simulated(num_gpus=1)
    from zeus_nb.device.gpu import ZeusGPUInvalidArgError, get_gpus

    with pytest.raises(ZeusGPUInvalidArgError, match=r"no GPU with index 2 .*have: 0"):
        get_gpus().get_power_management_limit(2)


def test_deprecated_camel_case_names_warn_and_call_the_new_ones():
    device.use_simulated()
    from zeus_nb.device.gpu import get_gpus

    gpus = get_gpus()
    with pytest.warns(DeprecationWarning, match="get_power_management_limit_constraints"):
        assert gpus.getPowerManagementLimitConstraints(0) == (
            gpus.get_power_management_limit_constraints(0)
        )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gpus.getPowerManagementLimitConstraints(0)  # warned once already
    with pytest.warns(DeprecationWarning):
        assert gpus.gpus[0].getName() == gpus.get_name(0)  # the GPU's alias reaches the override


def test_power_limit_and_clocks_set_through_the_api_are_restored_on_sim():
    system = device.use_simulated(num_gpus=2)
    from zeus_nb.device.gpu import get_gpus

    gpus = get_gpus()
    lo, hi = gpus.get_power_management_limit_constraints(1)
    target = (lo + hi) // 2
    gpus.set_power_management_limit(1, target)
    clock = gpus.get_supported_graphics_clocks(0)[3]
    gpus.set_gpu_locked_clocks(0, clock, clock)
    assert system.gpu(1).get_power_limit() * 1000 == target
    assert system.gpu(0).locked_clocks() == (clock, clock)
    saved = [json.loads(p.read_text()) for p in state_dir().glob("*.json")]
    originals = {(e["gpu"], e["kind"]): e["original"] for s in saved for e in s["settings"]}
    assert originals == {(1, "power_limit"): hi / 1000, (0, "locked_clocks"): None}
    restore_all()  # what atexit and SIGTERM do
    assert system.gpu(1).get_power_limit() * 1000 == hi
    assert system.gpu(0).locked_clocks() is None
    assert not list(state_dir().glob("*.json"))
    gpus.set_power_management_limit(0, lo)
    gpus.reset_power_management_limit(0)
    assert gpus.get_power_management_limit(0) == round(system.gpu(0).default_power_limit() * 1000)


def test_replayed_log_through_zeus_api_needs_no_state_file():
    log = REPO / "zeus_nb" / "resources" / "zeus_profiles" / "A40+resnet18+gpu0.csv"
    system = device.use_replay(log, steps_per_window=4)
    from zeus_nb.device.gpu import ZeusGPUInvalidArgError, get_gpus

    gpus = get_gpus()
    limits = system.log.power_limits
    assert gpus.get_power_management_limit_constraints(0) == (
        round(min(limits) * 1000),
        round(max(limits) * 1000),
    )
    gpus.set_power_management_limit(0, round(limits[1] * 1000))
    e0 = gpus.get_total_energy_consumption(0)
    zeus_nb.step(4)  # one logged window at that limit
    logged = system.log.energy[limits[1]][0]
    assert gpus.get_total_energy_consumption(0) - e0 == pytest.approx(logged * 1000, abs=1)
    with pytest.raises(ZeusGPUInvalidArgError, match="no measurement at"):
        gpus.set_power_management_limit(0, round(limits[1] * 1000) - 1)
    assert not list(state_dir().glob("*.json"))  # a replay's settings die with the process
    restore_all()
    assert gpus.get_power_management_limit(0) == round(max(limits) * 1000)


# --- fake NVML ----------------------------------------------------------------------------------
def test_nvml_gpus_in_milliwatts(nvml):
    from zeus_nb.device import get_gpus
    from zeus_nb.device.gpu import NVIDIAGPUs

    dev = nvml.state["devices"][0]
    gpus = get_gpus()
    assert isinstance(gpus, NVIDIAGPUs) and len(gpus) == 2
    assert gpus.get_name(0) == dev["name"]
    assert gpus.get_power_management_limit_constraints(0) == (dev["min_mw"], dev["max_mw"])
    gpus.set_power_management_limit(0, dev["max_mw"])  # already there: no NVML call
    assert nvml.state["set_calls"] == []
    gpus.set_power_management_limit(1, dev["min_mw"])
    assert nvml.state["set_calls"] == [[1, dev["min_mw"]]]
    e0 = gpus.get_total_energy_consumption(0)
    step_mj = dev["power_mw"] * dev["read_interval_s"]  # what the fake adds per read
    assert gpus.get_total_energy_consumption(0) - e0 == step_mj
    assert gpus.get_instant_power_usage(0) == dev["power_mw"]
    assert gpus.get_gpu_temperature(0) == dev["temperature_c"]
    mem = max(gpus.get_supported_memory_clocks(0))
    assert mem == max(dev["memory_clocks_mhz"])
    assert gpus.get_supported_graphics_clocks(0, mem) == sorted(
        dev["graphics_clocks_mhz"], reverse=True
    )
    gpus.set_memory_locked_clocks(0, mem, mem)
    assert nvml.state["devices"][0]["memory_locked_clocks"] == [mem, mem]
    gpus.reset_memory_locked_clocks(0)
    gpus.set_persistence_mode(0, enabled=True)
    assert gpus.get_persistence_mode(0) is True


def test_nvml_limit_comes_back_at_exit_and_after_a_crash(nvml):
    code = (
        "import os, sys\nfrom zeus_nb.device import get_gpus\n"
        "get_gpus().set_power_management_limit(0, 150000)\n"
        "if sys.argv[1] == 'crash':\n    os._exit(0)\n"
    )
    for how in ("exit", "crash"):
        done = subprocess.run(
            [sys.executable, "-c", code, how],
            env=nvml.env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
    calls = nvml.state["set_calls"]
    assert calls == [[0, 150000], [0, 300000], [0, 150000]]  # the crashed run restored nothing
    assert nvml.limits_w()[0] == 150.0
    results = restore_from_state_files()
    assert [r.action for r in results] == ["restored"], results
    assert nvml.limits_w()[0] == 300.0


def test_nvml_errors_become_zeus_classes_with_our_messages(nvml, monkeypatch):
    from zeus_nb.device.gpu import (
        ZeusGPULostError,
        ZeusGPUNoPermissionError,
        ZeusGPUNotSupportedError,
        ZeusGPUTimeoutError,
        get_gpus,
    )

    nvml.set_device(0, set_error="NoPermission", energy_error="NotSupported", architecture=4)
    nvml.set_device(1, power_error="Timeout", clock_error="GpuIsLost")
    monkeypatch.setattr("zeus_nb.device.gpu.nvidia.has_sys_admin", lambda: False)
    gpus = get_gpus()
    with pytest.warns(UserWarning), pytest.raises(ZeusGPUNoPermissionError, match="SYS_ADMIN"):
        gpus.set_power_management_limit(0, 200000)
    assert nvml.limits_w()[0] == 300.0
    with pytest.raises(ZeusGPUNoPermissionError, match="persistence mode needs root"):
        gpus.set_persistence_mode(0, True)
    assert gpus.supports_get_total_energy_consumption(0) is False
    with pytest.raises(ZeusGPUNotSupportedError, match="no energy counter"):
        gpus.get_total_energy_consumption(0)
    with pytest.raises(ZeusGPUTimeoutError, match="GPU 1: reading power: NVML error"):
        gpus.get_instant_power_usage(1)
    with pytest.warns(UserWarning), pytest.raises(ZeusGPULostError, match="GPU 1: locking SM"):
        gpus.set_gpu_locked_clocks(1, 1740, 1740)


@pytest.mark.parametrize("error", ["LibraryNotFound", "DriverNotLoaded"])
def test_missing_driver(fake_nvml, monkeypatch, error):
    from zeus_nb.device.gpu import (
        NVIDIAGPUs,
        ZeusGPUDriverNotLoadedError,
        ZeusGPUInitError,
        ZeusGPULibraryNotFoundError,
        get_gpus,
        nvml_is_available,
    )

    fake_nvml.update(init_error=error)
    assert nvml_is_available() is False
    expected = {
        "LibraryNotFound": ZeusGPULibraryNotFoundError,
        "DriverNotLoaded": ZeusGPUDriverNotLoadedError,
    }[error]
    with pytest.raises(expected, match="ZEUS_NB_BACKEND=sim"):
        NVIDIAGPUs()
    monkeypatch.setenv("ZEUS_NB_BACKEND", "nvml")
    with pytest.raises(ZeusGPUInitError, match="ZEUS_NB_BACKEND=sim"):  # Zeus code falls back
        get_gpus()


def test_mixed_models_fail_ensure_homogeneous(nvml):
    from zeus_nb.device.gpu import ZeusGPUHeterogeneousError, get_gpus, nvml_is_available
    from zeus_nb.device.gpu.nvidia import NVIDIAGPU

    nvml.set_device(1, name="NVIDIA V100")
    assert nvml_is_available() is True
    with pytest.raises(ZeusGPUHeterogeneousError, match="A40, NVIDIA V100"):
        get_gpus(ensure_homogeneous=True)
    assert NVIDIAGPU(1).get_name() == "NVIDIA V100"


# --- CPUs, SoC, placeholders ----------------------------------------------------------------------
def test_get_cpus_reads_the_current_systems_cpus_in_millijoules():
    system = device.use_simulated()
    from zeus_nb.device import get_cpus

    cpus = get_cpus()
    cpu = system.cpus()[0]
    zeus_nb.step(20)
    m = cpus.get_total_energy_consumption(0)
    assert (m.cpu_mj, m.dram_mj) == (cpu.energy() * 1000, cpu.dram_energy() * 1000)
    assert cpus.supports_get_dram_energy_consumption(0) is cpu.supports_dram()
    assert len(cpus) == 1 and get_cpus() is cpus
    diff = m - cpus.get_total_energy_consumption(0)
    assert diff.cpu_mj == 0 and diff.dram_mj == 0


def test_get_soc_finds_none_as_zeus_does_on_a_machine_without_one():
    from zeus_nb.device import get_soc
    from zeus_nb.device.soc import EmptySoC, ZeusSoCInitError

    with pytest.raises(ZeusSoCInitError, match="no SoC energy counters"):
        get_soc()
    assert EmptySoC().get_available_metrics() == set()


def _placeholders(compat) -> list[str]:
    from zeus_compat_table import PLACEHOLDERS

    return sorted(k for k in PLACEHOLDERS if k.startswith(OURS))


def test_every_placeholder_raises_our_error_saying_why(compat):
    names = _placeholders(compat)
    assert len(names) >= 5
    for full in names:
        module, name = full.rsplit(".", 1)
        obj = getattr(importlib.import_module(compat.ours(module)), name)
        required = [
            p
            for p in inspect.signature(obj).parameters.values()
            if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        with pytest.raises(UnsupportedError, match="zeus-nb") as info:
            obj(*[None] * len(required))
        assert "\n" not in str(info.value), full


def test_missing_vendor_libraries_raise_the_errors_zeus_code_catches(monkeypatch, tmp_path):
    from zeus_nb.device.gpu import ZeusGPUInitError
    from zeus_nb.device.gpu.amd import AMDGPUs
    from zeus_nb.device.soc import AppleSilicon, Jetson, ZeusSoCInitError
    from zeus_nb.utils.zeusd import ZeusdClient, ZeusdConfig, ZeusdConnectionError

    monkeypatch.setitem(sys.modules, "amdsmi", None)  # not installed
    monkeypatch.setitem(sys.modules, "zeus_apple_silicon", None)
    for make, zeus_cls in (
        (AMDGPUs, ZeusGPUInitError),
        (AppleSilicon, ZeusSoCInitError),
        (Jetson, ZeusSoCInitError),
    ):
        with pytest.raises(zeus_cls, match="zeus-nb") as info:
            make()
        assert isinstance(info.value, UnsupportedError) and "\n" not in str(info.value)
    nowhere = ZeusdConfig.uds(str(tmp_path / "no-zeusd.sock"))
    with pytest.raises(ZeusdConnectionError, match="Cannot reach Zeusd at .*no-zeusd.sock"):
        ZeusdClient(nowhere)
    assert ZeusdConfig.from_env() is None
    assert ZeusdConfig.uds("/run/zeusd.sock").url("/discover") == "http://localhost/discover"


def test_no_missing_row_for_these_modules(compat, tmp_path):
    record = json.loads(compat.RECORD.read_text())
    record["modules"] = {m: v for m, v in record["modules"].items() if m.startswith(OURS)}
    path = tmp_path / "record.json"
    path.write_text(json.dumps(record))
    rows = compat.check(path)
    assert {r.zeus.rsplit(".", 1)[0].startswith(OURS) for r in rows} == {True}
    assert {p for p in OURS if any(r.zeus.startswith(p) for r in rows)} == set(OURS)
    assert [f"{r.zeus}: {r.detail}" for r in rows if r.status == "missing"] == []


# --- show_env -----------------------------------------------------------------------------------
def test_show_env_prints_doctors_device_facts(capsys):
    from zeus_nb.show_env import SECTION_SEPARATOR, show_env

    system = device.use_simulated(num_gpus=2)
    show_env()
    out = capsys.readouterr().out
    for title in ("Package availability", "Device availability", "CPU availability", "SoC"):
        assert f"## {title}" in out
    assert out.count(SECTION_SEPARATOR) == 6
    for line in doctor.gpu_report(system).lines + doctor.cpu_report(system).lines:
        assert f"  {line}" in out
    assert f"zeus-nb: {zeus_nb.__version__}" in out and "No SoC available." in out


def test_python_m_show_env_lists_the_fake_nvml_gpus(fake_nvml):
    done = subprocess.run(
        [sys.executable, "-m", "zeus_nb.show_env"],
        env=fake_nvml.env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "backend: NVML (real GPUs)" in done.stdout
    assert done.stdout.count("GPU 0: NVIDIA A40") == 1 and "GPU 1: NVIDIA A40" in done.stdout
