"""Zeus's NVIDIA GPU classes, over zeus-nb's NVML backend (:mod:`zeus_nb.device.nvml`).

``NVIDIAGPUs()`` always means real GPUs through NVML: it uses the current GPU system when that
is the NVML one, else opens NVML itself (without making it current). ``get_gpus()`` is what Zeus
code normally calls; it returns the current backend's GPUs, simulated ones included.
:class:`ZeusdNVIDIAGPU` exists so imports work: zeus-nb talks to NVML directly, not through
Zeus's daemon, so constructing it raises.
"""

from __future__ import annotations

import logging

from zeus_nb.device.base import GPUSystem
from zeus_nb.device.gpu.backend import BackendGPU, BackendGPUs
from zeus_nb.device.gpu.common import ZeusGPUInitError
from zeus_nb.device.gpu.translate import zeus_error
from zeus_nb.errors import ZeusNbError
from zeus_nb.utils.zeusd import ZeusdUnsupportedError, zeusd_reason

__all__ = ["NVIDIAGPU", "NVIDIAGPUs", "ZeusdNVIDIAGPU", "nvml_is_available"]

log = logging.getLogger(__name__)


def nvml_is_available() -> bool:
    """Whether NVML starts and lists at least one visible GPU (never raises)."""
    from zeus_nb.device.nvml import NvmlSystem

    try:
        NvmlSystem()
    except (ZeusNbError, ImportError) as e:
        log.info("NVML is not usable: %s", e)
        return False
    return True


def _nvml_system(cuda_visible_devices: str | None | object = None) -> GPUSystem:
    """The current system if it is NVML's, else a fresh NVML system; Zeus's errors if neither."""
    from zeus_nb import device
    from zeus_nb.device.nvml import FROM_ENV, NvmlSystem

    if cuda_visible_devices is FROM_ENV and device.resolve_backend() in ("auto", "nvml"):
        system = device.current()
        if system.backend == "nvml":
            return system
    try:
        return NvmlSystem(cuda_visible_devices)  # type: ignore[arg-type]
    except ImportError as e:
        raise ZeusGPUInitError(
            f"NVIDIA GPUs need the nvidia-ml-py package ({e}): pip install nvidia-ml-py; "
            "zeus_nb.device.get_gpus() returns the simulated GPUs without it"
        ) from e
    except ZeusNbError as e:
        raise zeus_error(e) from e


class NVIDIAGPU(BackendGPU):
    """One real NVIDIA GPU by its NVML index (``CUDA_VISIBLE_DEVICES`` does not apply)."""

    def __init__(self, gpu_index: int) -> None:
        super().__init__(gpu_index, _nvml_system(None))


class ZeusdNVIDIAGPU(NVIDIAGPU):
    """Zeus's NVIDIA GPU whose privileged calls go through zeusd: not available in zeus-nb."""

    def __init__(self, gpu_index: int, client) -> None:
        raise ZeusdUnsupportedError(zeusd_reason("ZeusdNVIDIAGPU"))


class NVIDIAGPUs(BackendGPUs):
    """The NVIDIA GPUs this process sees, numbered as CUDA numbers them."""

    _gpu_class = NVIDIAGPU

    def __init__(self, ensure_homogeneous: bool = False, system: GPUSystem | None = None) -> None:
        from zeus_nb.device.nvml import FROM_ENV

        if system is None:
            system = _nvml_system(FROM_ENV)
        super().__init__(ensure_homogeneous, system)
