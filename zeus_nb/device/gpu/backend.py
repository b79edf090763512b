"""Zeus's GPU API over zeus-nb's device layer: any backend (NVML, simulated, replayed).

:class:`BackendGPU` turns one zeus-nb GPU (watts, joules, floats) into Zeus's :class:`GPU`
(integer mW and mJ) and zeus-nb's errors into Zeus's classes with zeus-nb's messages.
:class:`BackendGPUs` does the same for a whole :class:`~zeus_nb.device.base.GPUSystem`, so
``get_gpus()`` works on whichever backend ``zeus_nb.device.current()`` chose.

Power limits and locked SM clocks changed through this API are put back as zeus-nb puts back its
own changes (:mod:`zeus_nb.device.guard`): before the first change the original value is recorded,
and it is restored at exit, on SIGTERM, or by ``zeus-nb restore`` after a crash. Persistence mode
and locked memory clocks are not restored: NVML cannot read the locked memory clocks back.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

from zeus_nb.device.base import GPU as DeviceGPU
from zeus_nb.device.base import GPUSystem
from zeus_nb.device.gpu.common import GPU, GPUs
from zeus_nb.device.gpu.translate import zeus_error, zeus_errors
from zeus_nb.device.guard import SettingsGuard


def _milli(value: float) -> int:
    """W -> mW or J -> mJ, as Zeus's integers."""
    return int(round(value * 1000))


