"""Zeus's GPU API (``zeus.device.gpu``): the one GPU interface of zeus-nb.

``get_gpus()`` returns the GPUs of the process's current GPU system
(:func:`zeus_nb.device.current`): real NVIDIA GPUs through NVML (:class:`NVIDIAGPUs`), or the
simulated or replayed ones. Every one of them is Zeus's :class:`GPUs`, in Zeus's calls, units (mW,
mJ, MHz) and error classes, with zeus-nb's messages::

    from zeus_nb.device import get_gpus

    gpus = get_gpus()
    lo, hi = gpus.get_power_management_limit_constraints(0)  # mW
    gpus.set_power_management_limit(0, hi)  # restored at exit, as every zeus-nb change is
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from zeus_nb.device.gpu.common import (
    GPU,
    EmptyGPUs,
    GPUs,
    ZeusGPUAlreadyInitializedError,
    ZeusGPUClockPermissionError,
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
from zeus_nb.errors import NoGPUError

if TYPE_CHECKING:
    from zeus_nb.device.gpu.amd import AMDGPUs as AMDGPUs
    from zeus_nb.device.gpu.amd import amdsmi_is_available as amdsmi_is_available
    from zeus_nb.device.gpu.backend import BackendGPU as BackendGPU
    from zeus_nb.device.gpu.backend import BackendGPUs as BackendGPUs
    from zeus_nb.device.gpu.nvidia import NVIDIAGPUs as NVIDIAGPUs
    from zeus_nb.device.gpu.nvidia import nvml_is_available as nvml_is_available

# Names of the backend modules, loaded on first use: they build on zeus_nb.device.base, which
# builds on this package's common module.
_LAZY = {
    "AMDGPUs": "amd",
    "amdsmi_is_available": "amd",
    "BackendGPU": "backend",
    "BackendGPUs": "backend",
    "NVIDIAGPUs": "nvidia",
    "nvml_is_available": "nvidia",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "GPU",
    "AMDGPUs",
    "BackendGPU",
    "BackendGPUs",
    "EmptyGPUs",
    "GPUs",
    "NVIDIAGPUs",
    "ZeusGPUAlreadyInitializedError",
    "ZeusGPUClockPermissionError",
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

_gpus: GPUs | None = None
_handed_out: GPUs | None = None  # what get_gpus() returned last, to tell a reset of _gpus


def get_gpus(ensure_homogeneous: bool = False) -> GPUs:
    """The GPUs of the current GPU system, which is itself Zeus's :class:`GPUs`.

    A new current system (``zeus_nb.use_simulated(...)``, a test's reset) is picked up. Setting
    ``_gpus`` back to None after a call (what Zeus's tests do between tests) makes the next call
    look for NVIDIA GPUs again, as Zeus's singleton does. Raises :class:`ZeusGPUInitError` when
    no backend can start (e.g. ``ZEUS_NB_BACKEND=nvml`` without a driver), so Zeus code that falls
    back to ``EmptyGPUs`` on it still does; with ``ensure_homogeneous``,
    :class:`ZeusGPUHeterogeneousError` when the models differ. Other zeus-nb errors (an unusable
    ``ZEUS_NB_SIM_*`` value) pass unchanged: they name the fix.
    """
    global _gpus, _handed_out
    from zeus_nb import device

    reset = _gpus is None and _handed_out is not None and device.peek() is _handed_out
    if reset and _handed_out.backend == "nvml":
        device.reset()
    try:
        system = device.current()
    except NoGPUError as e:
        if isinstance(e, ZeusGPUInitError):
            raise
        raise ZeusGPUInitError(str(e)) from e
    except ImportError as e:
        raise ZeusGPUInitError(
            f"{e}: pip install nvidia-ml-py, or use the simulated GPU: ZEUS_NB_BACKEND=sim"
        ) from e
    _gpus = _handed_out = system
    if ensure_homogeneous:
        system._ensure_homogeneous()
    return system
