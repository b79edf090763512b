"""Zeus's GPU interface: one GPU (:class:`GPU`), the GPUs of a process (:class:`GPUs`), errors.

Zeus's units hold here: power in mW, energy in mJ, clocks in MHz, temperature in degrees
Celsius, all as integers. :class:`GPUs` forwards each call to the GPU at ``gpu_index`` (the
CUDA index: ``CUDA_VISIBLE_DEVICES`` applies). Every backend implements this interface:
:class:`zeus_nb.device.base.GPU` adds zeus-nb's helpers in W and J on top of it, and
:class:`zeus_nb.device.base.GPUSystem` is a :class:`GPUs`; :func:`zeus_nb.device.gpu.get_gpus`
returns the current one.

Each Zeus error class also derives from the matching zeus-nb error (``ZeusGPUNoPermissionError``
is a :class:`~zeus_nb.errors.PowerLimitPermissionError`, ``ZeusGPUNotSupportedError`` an
:class:`~zeus_nb.errors.UnsupportedError`...), so ``except`` clauses written for either family
catch the other's errors.
"""

from __future__ import annotations

import abc
import warnings
from collections.abc import Sequence

from zeus_nb.device.common import DeprecatedAliasABCMeta, deprecated_alias, has_sys_admin
from zeus_nb.device.exception import ZeusBaseGPUError
from zeus_nb.errors import (
    ClockPermissionError,
    DeviceError,
    InputError,
    NoGPUError,
    PowerLimitPermissionError,
    UnsupportedError,
)

_SYS_ADMIN_WARNING = (
    "this call changes a GPU setting, which needs the SYS_ADMIN capability (or root); "
    "`zeus-nb doctor` says whether this process has it"
)


