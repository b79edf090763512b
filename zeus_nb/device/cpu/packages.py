"""zeus-nb's CPU packages: energy in J, from Linux RAPL or a simulated CPU.

A :class:`CPU` is what a GPU system reports beside its GPUs (:meth:`GPUSystem.cpus`) and what
zeus-nb's own code reads in J. :class:`RaplCPU` reads a RAPL package through Zeus's classes in
:mod:`zeus_nb.device.cpu.rapl` (the one RAPL reader); :meth:`CPU.zeus_cpu` is the same package
as Zeus's CPU manager sees it (mJ). CPU index ``N`` is package ``intel-rapl:N``, as in Zeus's
``cpu_indices``.

The simulated CPU uses CodeCarbon's documented fallback model, since the bundled Zeus traces hold
no CPU measurements: the package draws 50 % of its TDP, the TDP of an unknown CPU is taken as
85 W, and DRAM draws 3 W per 8 GB (0.375 W/GB).
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path

import zeus_nb.device.cpu.common as common
from zeus_nb.device.cpu.rapl import (
    PERMISSION_HINT,
    RAPLCPU,
    WRAP_CHECK_PERIOD,
    RAPLFile,
    package_indices,
    rapl_dir,
)
from zeus_nb.errors import CpuEnergyError, InputError
from zeus_nb.inputs.env import env

#: The powercap class folder; ``ZEUS_NB_POWERCAP_ROOT`` replaces the RAPL folder inside it.
DEFAULT_POWERCAP_ROOT = "/sys/class/powercap"

#: CodeCarbon's constant-mode model (its methodology: a CPU without a power reading draws 50 % of
#: its TDP; 85 W is its TDP for an unknown CPU; memory draws 3 W per 8 GB).
TDP_FRACTION = 0.5
DEFAULT_TDP_W = 85.0
DRAM_W_PER_GB = 3.0 / 8.0

__all__ = [
    "CPU",
    "DEFAULT_POWERCAP_ROOT",
    "DEFAULT_TDP_W",
    "DRAM_W_PER_GB",
    "PERMISSION_HINT",
    "RaplCPU",
    "RaplCounter",
    "SimulatedCPU",
    "TDP_FRACTION",
    "WRAP_CHECK_PERIOD",
    "host_memory_gb",
    "powercap_root",
    "rapl_cpus",
]


def powercap_root() -> Path:
    """The folder whose ``intel-rapl:N`` zones are read (see :func:`rapl_dir`)."""
    return Path(env("ZEUS_NB_POWERCAP_ROOT") or rapl_dir())


class CPU(ABC):
    """One CPU package: its energy counter and, where metered, its DRAM's."""

    index: int

    @property
    @abstractmethod
    def name(self) -> str: ...

    @abstractmethod
    def energy(self) -> float:
        """Package energy in J since an arbitrary origin; differences are what matter."""

    def supports_dram(self) -> bool:
        return False

    def dram_energy(self) -> float | None:
        """DRAM energy in J since an arbitrary origin, or None where DRAM is not metered."""
        return None

    def zeus_cpu(self) -> common.CPU:
        """This package in Zeus's terms (mJ, :class:`~zeus_nb.device.cpu.common.CPU`)."""
        return common.SystemCPU(self)


class RaplCounter:
    """One powercap zone's counter in J since it was opened (wrap-arounds added).

    A unit view of :class:`~zeus_nb.device.cpu.rapl.RAPLFile`, which reads the file.
    """

    def __init__(self, zone: Path):
        self.zone = zone
        self.path = zone / "energy_uj"
        self.file = RAPLFile(str(zone))
        self.max_range_uj = int(self.file.max_energy_range_uj)
        self._origin_mj = self.file.read()

    def read(self) -> float:
        """Accumulated energy in J since this counter was opened."""
        return (self.file.read() - self._origin_mj) / 1000.0


class RaplCPU(CPU):
    """One RAPL package zone and its ``dram`` subzone, if any, in J.

    Reads through Zeus's :class:`~zeus_nb.device.cpu.rapl.RAPLCPU` (``rapl_cpu``), which
    :meth:`zeus_cpu` hands to Zeus's CPU manager as it is.
    """

    def __init__(self, index: int, zone: Path):
        self.index = index
        self.zone = zone
        self.rapl_cpu = RAPLCPU(index, str(zone.parent))
        self._package = self.rapl_cpu.rapl_file
        self._dram = self.rapl_cpu.dram

    @property
    def name(self) -> str:
        return f"RAPL {self._package.name or f'package-{self.index}'}"

    def energy(self) -> float:
        return self._package.read() / 1000.0

    def supports_dram(self) -> bool:
        return self._dram is not None

    def dram_energy(self) -> float | None:
        return self._dram.read() / 1000.0 if self._dram is not None else None

    def zeus_cpu(self) -> common.CPU:
        return self.rapl_cpu


def rapl_cpus(root: str | Path | None = None) -> list[RaplCPU]:
    """The RAPL packages under ``root`` (default: :func:`~zeus_nb.device.cpu.rapl.rapl_dir`),
    numbered as RAPL does.

    Raises:
        CpuEnergyError: no RAPL zone (not Linux, a VM without RAPL, or an ARM machine).
        CpuEnergyPermissionError: the counters exist but cannot be read (with the fix).
    """
    root = Path(root) if root is not None else Path(rapl_dir())
    indices = package_indices(str(root)) if root.is_dir() else []
    if not indices:
        raise CpuEnergyError(
            f"no RAPL package zone (intel-rapl:N) under {root}: this machine exposes no CPU "
            "energy counters (not Linux, a virtual machine, or a CPU without RAPL); measure GPUs "
            "only with cpu_indices=[]"
        )
    return [RaplCPU(i, root / f"intel-rapl:{i}") for i in indices]


def host_memory_gb() -> float:
    """This machine's physical memory in GB (what CodeCarbon's DRAM model is applied to)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    except (ValueError, OSError, AttributeError):
        return 8.0  # CodeCarbon's unit of 3 W per 8 GB, where the size cannot be read


class SimulatedCPU(CPU):
    """A CPU package drawing constant power over a simulated system's clock.

    Package power is :data:`TDP_FRACTION` x ``tdp_w``; DRAM power is :data:`DRAM_W_PER_GB` x
    ``dram_gb``, both CodeCarbon's model (see the module docstring). Energy is that power times
    the time the clock has moved, so it follows the simulated GPU's virtual or wall clock.
    """

    def __init__(
        self,
        clock: Callable[[], float],
        index: int = 0,
        tdp_w: float | None = None,
        dram_gb: float | None = None,
    ):
        self.index = index
        self._clock = clock
        self._t0 = clock()
        self.tdp_w = float(tdp_w if tdp_w is not None else DEFAULT_TDP_W)
        self.dram_gb = float(dram_gb if dram_gb is not None else host_memory_gb())
        if self.tdp_w <= 0 or self.dram_gb < 0:
            raise InputError(f"tdp_w must be > 0 and dram_gb >= 0, got {tdp_w}, {dram_gb}")
        self.package_power = TDP_FRACTION * self.tdp_w
        self.dram_power = DRAM_W_PER_GB * self.dram_gb

    @property
    def name(self) -> str:
        return f"simulated CPU ({self.tdp_w:g} W TDP, {self.dram_gb:.0f} GB DRAM)"

    def _elapsed(self) -> float:
        return self._clock() - self._t0

    def energy(self) -> float:
        return self.package_power * self._elapsed()

    def supports_dram(self) -> bool:
        return True

    def dram_energy(self) -> float | None:
        return self.dram_power * self._elapsed()
