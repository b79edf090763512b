"""Zeus's CPU manager (``get_cpus()``) over the current GPU system's CPU packages.

The current system (:func:`zeus_nb.device.current`) knows its CPUs: Linux RAPL packages beside
real GPUs, one simulated package beside simulated ones. :class:`SystemCPUs` gives them Zeus's
calls and units: ``get_total_energy_consumption(index)`` returns a :class:`CpuDramMeasurement` in
mJ, ``supports_get_dram_energy_consumption(index)`` says whether DRAM is metered.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from zeus_nb.device.base import GPUSystem
from zeus_nb.device.common import DeprecatedAliasABCMeta, deprecated_alias
from zeus_nb.device.cpu import CPU
from zeus_nb.device.exception import ZeusBaseCPUError
from zeus_nb.errors import CpuEnergyError, CpuEnergyPermissionError

__all__ = [
    "CpuDramMeasurement",
    "SystemCPUs",
    "ZeusCPUInitError",
    "ZeusCPUNoPermissionError",
    "get_cpus",
]


class ZeusCPUInitError(ZeusBaseCPUError):
    """No CPU energy counters can be read (no RAPL on this machine)."""


class ZeusCPUNoPermissionError(ZeusBaseCPUError):
    """RAPL counters exist but this process may not read them."""


@dataclass
class CpuDramMeasurement:
    """A CPU package's energy and its DRAM's (None where not metered), in mJ."""

    cpu_mj: float
    dram_mj: float | None = None

    def __sub__(self, other: CpuDramMeasurement) -> CpuDramMeasurement:
        if self.dram_mj is None and other.dram_mj is None:
            dram = None
        else:  # a side without DRAM counts as 0 mJ
            dram = (self.dram_mj or 0.0) - (other.dram_mj or 0.0)
        return CpuDramMeasurement(self.cpu_mj - other.cpu_mj, dram)

    def __truediv__(self, other: int | float) -> CpuDramMeasurement:
        if not isinstance(other, (int, float)):
            return NotImplemented
        if other == 0:
            raise ZeroDivisionError("cannot divide a CPU measurement by zero")
        dram = None if self.dram_mj is None else self.dram_mj / other
        return CpuDramMeasurement(self.cpu_mj / other, dram)


class SystemCPUs(metaclass=DeprecatedAliasABCMeta):
    """Zeus's CPU manager over the CPU packages of a zeus-nb GPU system."""

    def __init__(self, system: GPUSystem | None = None) -> None:
        from zeus_nb import device

        self.system = system if system is not None else device.current()
        try:
            self._cpus = list(self.system.cpus())
        except CpuEnergyPermissionError as e:
            raise ZeusCPUNoPermissionError(str(e)) from e
        except CpuEnergyError as e:
            raise ZeusCPUInitError(str(e)) from e

    @property
    def cpus(self) -> Sequence[CPU]:
        """zeus-nb's CPU packages (energy in J); index ``i`` is RAPL package ``i``."""
        return self._cpus

    def __len__(self) -> int:
        return len(self._cpus)

    def _cpu(self, index: int) -> CPU:
        for cpu in self._cpus:
            if cpu.index == index:
                return cpu
        have = ", ".join(str(c.index) for c in self._cpus) or "none"
        raise ValueError(f"no CPU package with index {index} (have: {have})")

    @deprecated_alias("getTotalEnergyConsumption")
    def get_total_energy_consumption(self, index: int) -> CpuDramMeasurement:
        """Cumulative package (and DRAM) energy in mJ since an arbitrary origin."""
        cpu = self._cpu(index)
        dram = cpu.dram_energy()
        return CpuDramMeasurement(cpu.energy() * 1000, None if dram is None else dram * 1000)

    @deprecated_alias("supportsGetDramEnergyConsumption")
    def supports_get_dram_energy_consumption(self, index: int) -> bool:
        return self._cpu(index).supports_dram()


_cpus: SystemCPUs | None = None


def get_cpus() -> SystemCPUs:
    """The CPU packages of the current GPU system, one object per system (Zeus's singleton).

    Raises :class:`ZeusCPUInitError` where no CPU energy can be read (Zeus code falls back to no
    CPUs on it) and :class:`ZeusCPUNoPermissionError` where RAPL is not readable by this user.
    """
    global _cpus
    from zeus_nb import device

    system = device.current()
    if _cpus is None or _cpus.system is not system:
        _cpus = SystemCPUs(system)
    return _cpus