class GPU(abc.ABC, metaclass=DeprecatedAliasABCMeta):
    """One GPU, by Zeus's method names and units."""

    def __init__(self, gpu_index: int) -> None:
        self.gpu_index = gpu_index

    def _warn_sys_admin(self) -> None:
        """Warn once before a privileged call when this process lacks SYS_ADMIN."""
        if not getattr(self, "_disable_sys_admin_warning", False) and not has_sys_admin():
            warnings.warn(_SYS_ADMIN_WARNING, stacklevel=3)
            self._disable_sys_admin_warning = True

    @property
    @abc.abstractmethod
    def supports_nonblocking_setters(self) -> bool:
        """Whether setters honour ``block=False`` (return before the change is checked)."""

    @deprecated_alias("getName")
    @abc.abstractmethod
    def get_name(self) -> str:
        """The GPU's model name."""

    @deprecated_alias("getPowerManagementLimitConstraints")
    @abc.abstractmethod
    def get_power_management_limit_constraints(self) -> tuple[int, int]:
        """(minimum, maximum) power limit in mW."""

    @abc.abstractmethod
    def get_power_management_limit(self) -> int:
        """The current power limit in mW."""

    @deprecated_alias("setPowerManagementLimit")
    @abc.abstractmethod
    def set_power_management_limit(self, power_limit_mw: int, block: bool = True) -> None:
        """Set the power limit in mW."""

    @deprecated_alias("resetPowerManagementLimit")
    @abc.abstractmethod
    def reset_power_management_limit(self, block: bool = True) -> None:
        """Set the power limit back to the GPU's default."""

    @deprecated_alias("setPersistenceMode")
    @abc.abstractmethod
    def set_persistence_mode(self, enabled: bool, block: bool = True) -> None:
        """Turn persistence mode on or off."""

    @abc.abstractmethod
    def get_persistence_mode(self) -> bool:
        """Whether persistence mode is on."""

    @deprecated_alias("getSupportedMemoryClocks")
    @abc.abstractmethod
    def get_supported_memory_clocks(self) -> list[int]:
        """Supported memory clocks in MHz."""

    @deprecated_alias("setMemoryLockedClocks")
    @abc.abstractmethod
    def set_memory_locked_clocks(
        self, min_clock_mhz: int, max_clock_mhz: int, block: bool = True
    ) -> None:
        """Keep the memory clock within [min_clock_mhz, max_clock_mhz] MHz."""

    @deprecated_alias("resetMemoryLockedClocks")
    @abc.abstractmethod
    def reset_memory_locked_clocks(self, block: bool = True) -> None:
        """Let the driver choose memory clocks again."""

    @deprecated_alias("getSupportedGraphicsClocks")
    @abc.abstractmethod
    def get_supported_graphics_clocks(self, memory_clock_mhz: int | None = None) -> list[int]:
        """Supported SM (graphics) clocks in MHz, at ``memory_clock_mhz`` where that matters."""

    @deprecated_alias("setGpuLockedClocks")
    @abc.abstractmethod
    def set_gpu_locked_clocks(
        self, min_clock_mhz: int, max_clock_mhz: int, block: bool = True
    ) -> None:
        """Keep the SM clock within [min_clock_mhz, max_clock_mhz] MHz."""

    @deprecated_alias("resetGpuLockedClocks")
    @abc.abstractmethod
    def reset_gpu_locked_clocks(self, block: bool = True) -> None:
        """Let the driver choose SM clocks again."""

    @deprecated_alias("getAveragePowerUsage")
    @abc.abstractmethod
    def get_average_power_usage(self) -> int:
        """Board power averaged by the driver, in mW."""

    @deprecated_alias("getInstantPowerUsage")
    @abc.abstractmethod
    def get_instant_power_usage(self) -> int:
        """Instantaneous board power in mW."""

    @deprecated_alias("getAverageMemoryPowerUsage")
    @abc.abstractmethod
    def get_average_memory_power_usage(self) -> int:
        """The memory's average power in mW."""

    @deprecated_alias("supportsGetTotalEnergyConsumption")
    @abc.abstractmethod
    def supports_get_total_energy_consumption(self) -> bool:
        """Whether the GPU has an energy counter (NVIDIA: Volta and newer)."""

    @deprecated_alias("getTotalEnergyConsumption")
    @abc.abstractmethod
    def get_total_energy_consumption(self) -> int:
        """The energy counter in mJ (from an arbitrary origin: differences are what matter)."""

    @deprecated_alias("getGpuTemperature")
    @abc.abstractmethod
    def get_gpu_temperature(self) -> int:
        """The GPU core temperature in degrees Celsius."""


