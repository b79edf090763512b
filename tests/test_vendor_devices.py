"""Zeus's AMD GPU and Apple silicon classes over stand-ins for their libraries.

The stand-ins (a fake ``amdsmi`` and a fake ``zeus_apple_silicon``) go into ``sys.modules`` only
for the test: the classes look their library up when used, so no re-import is needed.
"""

from __future__ import annotations

import sys
import time
from types import SimpleNamespace

import pytest

import zeus_nb.device.gpu.common as gpu_common
from zeus_nb.errors import UnsupportedError


# --- AMD ----------------------------------------------------------------------------------------
class AmdSmiLibraryException(Exception):
    def __init__(self, code: int):
        super().__init__(code)
        self.code = code

    def get_error_code(self):
        return self.code

    def get_error_info(self):
        return f"status {self.code}"


class FakeAmdSmi:
    """Two GPUs whose HIP order is the reverse of amdsmi's (PCI) order; 150 W each."""

    AmdSmiLibraryException = AmdSmiLibraryException
    AmdSmiInitFlags = SimpleNamespace(INIT_AMD_GPUS=2)
    AmdSmiClkType = SimpleNamespace(GFX="gfx", MEM="mem")
    AmdSmiTemperatureType = SimpleNamespace(HOTSPOT="hotspot")
    AmdSmiTemperatureMetric = SimpleNamespace(CURRENT="current")

    def __init__(self, counter_scale: float = 1.0):
        self.hip = {"pci0": 1, "pci1": 0}
        self.caps = {h: 200_000_000 for h in self.hip}  # uW
        self.ranges = {
            (h, k): (500, 2100 if k == "gfx" else 1600) for h in self.hip for k in ("gfx", "mem")
        }
        self.start = time.monotonic()
        self.counter_scale = counter_scale
        self.calls: list[tuple] = []
        self.fail_with: int | None = None

    def amdsmi_init(self, flags):
        self.calls.append(("init", flags))

    def amdsmi_shut_down(self):
        self.calls.append(("shut_down",))

    def amdsmi_get_processor_handles(self):
        return list(self.hip)

    def amdsmi_get_gpu_enumeration_info(self, handle):
        return {"hip_id": self.hip[handle]}

    def amdsmi_get_gpu_asic_info(self, handle):
        return {"market_name": "AMD Instinct MI300X"}

    def amdsmi_get_power_cap_info(self, handle):
        if self.fail_with is not None:
            raise AmdSmiLibraryException(self.fail_with)
        return {
            "power_cap": self.caps[handle],
            "default_power_cap": 750_000_000,
            "min_power_cap": 100_000_000,
            "max_power_cap": 750_000_000,
        }

    def amdsmi_set_power_cap(self, handle, sensor, cap):
        self.calls.append(("set_power_cap", handle, cap))
        self.caps[handle] = cap

    def amdsmi_get_clock_info(self, handle, kind):
        lo, hi = self.ranges[handle, kind]
        return {"min_clk": lo, "max_clk": hi}

    def amdsmi_set_gpu_clk_range(self, handle, lo, hi, clk_type):
        self.calls.append(("set_clk_range", handle, clk_type, lo, hi))
        self.ranges[handle, clk_type] = (lo, hi)

    def amdsmi_get_power_info(self, handle):
        return {"current_socket_power": 150, "average_socket_power": "N/A"}

    def amdsmi_get_energy_count(self, handle):  # 150 W, counted in 15.3 uJ ticks
        uj = (time.monotonic() - self.start) * 150e6 * self.counter_scale
        return {"energy_accumulator": int(uj / 15.3), "counter_resolution": 15.3}

    def amdsmi_get_temp_metric(self, handle, sensor, metric):
        return 61_500


@pytest.fixture
def amdsmi(monkeypatch):
    from zeus_nb.device.gpu import amd

    fake = FakeAmdSmi()
    monkeypatch.setitem(sys.modules, "amdsmi", fake)
    monkeypatch.setattr(amd, "ENERGY_CHECK_S", 0.05)
    for name in ("HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    return fake


def test_without_amdsmi_one_line_says_what_to_install(monkeypatch):
    from zeus_nb.device.gpu.amd import AMDGPU, AMDUnsupportedError, amdsmi_is_available

    monkeypatch.setitem(sys.modules, "amdsmi", None)
    assert amdsmi_is_available() is False
    with pytest.raises(AMDUnsupportedError, match="amdsmi is not installed.*get_gpus") as info:
        AMDGPU(0)
    assert isinstance(info.value, gpu_common.ZeusGPUInitError)
    assert isinstance(info.value, UnsupportedError) and "\n" not in str(info.value)


def test_amd_gpus_follow_hip_order_and_hip_visible_devices(amdsmi, monkeypatch):
    from zeus_nb.device.gpu.amd import AMDGPUs, amdsmi_is_available

    assert amdsmi_is_available()
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "1")
    gpus = AMDGPUs(ensure_homogeneous=True)
    assert len(gpus) == 1 and gpus.gpus[0].handle == "pci0"  # HIP 1 is amdsmi's first
    assert gpus.get_name(0) == "AMD Instinct MI300X"
    assert gpus.get_power_management_limit_constraints(0) == (100_000, 750_000)
    assert gpus.get_instant_power_usage(0) == 150_000
    with pytest.raises(gpu_common.ZeusGPUNotSupportedError, match="get_instant_power_usage"):
        gpus.get_average_power_usage(0)
    assert gpus.supports_get_total_energy_consumption(0)
    assert gpus.get_gpu_temperature(0) == 61
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "0,x")
    with pytest.raises(gpu_common.ZeusGPUInitError, match="HIP_VISIBLE_DEVICES='0,x'"):
        AMDGPUs()


