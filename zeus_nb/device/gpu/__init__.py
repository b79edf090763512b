"""Zeus's GPU API (``zeus.device.gpu``) over zeus-nb's device layer.

``get_gpus()`` returns the GPUs of the process's current GPU system
(:func:`zeus_nb.device.current`): real NVIDIA GPUs through NVML (:class:`NVIDIAGPUs`), or the
simulated or replayed ones (:class:`~zeus_nb.device.gpu.backend.BackendGPUs`). Either way the
calls and units are Zeus's (mW, mJ, MHz) and so are the error classes, with zeus-nb's messages::

    from zeus_nb.device import get_gpus

    gpus = get_gpus()
    lo, hi = gpus.get_power_management_limit_constraints(0)  # mW
    gpus.set_power_management_limit(0, hi)  # restored at exit, as every zeus-nb change is
"""

from __future__ import annotations

from zeus_nb.device.gpu.amd import AMDGPUs, amdsmi_is_available
from zeus_nb.device.gpu.backend import BackendGPU, BackendGPUs
from zeus_nb.device.gpu.common import (
    GPU,
    EmptyGPUs,
    GPUs,
    ZeusGPUAlreadyInitializedError,
    ZeusGPUCorruptedInfoROMError,
    ZeusGPUDriverNotLoadedError,
    ZeusGPUFunctionNotFoundError,
    ZeusGPUHeterogeneousError,
    ZeusGPUInitError,
    ZeusGPUInsufficientPowerError,
    ZeusGPUInsufficientSizeError,
    ZeusGPUInvalidArgError,
    ZeusGPUIRQError,
    ZeusGPULibraryNotFoundError,
    ZeusGPULibRMVersionMismatchError,
    ZeusGPULostError,
    ZeusGPUMemoryError,
    ZeusGPUNoPermissionError,
    ZeusGPUNotFoundError,
    ZeusGPUNotSupportedError,
    ZeusGPUOperatingSystemError,
    ZeusGPUResetRequiredError,
    ZeusGPUTimeoutError,
    ZeusGPUUnknownError,
)
from zeus_nb.device.gpu.nvidia import NVIDIAGPUs, nvml_is_available
from zeus_nb.errors import NoGPUError

__all__ = [
    "GPU",
    "AMDGPUs",
    "BackendGPU",
    "BackendGPUs",
    "EmptyGPUs",
    "GPUs",
    "NVIDIAGPUs",
    "ZeusGPUAlreadyInitializedError",
    "ZeusGPUCorruptedInfoROMError",
    "ZeusGPUDriverNotLoadedError",
    "ZeusGPUFunctionNotFoundError",
    "ZeusGPUHeterogeneousError",
    "ZeusGPUIRQError",
    "ZeusGPUInitError",
    "ZeusGPUInsufficientPowerError",
    "ZeusGPUInsufficientSizeError",
    "ZeusGPUInvalidArgError",
    "ZeusGPULibRMVersionMismatchError",
    "ZeusGPULibraryNotFoundError",
    "ZeusGPULostError",
    "ZeusGPUMemoryError",
    "ZeusGPUNoPermissionError",
    "ZeusGPUNotFoundError",
    "ZeusGPUNotSupportedError",
    "ZeusGPUOperatingSystemError",
    "ZeusGPUResetRequiredError",
    "ZeusGPUTimeoutError",
    "ZeusGPUUnknownError",
    "amdsmi_is_available",
    "get_gpus",
    "nvml_is_available",
]

_gpus: BackendGPUs | None = None


def get_gpus(ensure_homogeneous: bool = False) -> GPUs:
    """The GPUs of the current GPU system, one object per system (as Zeus's singleton).

    A new current system (``zeus_nb.use_simulated(...)``, a test's reset) gets a new object.
    Raises :class:`ZeusGPUInitError` when no backend can start (e.g. ``ZEUS_NB_BACKEND=nvml``
    without a driver), so Zeus code that falls back to ``EmptyGPUs`` on it still does; with
    ``ensure_homogeneous``, :class:`ZeusGPUHeterogeneousError` when the models differ. Other
    zeus-nb errors (an unusable ``ZEUS_NB_SIM_*`` value) pass unchanged: they name the fix.
    """
    global _gpus
    from zeus_nb import device

    try:
        system = device.current()
    except NoGPUError as e:
        raise ZeusGPUInitError(str(e)) from e
    except ImportError as e:
        raise ZeusGPUInitError(
            f"{e}: pip install nvidia-ml-py, or use the simulated GPU: ZEUS_NB_BACKEND=sim"
        ) from e
    if _gpus is None or _gpus.system is not system:
        cls = NVIDIAGPUs if system.backend == "nvml" else BackendGPUs
        _gpus = cls(system=system)
    if ensure_homogeneous:
        _gpus._ensure_homogeneous()
    return _gpus
