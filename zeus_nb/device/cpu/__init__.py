"""CPU package and DRAM energy, laid out as Zeus's ``zeus.device.cpu``.

:func:`get_cpus` hands out Zeus's CPU manager (:mod:`.common`, mJ) for the current GPU system:
the RAPL packages (:mod:`.rapl`, the one RAPL reader) beside real GPUs, the simulated CPU beside
simulated ones. :mod:`.packages` holds zeus-nb's own view of the same packages, in J. Both halves
are importable from here.
"""

from __future__ import annotations

from zeus_nb import device
from zeus_nb.device.cpu.common import CPUs, SystemCPUs, ZeusCPUInitError
from zeus_nb.device.cpu.packages import (
    CPU,
    DEFAULT_POWERCAP_ROOT,
    DEFAULT_TDP_W,
    DRAM_W_PER_GB,
    PERMISSION_HINT,
    TDP_FRACTION,
    WRAP_CHECK_PERIOD,
    RaplCounter,
    RaplCPU,
    SimulatedCPU,
    host_memory_gb,
    powercap_root,
    rapl_cpus,
)
from zeus_nb.device.cpu.rapl import RAPLCPUs, rapl_is_available
from zeus_nb.errors import CpuEnergyError, CpuEnergyPermissionError
from zeus_nb.inputs.registry import system_read

#: The CPU manager :func:`get_cpus` handed out last (Zeus's singleton; tests may set it).
_cpus: CPUs | None = None


def get_cpus() -> CPUs:
    """Zeus's CPU manager for the current GPU system, one per system (Zeus's singleton).

    Raises :class:`ZeusCPUInitError` where no CPU energy can be read (Zeus's code falls back to
    no CPUs on it) and :class:`~zeus_nb.device.cpu.common.ZeusCPUNoPermissionError` where RAPL is
    not readable by this user (the message says how to allow it).
    """
    global _cpus

    system = device.current()
    if _cpus is None or (isinstance(_cpus, SystemCPUs) and _cpus.system is not system):
        try:
            _cpus = SystemCPUs(system)
        except CpuEnergyError as e:
            if isinstance(e, (ZeusCPUInitError, CpuEnergyPermissionError)):
                raise
            raise ZeusCPUInitError(str(e)) from e
    return _cpus


@system_read("/proc/self/stat (kernel)")
def get_current_cpu_index(pid: int | str = "current") -> int:
    """The CPU package (socket) this process, or process ``pid``, is running on.

    Read from ``/proc/<pid>/stat`` (the CPU it last ran on) and that CPU's
    ``topology/physical_package_id``; 0 where Linux does not say.
    """
    proc = "self" if pid == "current" else str(int(pid))
    try:
        with open(f"/proc/{proc}/stat") as f:
            cpu = int(f.read().rsplit(")", 1)[1].split()[36])
        path = f"/sys/devices/system/cpu/cpu{cpu}/topology/physical_package_id"
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError, IndexError):
        return 0


__all__ = [
    "CPU",
    "CPUs",
    "DEFAULT_POWERCAP_ROOT",
    "DEFAULT_TDP_W",
    "DRAM_W_PER_GB",
    "PERMISSION_HINT",
    "RAPLCPUs",
    "RaplCPU",
    "RaplCounter",
    "SimulatedCPU",
    "TDP_FRACTION",
    "WRAP_CHECK_PERIOD",
    "ZeusCPUInitError",
    "get_cpus",
    "get_current_cpu_index",
    "host_memory_gb",
    "powercap_root",
    "rapl_cpus",
    "rapl_is_available",
]