def test_an_energy_counter_that_disagrees_with_power_is_not_used(amdsmi):
    from zeus_nb.device.gpu.amd import AMDGPUs

    amdsmi.counter_scale = 100.0
    gpus = AMDGPUs()
    assert [gpus.supports_get_total_energy_consumption(i) for i in range(2)] == [False, False]
    with pytest.raises(gpu_common.ZeusGPUNotSupportedError, match="integrates power"):
        gpus.get_total_energy_consumption(0)


def test_settings_changed_on_an_amd_gpu_come_back(amdsmi):
    from zeus_nb.device.gpu.amd import AMDGPU

    gpu = AMDGPU(0)  # amdsmi's pci1
    gpu.set_power_management_limit(300_000)
    gpu.set_power_management_limit(350_000)
    gpu.set_gpu_locked_clocks(1000, 1500)
    assert amdsmi.caps["pci1"] == 350_000_000 and amdsmi.ranges["pci1", "gfx"] == (1000, 1500)
    with pytest.raises(gpu_common.ZeusGPUInvalidArgError, match="outside"):
        gpu.set_power_management_limit(50_000)
    gpu.restore_settings()  # what exit does
    assert amdsmi.caps["pci1"] == 200_000_000 and amdsmi.ranges["pci1", "gfx"] == (500, 2100)
    assert amdsmi.caps["pci0"] == 200_000_000  # the other GPU untouched


def test_amdsmi_errors_become_zeus_classes(amdsmi):
    from zeus_nb.device.gpu.amd import AMDGPU

    gpu = AMDGPU(1)
    amdsmi.fail_with = 10
    with pytest.raises(gpu_common.ZeusGPUNoPermissionError, match="amdsmi error 10"):
        gpu.get_power_management_limit()
    amdsmi.fail_with = 999
    with pytest.raises(gpu_common.ZeusGPUUnknownError):
        gpu.get_power_management_limit()


# --- Apple silicon --------------------------------------------------------------------------------
FIELDS = dict(
    cpu_total_mj=100,
    efficiency_cores_mj=[10, 20],
    performance_cores_mj=[30, 40],
    efficiency_cluster_mj=[35],
    performance_cluster_mj=[75],
    efficiency_core_manager_mj=1,
    performance_core_manager_mj=2,
    dram_mj=5,
    gpu_mj=7,
    gpu_sram_mj=None,
    ane_mj=None,
)


class FakeAppleMonitor:
    def __init__(self):
        self.windows: dict[str, int] = {}
        self.total = 0

    def get_cumulative_energy(self):
        self.total += 1
        return SimpleNamespace(**{**FIELDS, "cpu_total_mj": 100 * self.total})

    def begin_window(self, key, restart=False):
        if key in self.windows and not restart:
            raise RuntimeError(f"window {key} already open")
        self.windows[key] = 0

    def end_window(self, key):
        self.windows.pop(key)
        return SimpleNamespace(**FIELDS)


@pytest.fixture
def apple_mac(monkeypatch):
    import platform

    from zeus_nb.device import soc

    monkeypatch.setitem(
        sys.modules, "zeus_apple_silicon", SimpleNamespace(AppleEnergyMonitor=FakeAppleMonitor)
    )
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(platform, "processor", lambda: "arm")
    monkeypatch.setattr(soc, "_soc", None)
    yield
    monkeypatch.setattr(soc, "_soc", None)


def test_get_soc_finds_apple_silicon_with_its_binding(apple_mac):
    from zeus_nb.device.soc import AppleSilicon, apple, apple_silicon_is_available, get_soc

    assert apple_silicon_is_available() and apple.zeus_apple_available
    chip = get_soc()
    assert isinstance(chip, AppleSilicon) and get_soc() is chip
    assert chip.get_available_metrics() == {k for k, v in FIELDS.items() if v is not None}
    chip.begin_window("step")
    measured = chip.end_window("step")
    assert measured.gpu_mj == 7 and measured.gpu_sram_mj is None
    before = chip.get_total_energy_consumption()
    later = chip.get_total_energy_consumption() - before
    assert later.cpu_total_mj == 100 and later.efficiency_cores_mj == [0, 0]


def test_apple_silicon_says_why_it_cannot_be_read(monkeypatch):
    import platform

    from zeus_nb.device.soc import ZeusAppleInitError, ZeusSoCInitError, get_soc
    from zeus_nb.device.soc.apple import AppleSilicon, apple_silicon_is_available

    monkeypatch.setattr(sys, "platform", "linux")
    with pytest.raises(ZeusAppleInitError, match="not an Apple silicon Mac"):
        AppleSilicon()
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(platform, "processor", lambda: "arm")
    monkeypatch.setitem(sys.modules, "zeus_apple_silicon", None)
    assert not apple_silicon_is_available()
    with pytest.raises(ZeusAppleInitError, match="binding is not installed.*pip install") as info:
        AppleSilicon()
    assert "\n" not in str(info.value)
    with pytest.raises(ZeusSoCInitError, match="no SoC energy counters"):
        get_soc()
