"""The NVML backend against the fake pynvml, errors included."""

import re
import types
from pathlib import Path
from unittest import mock

import pytest

from zeus_nb import device
from zeus_nb.device.gpu import nvidia as nvml_backend
from zeus_nb.errors import DeviceError, NoGPUError, PowerLimitPermissionError, UnsupportedError
from zeus_nb.monitor import ZeusMonitor


def test_reads_gpus_in_watts_and_joules(fake_nvml):
    system = device.current("nvml")
    assert system.backend == "nvml" and [g.index for g in system.gpus] == [0, 1]
    g = system.gpu(0)
    assert g.name == "NVIDIA A40"
    assert g.power_limit_constraints() == (100.0, 300.0)
    assert g.default_power_limit() == 300.0 == g.get_power_limit()
    assert g.power() == 200.0
    assert g.supports_energy_counter()
    e0 = g.energy()
    assert g.energy() - e0 == pytest.approx(200.0)  # the fake advances 200 W x 1 s per read
    assert system.info()["driver"] == "550.54.15"


def test_set_power_limit_converts_to_milliwatts(fake_nvml):
    g = device.current("nvml").gpu(1)
    g.set_power_limit(212.5)
    assert fake_nvml.state["set_calls"] == [[1, 212500]]
    assert g.get_power_limit() == 212.5
    with pytest.raises(ValueError, match=r"outside GPU 1's range"):
        g.set_power_limit(50)
    assert len(fake_nvml.state["set_calls"]) == 1


@pytest.mark.parametrize("error", ["LibraryNotFound", "DriverNotLoaded"])
def test_missing_driver_says_to_use_the_simulated_backend(fake_nvml, error):
    fake_nvml.update(init_error=error)
    with pytest.raises(NoGPUError, match="ZEUS_NB_BACKEND=sim"):
        device.current("nvml")


def test_auto_falls_back_to_simulated_with_a_notice(fake_nvml):
    """One warning line on stderr, also with no logging configured (Python's last resort)."""
    import subprocess
    import sys

    fake_nvml.update(init_error="LibraryNotFound")
    env = fake_nvml.env()
    env.pop("ZEUS_NB_BACKEND")
    code = "from zeus_nb import device; print(device.current().backend)"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.stdout == "sim\n", done.stderr
    err = done.stderr
    assert "no NVIDIA driver found" in err and "simulated" in err and err.count("\n") == 1


def test_environment_variable_selects_backend(fake_nvml, monkeypatch):
    monkeypatch.setenv("ZEUS_NB_BACKEND", "sim")
    assert device.current().backend == "sim"
    device.reset()
    monkeypatch.setenv("ZEUS_NB_BACKEND", "nvml")
    assert device.current().backend == "nvml"
    assert device.current("sim").backend == "sim"  # the argument wins over the environment
    device.reset()
    assert device.current("auto").backend == "nvml"  # "auto" leaves the choice to the environment
    monkeypatch.setenv("ZEUS_NB_BACKEND", "cuda")
    device.reset()
    with pytest.raises(ValueError, match="ZEUS_NB_BACKEND: 'cuda' is not one of auto, sim, nvml"):
        device.current()


def test_no_permission_explains_sys_admin(fake_nvml):
    fake_nvml.set_device(0, set_error="NoPermission")
    g = device.current("nvml").gpu(0)
    with pytest.raises(PowerLimitPermissionError, match="SYS_ADMIN.*--cap-add SYS_ADMIN"):
        g.set_power_limit(200)
    assert fake_nvml.limits_w()[0] == 300.0


def test_permission_check_changes_nothing(fake_nvml, monkeypatch):
    g = device.current("nvml").gpu(0)
    monkeypatch.setattr(nvml_backend, "has_sys_admin", lambda: False)
    ok, why = g.can_set_power_limit()
    assert not ok and "SYS_ADMIN" in why
    monkeypatch.setattr(nvml_backend, "has_sys_admin", lambda: True)
    assert g.can_set_power_limit()[0]
    assert fake_nvml.state["set_calls"] == []


def test_unsupported_power_limit_setting(fake_nvml):
    fake_nvml.set_device(0, set_error="NotSupported")
    with pytest.raises(UnsupportedError, match="not supported"):
        device.current("nvml").gpu(0).set_power_limit(200)