class GPUs(abc.ABC, metaclass=DeprecatedAliasABCMeta):
    """The GPUs of this process; each method takes the ``gpu_index`` of the GPU it concerns."""

    @abc.abstractmethod
    def __init__(self, ensure_homogeneous: bool = False) -> None:
        """Find the GPUs; with ``ensure_homogeneous``, insist they are all one model."""

    def __del__(self) -> None:  # noqa: B027 - Zeus's interface; nothing to release by default
        """Release the GPU library (nothing to do where the library is shared)."""

    @property
    @abc.abstractmethod
    def gpus(self) -> Sequence[GPU]:
        """The :class:`GPU` objects, in index order."""

    def __len__(self) -> int:
        return len(self.gpus)

    def _gpu(self, gpu_index: int) -> GPU:
        """The GPU every method forwards to (subclasses may look it up their own way)."""
        return self.gpus[gpu_index]

    def _ensure_homogeneous(self) -> None:
        names = [gpu.get_name() for gpu in self.gpus]
        if len(set(names)) > 1:
            raise ZeusGPUHeterogeneousError(
                f"the GPUs are of different models ({', '.join(names)}); set "
                "CUDA_VISIBLE_DEVICES to GPUs of one model, or pass ensure_homogeneous=False"
            )

    def _warn_sys_admin(self) -> None:
        for gpu in self.gpus:
            gpu._warn_sys_admin()

    @deprecated_alias("getName")
    def get_name(self, gpu_index: int) -> str:
        return self._gpu(gpu_index).get_name()

    @deprecated_alias("getPowerManagementLimitConstraints")
    def get_power_management_limit_constraints(self, gpu_index: int) -> tuple[int, int]:
        return self._gpu(gpu_index).get_power_management_limit_constraints()

    def get_power_management_limit(self, gpu_index: int) -> int:
        return self._gpu(gpu_index).get_power_management_limit()

    @deprecated_alias("setPowerManagementLimit")
    def set_power_management_limit(
        self, gpu_index: int, power_limit_mw: int, block: bool = True
    ) -> None:
        self._gpu(gpu_index).set_power_management_limit(power_limit_mw, block)

    @deprecated_alias("resetPowerManagementLimit")
    def reset_power_management_limit(self, gpu_index: int, block: bool = True) -> None:
        self._gpu(gpu_index).reset_power_management_limit(block)

    @deprecated_alias("setPersistenceMode")
    def set_persistence_mode(self, gpu_index: int, enabled: bool, block: bool = True) -> None:
        self._gpu(gpu_index).set_persistence_mode(enabled, block)

    def get_persistence_mode(self, gpu_index: int) -> bool:
        return self._gpu(gpu_index).get_persistence_mode()

    @deprecated_alias("getSupportedMemoryClocks")
    def get_supported_memory_clocks(self, gpu_index: int) -> list[int]:
        return self._gpu(gpu_index).get_supported_memory_clocks()

    @deprecated_alias("setMemoryLockedClocks")
    def set_memory_locked_clocks(
        self, gpu_index: int, min_clock_mhz: int, max_clock_mhz: int, block: bool = True
    ) -> None:
        self._gpu(gpu_index).set_memory_locked_clocks(min_clock_mhz, max_clock_mhz, block)

    @deprecated_alias("resetMemoryLockedClocks")
    def reset_memory_locked_clocks(self, gpu_index: int, block: bool = True) -> None:
        self._gpu(gpu_index).reset_memory_locked_clocks(block)

    @deprecated_alias("getSupportedGraphicsClocks")
    def get_supported_graphics_clocks(
        self, gpu_index: int, memory_clock_mhz: int | None = None
    ) -> list[int]:
        return self._gpu(gpu_index).get_supported_graphics_clocks(memory_clock_mhz)

    @deprecated_alias("setGpuLockedClocks")
    def set_gpu_locked_clocks(
        self, gpu_index: int, min_clock_mhz: int, max_clock_mhz: int, block: bool = True
    ) -> None:
        self._gpu(gpu_index).set_gpu_locked_clocks(min_clock_mhz, max_clock_mhz, block)

    @deprecated_alias("resetGpuLockedClocks")
    def reset_gpu_locked_clocks(self, gpu_index: int, block: bool = True) -> None:
        self._gpu(gpu_index).reset_gpu_locked_clocks(block)

    @deprecated_alias("getAveragePowerUsage")
    def get_average_power_usage(self, gpu_index: int) -> int:
        return self._gpu(gpu_index).get_average_power_usage()

    @deprecated_alias("getInstantPowerUsage")
    def get_instant_power_usage(self, gpu_index: int) -> int:
        return self._gpu(gpu_index).get_instant_power_usage()

    @deprecated_alias("getAverageMemoryPowerUsage")
    def get_average_memory_power_usage(self, gpu_index: int) -> int:
        return self._gpu(gpu_index).get_average_memory_power_usage()

    @deprecated_alias("supportsGetTotalEnergyConsumption")
    def supports_get_total_energy_consumption(self, gpu_index: int) -> bool:
        return self._gpu(gpu_index).supports_get_total_energy_consumption()

    @deprecated_alias("getTotalEnergyConsumption")
    def get_total_energy_consumption(self, gpu_index: int) -> int:
        return self._gpu(gpu_index).get_total_energy_consumption()

    @deprecated_alias("getGpuTemperature")
    def get_gpu_temperature(self, gpu_index: int) -> int:
        return self._gpu(gpu_index).get_gpu_temperature()


