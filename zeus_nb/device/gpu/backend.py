"""Names of earlier releases, when Zeus's GPU API was a layer over zeus-nb's own GPUs.

Every backend's GPU now *is* Zeus's :class:`~zeus_nb.device.gpu.common.GPU` and every GPU
system *is* Zeus's :class:`~zeus_nb.device.gpu.common.GPUs` (:mod:`zeus_nb.device.base`).
:class:`BackendGPU` stays as a view that forwards Zeus's calls to one GPU of a system, for code
that subclasses it (a mixin that sends setters elsewhere); :func:`BackendGPUs` returns the system
itself.
"""

from __future__ import annotations

from zeus_nb import device
from zeus_nb.device.base import GPU, GPUSystem
from zeus_nb.device.gpu.common import GPU as ZeusGPU

__all__ = ["BackendGPU", "BackendGPUs"]


def _system(system: GPUSystem | None) -> GPUSystem:
    return system if system is not None else device.current()


class BackendGPU(ZeusGPU):
    """Zeus's calls on GPU ``gpu_index`` (CUDA index) of ``system`` (default: the current one)."""

    def __init__(self, gpu_index: int, system: GPUSystem | None = None) -> None:
        super().__init__(gpu_index)
        self._system = _system(system)
        self._device = self._system.gpu(gpu_index)

    @property
    def device(self) -> GPU:
        """The GPU these calls go to."""
        return self._device

    @property
    def supports_nonblocking_setters(self) -> bool:
        return self._device.supports_nonblocking_setters

    def get_name(self) -> str:
        return self._device.get_name()

    def get_power_management_limit_constraints(self) -> tuple[int, int]:
        return self._device.get_power_management_limit_constraints()

    def get_power_management_limit(self) -> int:
        return self._device.get_power_management_limit()

    def set_power_management_limit(self, power_limit_mw: int, block: bool = True) -> None:
        self._device.set_power_management_limit(power_limit_mw, block)

    def reset_power_management_limit(self, block: bool = True) -> None:
        self._device.reset_power_management_limit(block)

    def set_persistence_mode(self, enabled: bool, block: bool = True) -> None:
        self._device.set_persistence_mode(enabled, block)

    def get_persistence_mode(self) -> bool:
        return self._device.get_persistence_mode()

    def get_supported_memory_clocks(self) -> list[int]:
        return self._device.get_supported_memory_clocks()

    def set_memory_locked_clocks(
        self, min_clock_mhz: int, max_clock_mhz: int, block: bool = True
    ) -> None:
        self._device.set_memory_locked_clocks(min_clock_mhz, max_clock_mhz, block)

    def reset_memory_locked_clocks(self, block: bool = True) -> None:
        self._device.reset_memory_locked_clocks(block)

    def get_supported_graphics_clocks(self, memory_clock_mhz: int | None = None) -> list[int]:
        return self._device.get_supported_graphics_clocks(memory_clock_mhz)

    def set_gpu_locked_clocks(
        self, min_clock_mhz: int, max_clock_mhz: int, block: bool = True
    ) -> None:
        self._device.set_gpu_locked_clocks(min_clock_mhz, max_clock_mhz, block)

    def reset_gpu_locked_clocks(self, block: bool = True) -> None:
        self._device.reset_gpu_locked_clocks(block)

    def get_average_power_usage(self) -> int:
        return self._device.get_average_power_usage()

    def get_instant_power_usage(self) -> int:
        return self._device.get_instant_power_usage()

    def get_average_memory_power_usage(self) -> int:
        return self._device.get_average_memory_power_usage()

    def supports_get_total_energy_consumption(self) -> bool:
        return self._device.supports_get_total_energy_consumption()

    def get_total_energy_consumption(self) -> int:
        return self._device.get_total_energy_consumption()

    def get_gpu_temperature(self) -> int:
        return self._device.get_gpu_temperature()


def BackendGPUs(ensure_homogeneous: bool = False, system: GPUSystem | None = None) -> GPUSystem:  # noqa: N802 - a class once
    """The GPU system itself, which is Zeus's ``GPUs`` (default: the current system)."""
    out = _system(system)
    if ensure_homogeneous:
        out._ensure_homogeneous()
    return out