def test_without_energy_counter_power_is_integrated(fake_nvml, monkeypatch):
    # a pre-Volta GPU (NVML_DEVICE_ARCH_PASCAL = 4): its counter is not supported
    fake_nvml.set_device(0, energy_error="NotSupported", power_mw=150_000, architecture=4)
    clock = iter([0.0, 2.0, 5.0, 9.0])
    monkeypatch.setattr(nvml_backend.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(nvml_backend.PowerIntegrator, "_run", lambda self: None)
    g = device.current("nvml").gpu(0)
    assert not g.supports_energy_counter()
    e0 = g.energy()  # integrator starts at t=0, first read at t=2
    e1 = g.energy()  # t=5
    assert e0 == pytest.approx(150.0 * 2.0)
    assert e1 - e0 == pytest.approx(150.0 * 3.0)


def test_cuda_visible_devices_is_respected(fake_nvml, monkeypatch):
    fake_nvml.set_device(1, name="NVIDIA H100")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    system = device.current("nvml")
    assert [(g.index, g.name) for g in system.gpus] == [(0, "NVIDIA H100")]
    device.reset()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-fake-1,GPU-fake-0")
    assert [g.name for g in device.current("nvml").gpus] == ["NVIDIA H100", "NVIDIA A40"]
    device.reset()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(NoGPUError, match="CUDA_VISIBLE_DEVICES"):
        device.current("nvml")


def test_monitor_on_nvml_reads_each_gpu(fake_nvml):
    fake_nvml.set_device(1, power_mw=100_000)
    mon = ZeusMonitor(gpu_indices=[1], backend="nvml")
    mon.begin_window("w")
    m = mon.end_window("w")
    assert m.gpu_energy == {1: pytest.approx(100.0)} and m.time >= 0


@pytest.mark.parametrize("indices", [[1], [0, 1]])
def test_failed_counter_read_names_the_gpu_and_keeps_the_window(fake_nvml, indices):
    mon = ZeusMonitor(gpu_indices=indices, backend="nvml")
    mon.begin_window("w")
    fake_nvml.set_device(1, energy_error="Unknown")
    with pytest.raises(DeviceError, match="GPU 1: reading the energy counter"):
        mon.end_window("w")
    assert mon.open_windows == ["w"]
    fake_nvml.set_device(1, energy_error=None)
    m = mon.end_window("w")  # read again: the window was kept
    assert list(m.gpu_energy) == indices and m.gpu_energy[1] == pytest.approx(200.0)


def test_real_pynvml_without_driver_is_the_no_gpu_path():
    """On this machine the real nvidia-ml-py finds no driver: that is the simulated fallback."""
    pynvml = pytest.importorskip("pynvml")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        with pytest.raises(NoGPUError, match="ZEUS_NB_BACKEND=sim"):
            device.current("nvml")
    else:  # a machine with a driver: the backend must come up
        pynvml.nvmlShutdown()
        assert device.current("nvml").backend == "nvml"


# --- the NVML names zeus-nb uses (device/gpu/nvml.py) -----------------------------------------
def _names_used(path) -> set[str]:
    """NVML names a module reaches through the name ``pynvml``: attributes, names in strings
    (``getattr(pynvml, "nvml...")``) and the ``("Set...", ...)`` changes ``_change`` completes."""
    import ast

    tree = ast.parse(path.read_text())
    parts = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    used = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and getattr(node.value, "id", None) == "pynvml":
            used.add(node.attr)
        elif isinstance(node, ast.Constant) and id(node) not in parts:
            if not isinstance(node.value, str):
                continue
            if re.fullmatch(r"nvml[A-Z]\w*|NVML_\w+", node.value):
                used.add(node.value)
            elif re.fullmatch(r"(Set|Reset)[A-Z]\w*", node.value):
                used.add(f"nvmlDevice{node.value}")
    return used


def test_every_nvml_name_zeus_nb_uses_is_listed_and_exists_in_nvidia_ml_py():
    import pynvml

    from zeus_nb.device.gpu import nvml
    from zeus_nb.runner import workers

    used = _names_used(Path(nvml_backend.__file__)) | _names_used(Path(workers.__file__))
    assert nvml_backend.pynvml is nvml and workers.pynvml is nvml
    assert {"nvmlInit", "nvmlDeviceSetPowerManagementLimit", "NVMLError"} <= used
    assert used - nvml.NAMES == set(), "list these in zeus_nb/device/gpu/nvml.py"
    assert [n for n in sorted(nvml.NAMES) if not hasattr(pynvml, n)] == []
    # SETTERS are exactly the listed names that change a GPU (the GPU check's guard's pattern)
    changes = re.compile(r"^nvml\w*?(Set|Reset|Clear|Create|Destroy|Modify|Remove)")
    assert {n for n in nvml.NAMES if changes.match(n)} == nvml.SETTERS


def test_nvml_names_are_looked_up_at_each_use_and_unlisted_ones_refused(monkeypatch):
    import pynvml

    from zeus_nb.device.gpu import nvml

    monkeypatch.setattr(pynvml, "nvmlDeviceGetPowerUsage", lambda handle: 123_000)
    assert nvml.nvmlDeviceGetPowerUsage("h") == 123_000  # a replaced pynvml function runs
    assert sorted(dir(nvml)) == sorted(nvml.NAMES)
    with pytest.raises(AttributeError, match="list it in zeus_nb.device.gpu.nvml.NAMES"):
        nvml.nvmlDeviceGetBAR1MemoryInfo  # noqa: B018 - the lookup is the test
    mocked = mock.create_autospec(nvml)  # what Zeus's tests build: a mock per listed name
    mocked.nvmlDeviceGetCount.return_value = 3
    assert mocked.nvmlDeviceGetCount() == 3
    with pytest.raises(TypeError):
        mocked.nvmlDeviceGetCount("one argument too many")
    assert not hasattr(mocked, "nvmlDeviceGetBAR1MemoryInfo")
    # an autospec mocks each function its spec lists: a tenth of nvidia-ml-py's, at most
    functions = lambda m: sum(isinstance(getattr(m, n), types.FunctionType) for n in dir(m))  # noqa: E731
    assert 10 * functions(nvml) < functions(pynvml)
