"""Zeus's CPU classes (``zeus.device.cpu.common``): packages by index, energies in mJ.

:class:`CPU` is one package as Zeus's code sees it (``get_total_energy_consumption()`` returns a
:class:`CpuDramMeasurement` in mJ), :class:`CPUs` all of a machine's by index. The RAPL reader
(:mod:`zeus_nb.device.cpu.rapl`) implements them for Linux; :class:`SystemCPUs` gives any zeus-nb
GPU system's CPU packages (:mod:`zeus_nb.device.cpu.packages`, e.g. the simulated CPU) the same
interface. :func:`zeus_nb.device.cpu.get_cpus` hands out the current system's.

The error classes are also zeus-nb's CPU errors (:class:`~zeus_nb.errors.CpuEnergyError` and its
permission subclass), so code catching either family sees them.
"""

from __future__ import annotations

import abc
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from zeus_nb.device.common import DeprecatedAliasABCMeta, deprecated_alias
from zeus_nb.device.exception import ZeusBaseCPUError
from zeus_nb.errors import CpuEnergyError, CpuEnergyPermissionError

if TYPE_CHECKING:
    from zeus_nb.device.base import GPUSystem
    from zeus_nb.device.cpu.packages import CPU as Package

__all__ = [
    "CPU",
    "CPUs",
    "CpuDramMeasurement",
    "EmptyCPUs",
    "SystemCPU",
    "SystemCPUs",
    "ZeusCPUInitError",
    "ZeusCPUNoPermissionError",
    "ZeusCPUNotFoundError",
    "get_cpus",
]


class ZeusCPUInitError(ZeusBaseCPUError, CpuEnergyError):
    """No CPU energy counters can be read (no RAPL on this machine)."""


class ZeusCPUNoPermissionError(ZeusBaseCPUError, CpuEnergyPermissionError):
    """RAPL counters exist but this process may not read them."""


class ZeusCPUNotFoundError(ZeusBaseCPUError, CpuEnergyError, ValueError):
    """No CPU package with the index asked for."""


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


class CPU(abc.ABC, metaclass=DeprecatedAliasABCMeta):
    """One CPU package as Zeus's code sees it."""

    def __init__(self, cpu_index: int) -> None:
        self.cpu_index = cpu_index

    @deprecated_alias("getTotalEnergyConsumption")
    @abc.abstractmethod
    def get_total_energy_consumption(self) -> CpuDramMeasurement:
        """Cumulative package (and DRAM) energy in mJ since an arbitrary origin."""

    @deprecated_alias("supportsGetDramEnergyConsumption")
    @abc.abstractmethod
    def supports_get_dram_energy_consumption(self) -> bool:
        """Whether the package meters its DRAM."""


class CPUs(abc.ABC, metaclass=DeprecatedAliasABCMeta):
    """The CPU packages of this machine, by index, as Zeus's code sees them."""

    @property
    @abc.abstractmethod
    def cpus(self) -> Sequence[CPU]:
        """The packages; position ``i`` is package ``i``."""

    def __len__(self) -> int:
        return len(self.cpus)

    def _cpu(self, index: int) -> CPU:
        for cpu in self.cpus:
            if getattr(cpu, "cpu_index", None) == index:
                return cpu
        if 0 <= index < len(self.cpus):  # packages without an index attribute, by position
            return self.cpus[index]
        have = ", ".join(str(getattr(c, "cpu_index", i)) for i, c in enumerate(self.cpus))
        raise ZeusCPUNotFoundError(f"no CPU package with index {index} (have: {have or 'none'})")

    @deprecated_alias("getTotalEnergyConsumption")
    def get_total_energy_consumption(self, index: int) -> CpuDramMeasurement:
        """Cumulative package (and DRAM) energy of package ``index`` in mJ."""
        return self._cpu(index).get_total_energy_consumption()

    @deprecated_alias("supportsGetDramEnergyConsumption")
    def supports_get_dram_energy_consumption(self, index: int) -> bool:
        """Whether package ``index`` meters its DRAM."""
        return self._cpu(index).supports_get_dram_energy_consumption()


class EmptyCPUs(CPUs):
    """No CPU packages: what Zeus's code falls back to where none can be read."""

    @property
    def cpus(self) -> Sequence[CPU]:
        return []

    def get_total_energy_consumption(self, index: int) -> CpuDramMeasurement:
        raise ValueError("no CPU packages are measured here (EmptyCPUs)")

    def supports_get_dram_energy_consumption(self, index: int) -> bool:
        raise ValueError("no CPU packages are measured here (EmptyCPUs)")


class SystemCPU(CPU):
    """Zeus's view of one zeus-nb CPU package that reads in J (the simulated CPU)."""

    def __init__(self, package: Package) -> None:
        super().__init__(package.index)
        self.package = package

    def get_total_energy_consumption(self) -> CpuDramMeasurement:
        dram = self.package.dram_energy()
        return CpuDramMeasurement(
            self.package.energy() * 1000, None if dram is None else dram * 1000
        )

    def supports_get_dram_energy_consumption(self) -> bool:
        return self.package.supports_dram()


class SystemCPUs(CPUs):
    """Zeus's CPU manager over the CPU packages of a zeus-nb GPU system.

    RAPL packages hand out their :class:`~zeus_nb.device.cpu.rapl.RAPLCPU` itself; other
    packages are wrapped in a :class:`SystemCPU`. :func:`zeus_nb.device.cpu.get_cpus` builds
    one for the current system.
    """

    def __init__(self, system: GPUSystem) -> None:
        self.system = system
        self._cpus = [p.zeus_cpu() for p in system.cpus()]

    @property
    def cpus(self) -> Sequence[CPU]:
        return self._cpus


def get_cpus() -> CPUs:
    """:func:`zeus_nb.device.cpu.get_cpus`, also reachable here as in earlier releases."""
    # The parent package is always loaded before this module; looked up, not imported, since
    # the package imports this module.
    return sys.modules["zeus_nb.device.cpu"].get_cpus()
