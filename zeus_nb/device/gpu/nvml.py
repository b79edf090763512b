"""Every NVML name zeus-nb uses, forwarded at each use to nvidia-ml-py's ``pynvml``.

:mod:`zeus_nb.device.gpu.nvidia` binds this module as ``pynvml``, the name Zeus's tests replace
with ``mock.patch("zeus.device.gpu.nvidia.pynvml", autospec=True)``. An autospec builds a mock of
every function its spec lists, once per test: nvidia-ml-py 13.615 has 464, this list 27 (the
autospec about 20x faster: about 0.3 s a test on this project's machine, over a thousand of
Zeus's tests). The list also shows in one place every NVML setter zeus-nb may call
(:data:`SETTERS`). Names are looked up in ``pynvml`` at each use, never copied,
so a replaced ``pynvml`` (a fake, a mock of one function, a guard that shadows setters) is what
runs. A name not listed raises :class:`AttributeError`: list it here before calling it.
"""

from __future__ import annotations

import pynvml as _nvml

from zeus_nb.device.gpu.translate import NVML_ERRORS

#: The settings zeus-nb may change, and their resets.
SETTERS = frozenset(
    {
        "nvmlDeviceSetPowerManagementLimit",
        "nvmlDeviceSetGpuLockedClocks",
        "nvmlDeviceResetGpuLockedClocks",
        "nvmlDeviceSetMemoryLockedClocks",
        "nvmlDeviceResetMemoryLockedClocks",
        "nvmlDeviceSetPersistenceMode",
    }
)

#: Reads, start and stop, constants and the error class.
READS = frozenset(
    {
        "nvmlInit",
        "nvmlShutdown",
        "nvmlSystemGetDriverVersion",
        "nvmlSystemGetNVMLVersion",
        "nvmlDeviceGetCount",
        "nvmlDeviceGetHandleByIndex",
        "nvmlDeviceGetHandleByUUID",
        "nvmlDeviceGetIndex",
        "nvmlDeviceGetName",
        "nvmlDeviceGetArchitecture",
        "nvmlDeviceGetC2cModeInfoV",
        "nvmlDeviceGetPowerManagementLimitConstraints",
        "nvmlDeviceGetPowerManagementLimit",
        "nvmlDeviceGetPowerManagementDefaultLimit",
        "nvmlDeviceGetTotalEnergyConsumption",
        "nvmlDeviceGetPowerUsage",
        "nvmlDeviceGetFieldValues",
        "nvmlDeviceGetTemperature",
        "nvmlDeviceGetSupportedMemoryClocks",
        "nvmlDeviceGetSupportedGraphicsClocks",
        "nvmlDeviceGetPersistenceMode",
        "NVMLError",
        "NVML_SUCCESS",
        "NVML_DEVICE_ARCH_VOLTA",
        "NVML_FEATURE_ENABLED",
        "NVML_FEATURE_DISABLED",
        "NVML_TEMPERATURE_GPU",
        "NVML_POWER_SCOPE_GPU",
        "NVML_POWER_SCOPE_MODULE",
        "NVML_POWER_SCOPE_MEMORY",
        "NVML_FI_DEV_POWER_INSTANT",
        "NVML_FI_DEV_POWER_AVERAGE",
    }
)

NAMES = SETTERS | READS | frozenset(NVML_ERRORS)


def __getattr__(name: str):
    if name in NAMES:
        return getattr(_nvml, name)
    raise AttributeError(f"zeus-nb uses no NVML name {name!r}; list it in {__name__}.NAMES")


def __dir__() -> list[str]:
    return sorted(NAMES)