class EmptyGPUs(GPUs):
    """No GPUs: its length is 0 and every per-GPU call raises ValueError (as Zeus's does)."""

    def __init__(self, ensure_homogeneous: bool = False) -> None:
        pass

    @property
    def gpus(self) -> Sequence[GPU]:
        return []

    def _gpu(self, gpu_index: int) -> GPU:
        raise ValueError(f"no GPU {gpu_index}: this process has no GPUs")

    def _ensure_homogeneous(self) -> None:
        raise ValueError("no GPUs to compare")

    def _warn_sys_admin(self) -> None:
        raise ValueError("no GPUs to change settings of")


# --- errors: one per NVML error kind, as Zeus names them, each also a zeus-nb error ------------
class ZeusGPUInitError(ZeusBaseGPUError, NoGPUError):
    """The GPU library could not start, or no GPU backend is usable."""


class ZeusGPUInvalidArgError(ZeusBaseGPUError, InputError):
    """An argument is out of range (a power limit, a clock, a GPU index)."""


class ZeusGPUNotSupportedError(ZeusBaseGPUError, UnsupportedError):
    """The GPU (or backend) does not support the operation."""


class ZeusGPUNoPermissionError(ZeusBaseGPUError, PowerLimitPermissionError):
    """The process lacks the privilege (SYS_ADMIN) the operation needs."""


class ZeusGPUClockPermissionError(ZeusGPUNoPermissionError, ClockPermissionError):
    """No privilege to change clocks or persistence mode (a :class:`ZeusGPUNoPermissionError`)."""


class ZeusGPUAlreadyInitializedError(ZeusBaseGPUError, DeviceError):
    """The GPU library was initialized twice."""


class ZeusGPUNotFoundError(ZeusBaseGPUError, DeviceError):
    """The GPU asked for does not exist."""


class ZeusGPUInsufficientSizeError(ZeusBaseGPUError, DeviceError):
    """A buffer passed to the GPU library was too small."""


class ZeusGPUInsufficientPowerError(ZeusBaseGPUError, DeviceError):
    """A power cable of the GPU is not connected properly."""


class ZeusGPUDriverNotLoadedError(ZeusBaseGPUError, NoGPUError):
    """The NVIDIA driver is not loaded."""


class ZeusGPUTimeoutError(ZeusBaseGPUError, DeviceError):
    """The GPU did not answer in time."""


class ZeusGPUIRQError(ZeusBaseGPUError, DeviceError):
    """The kernel detected an interrupt problem with the GPU."""


class ZeusGPULibraryNotFoundError(ZeusBaseGPUError, NoGPUError):
    """The GPU management library (NVML) is not installed."""


class ZeusGPUFunctionNotFoundError(ZeusBaseGPUError, DeviceError):
    """The installed driver lacks a function of the GPU library."""


class ZeusGPUCorruptedInfoROMError(ZeusBaseGPUError, DeviceError):
    """The GPU's infoROM is corrupted."""


class ZeusGPULostError(ZeusBaseGPUError, DeviceError):
    """The GPU fell off the bus or is otherwise unreachable."""


class ZeusGPUResetRequiredError(ZeusBaseGPUError, DeviceError):
    """The GPU needs a reset before it can be used again."""


class ZeusGPUOperatingSystemError(ZeusBaseGPUError, DeviceError):
    """The operating system refused the GPU library's call."""


class ZeusGPULibRMVersionMismatchError(ZeusBaseGPUError, DeviceError):
    """The GPU library and the kernel driver are of different versions."""


class ZeusGPUMemoryError(ZeusBaseGPUError, DeviceError):
    """The GPU library ran out of memory."""


class ZeusGPUUnknownError(ZeusBaseGPUError, DeviceError):
    """The GPU library reported an error with no class of its own."""


class ZeusGPUHeterogeneousError(ZeusBaseGPUError, InputError):
    """The GPUs are of different models where one model was required."""