class BackendGPU(GPU):
    """Zeus's :class:`GPU` over one zeus-nb GPU of ``system``."""

    def __init__(self, gpu_index: int, system: GPUSystem | None = None) -> None:
        from zeus_nb import device

        super().__init__(gpu_index)
        self._system = system if system is not None else device.current()
        self._device = zeus_errors(self._system.gpu)(gpu_index)
        self._guards: dict[str, SettingsGuard] = {}

    @classmethod
    def _over(cls, system: GPUSystem, gpu: DeviceGPU) -> BackendGPU:
        """The wrapper of an already looked-up GPU (no second lookup, no constructor checks)."""
        self = cls.__new__(cls)
        GPU.__init__(self, gpu.index)
        self._system, self._device, self._guards = system, gpu, {}
        return self

    @property
    def device(self) -> DeviceGPU:
        """The zeus-nb GPU behind this one (watts and joules)."""
        return self._device

    def _warn_sys_admin(self) -> None:
        """Warn once when the backend says this process may not change settings."""
        if getattr(self, "_disable_sys_admin_warning", False):
            return
        ok, why = self._device.can_set_power_limit()
        if not ok:  # stacklevel: the caller of GPUs.<setter>
            warnings.warn(f"GPU {self.gpu_index}: changing settings may fail: {why}", stacklevel=5)
        self._disable_sys_admin_warning = True

    def _record(self, kind: str) -> None:
        """Record the original value of ``kind`` before the first change (restored at exit)."""
        guard = self._guards.get(kind)
        if guard is None:
            guard = SettingsGuard([self._device], (kind,), backend=self._system.backend)
            self._guards[kind] = guard
        guard.record()

    @property
    def supports_nonblocking_setters(self) -> bool:
        return False

    @zeus_errors
    def get_name(self) -> str:
        return self._device.name

    @zeus_errors
    def get_power_management_limit_constraints(self) -> tuple[int, int]:
        lo, hi = self._device.power_limit_constraints()
        return _milli(lo), _milli(hi)

    @zeus_errors
    def get_power_management_limit(self) -> int:
        return _milli(self._device.get_power_limit())

    @zeus_errors
    def set_power_management_limit(self, power_limit_mw: int, block: bool = True) -> None:
        """Set the limit in mW (a no-op when it is already set); restored at exit."""
        if self.get_power_management_limit() == power_limit_mw:
            return
        try:
            watts = self._device.check_power_limit(power_limit_mw / 1000)
        except ValueError as e:
            raise zeus_error(ValueError(f"{e}; Zeus's API takes mW: {power_limit_mw} mW")) from e
        self._warn_sys_admin()
        self._record("power_limit")
        self._device.set_power_limit(watts)

    @zeus_errors
    def reset_power_management_limit(self, block: bool = True) -> None:
        self.set_power_management_limit(_milli(self._device.default_power_limit()), block)

    @zeus_errors
    def set_persistence_mode(self, enabled: bool, block: bool = True) -> None:
        if self._device.persistence_mode() != bool(enabled):
            self._warn_sys_admin()
            self._device.set_persistence_mode(bool(enabled))

    @zeus_errors
    def get_persistence_mode(self) -> bool:
        return self._device.persistence_mode()

    @zeus_errors
    def get_supported_memory_clocks(self) -> list[int]:
        return self._device.supported_memory_clocks()

    @zeus_errors
    def set_memory_locked_clocks(
        self, min_clock_mhz: int, max_clock_mhz: int, block: bool = True
    ) -> None:
        self._warn_sys_admin()
        self._device.set_memory_locked_clocks(min_clock_mhz, max_clock_mhz)

    @zeus_errors
    def reset_memory_locked_clocks(self, block: bool = True) -> None:
        self._warn_sys_admin()
        self._device.reset_memory_locked_clocks()

    @zeus_errors
    def get_supported_graphics_clocks(self, memory_clock_mhz: int | None = None) -> list[int]:
        if memory_clock_mhz is None:
            return self._device.supported_clocks()
        return self._device.supported_clocks_at(memory_clock_mhz)

    @zeus_errors
    def set_gpu_locked_clocks(
        self, min_clock_mhz: int, max_clock_mhz: int, block: bool = True
    ) -> None:
        """Lock the SM clock to [min, max] MHz; the original state is restored at exit."""
        lo, hi = self._device.check_clock(min_clock_mhz), self._device.check_clock(max_clock_mhz)
        self._warn_sys_admin()
        self._record("locked_clocks")
        self._device.set_locked_clocks(lo, hi)

    @zeus_errors
    def reset_gpu_locked_clocks(self, block: bool = True) -> None:
        self._warn_sys_admin()
        self._record("locked_clocks")
        self._device.reset_locked_clocks()

    @zeus_errors
    def get_average_power_usage(self) -> int:
        return _milli(self._device.read_power("device_average"))

    @zeus_errors
    def get_instant_power_usage(self) -> int:
        return _milli(self._device.read_power("device_instant"))

    @zeus_errors
    def get_average_memory_power_usage(self) -> int:
        return _milli(self._device.read_power("memory_average"))

    @zeus_errors
    def supports_get_total_energy_consumption(self) -> bool:
        return self._device.supports_energy_counter()

    @zeus_errors
    def get_total_energy_consumption(self) -> int:
        """The energy counter in mJ; a GPU without one raises ZeusGPUNotSupportedError."""
        if not self._device.supports_energy_counter():
            from zeus_nb.errors import UnsupportedError

            raise UnsupportedError(
                f"GPU {self.gpu_index} ({self._device.name}) has no energy counter (NVIDIA: "
                "Volta and newer have one); measure with zeus_nb.monitor.ZeusMonitor, which "
                "integrates power there"
            )
        return _milli(self._device.energy())

    @zeus_errors
    def get_gpu_temperature(self) -> int:
        return int(round(self._device.temperature()))


class BackendGPUs(GPUs):
    """Zeus's :class:`GPUs` over a zeus-nb GPU system (default: the current one).

    GPU indices are zeus-nb's (CUDA's numbering). A simulated system that grows on demand adds
    the GPU a call names, as it does for ``ZeusMonitor``.
    """

    _gpu_class: type[BackendGPU] = BackendGPU

    def __init__(self, ensure_homogeneous: bool = False, system: GPUSystem | None = None) -> None:
        from zeus_nb import device

        self.system = system if system is not None else zeus_errors(device.current)()
        self._wrappers: dict[int, BackendGPU] = {}
        if ensure_homogeneous:
            self._ensure_homogeneous()

    def _wrap(self, gpu: DeviceGPU) -> BackendGPU:
        wrapper = self._wrappers.get(id(gpu))
        if wrapper is None:
            wrapper = self._wrappers[id(gpu)] = self._gpu_class._over(self.system, gpu)
        return wrapper

    @property
    def gpus(self) -> Sequence[BackendGPU]:
        return [self._wrap(g) for g in self.system.gpus]

    def _gpu(self, gpu_index: int) -> BackendGPU:
        return self._wrap(zeus_errors(self.system.gpu)(gpu_index))
