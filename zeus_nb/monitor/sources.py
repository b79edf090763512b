"""What a :class:`~zeus_nb.monitor.energy.ZeusMonitor` measures: its GPUs and its CPU packages.

:class:`MonitoredGPUs` is Zeus's ``GPUs`` (calls by CUDA index go to the monitor's GPU system)
that iterates over the monitored GPUs only, so zeus-nb's code can loop over ``monitor.gpus``.
:func:`open_cpus` finds the CPU packages through Zeus's ``get_cpus()`` (or the monitor's own
system), with zeus-nb's rules for ``cpu_indices``.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator, Sequence

import zeus_nb.device.cpu as cpu
from zeus_nb import device
from zeus_nb.device.base import GPU, GPUSystem
from zeus_nb.device.cpu.common import CPUs, EmptyCPUs, SystemCPUs, ZeusCPUInitError
from zeus_nb.device.exception import ZeusBaseCPUError
from zeus_nb.device.gpu.common import GPUs
from zeus_nb.errors import CpuEnergyError, InputError

log = logging.getLogger(__name__)


class MonitoredGPUs(GPUs):
    """The GPUs a monitor measures: Zeus's calls by CUDA index, iteration over these GPUs.

    Unlike Zeus's ``monitor.gpus`` (every GPU of the process), its length and iteration cover
    the monitored GPUs only; calls by index reach any GPU of the system.
    """

    def __init__(self, system: GPUSystem, indices: Sequence[int]) -> None:
        self.system = system
        self._gpus = [system.gpu(i) for i in indices]

    @property
    def gpus(self) -> list[GPU]:
        return self._gpus

    def _gpu(self, gpu_index: int) -> GPU:
        return self.system.gpu(gpu_index)

    def __iter__(self) -> Iterator[GPU]:
        return iter(self._gpus)

    def __getitem__(self, position: int) -> GPU:
        return self._gpus[position]


def _cpus_of(system: GPUSystem) -> CPUs:
    """Zeus's CPU manager of ``system``: the process's (``get_cpus()``) for the current one."""
    if system is device.peek():
        return cpu.get_cpus()
    try:
        return SystemCPUs(system)
    except CpuEnergyError as e:
        raise ZeusCPUInitError(str(e)) from e


def open_cpus(system: GPUSystem, cpu_indices: list[int] | None) -> tuple[CPUs, list[int]]:
    """(CPU manager, indices): all readable packages for None, none for [], else exactly those.

    Given explicitly, an unreadable CPU is an error that says how to fix it.
    """
    if cpu_indices is not None and not cpu_indices:
        return EmptyCPUs(), []
    try:
        cpus = _cpus_of(system)
    except (CpuEnergyError, ZeusBaseCPUError) as e:
        if cpu_indices is None:
            log.debug("not measuring CPU energy: %s", e)
            return EmptyCPUs(), []
        cause = e.__cause__  # asked for explicitly: zeus-nb's error, which says how to fix it
        raise (cause if isinstance(cause, CpuEnergyError) else e) from None
    have = [getattr(c, "cpu_index", i) for i, c in enumerate(cpus.cpus)]
    if cpu_indices is None:
        return cpus, have
    if len(set(cpu_indices)) != len(cpu_indices):
        raise InputError(f"cpu_indices has duplicates: {cpu_indices}")
    missing = [i for i in cpu_indices if i not in have]
    if missing:
        listed = ", ".join(str(i) for i in have) or "none"
        raise InputError(f"no CPU package with index {missing[0]} (have: {listed})")
    return cpus, list(cpu_indices)


def sync_jax(system: GPUSystem, indices: list[int]) -> None:
    """Wait for JAX's queued work on real GPUs (never imports jax)."""
    jax = sys.modules.get("jax")
    if jax is None or system.backend != "nvml":
        return
    gpus = [d for d in jax.devices() if d.platform == "gpu"]
    for i in indices:
        if i < len(gpus):
            jax.device_put(0.0, device=gpus[i]).block_until_ready()
