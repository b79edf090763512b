"""Zeus's AMD GPU classes: names only, because zeus-nb reads NVIDIA GPUs (NVML) alone.

``amdsmi_is_available()`` answers False, so code that probes for AMD GPUs moves on; constructing
:class:`AMDGPU` or :class:`AMDGPUs` raises :class:`AMDUnsupportedError`, which Zeus code catches
as ``ZeusGPUInitError`` and zeus-nb code as ``UnsupportedError``.
"""

from __future__ import annotations

from zeus_nb.device.gpu.common import ZeusGPUInitError
from zeus_nb.errors import UnsupportedError

__all__ = ["AMDGPU", "AMDGPUs", "AMDUnsupportedError", "amdsmi_is_available"]

_REASON = (
    "{name}: zeus-nb measures NVIDIA GPUs through NVML and simulated GPUs only, not AMD GPUs "
    "(amdsmi); use zeus_nb.device.get_gpus() (ZEUS_NB_BACKEND=sim simulates an NVIDIA A40 or V100)"
)


class AMDUnsupportedError(ZeusGPUInitError, UnsupportedError):
    """AMD GPUs are not supported by zeus-nb."""


def amdsmi_is_available() -> bool:
    """Always False: zeus-nb does not read AMD GPUs."""
    return False


class AMDGPU:
    """Zeus's AMD GPU; constructing it raises :class:`AMDUnsupportedError`."""

    def __init__(self, gpu_index: int) -> None:
        raise AMDUnsupportedError(_REASON.format(name="AMDGPU"))


class AMDGPUs:
    """Zeus's AMD GPUs; constructing it raises :class:`AMDUnsupportedError`."""

    def __init__(self, ensure_homogeneous: bool = False) -> None:
        raise AMDUnsupportedError(_REASON.format(name="AMDGPUs"))
