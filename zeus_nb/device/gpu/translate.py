"""zeus-nb's device errors as Zeus's GPU error classes, keeping zeus-nb's one-line messages.

The NVML backend tags each error with the name of the NVML error code it came from
(``nvml_error``, e.g. ``NVML_ERROR_NO_PERMISSION``); that name picks Zeus's class, as Zeus picks
it by NVML's code. Errors of other backends (simulated, replayed) and untagged ones are classed
by their zeus-nb type. The message stays zeus-nb's: it says what to do.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

import zeus_nb.device.gpu.common as c
from zeus_nb.device.exception import ZeusBaseGPUError
from zeus_nb.errors import DeviceError, NoGPUError, UnsupportedError, ZeusNbError

F = TypeVar("F", bound=Callable)

#: NVML error code name -> Zeus's error class.
NVML_ERRORS: dict[str, type[ZeusBaseGPUError]] = {
    "NVML_ERROR_UNINITIALIZED": c.ZeusGPUInitError,
    "NVML_ERROR_INVALID_ARGUMENT": c.ZeusGPUInvalidArgError,
    "NVML_ERROR_NOT_SUPPORTED": c.ZeusGPUNotSupportedError,
    "NVML_ERROR_NO_PERMISSION": c.ZeusGPUNoPermissionError,
    "NVML_ERROR_ALREADY_INITIALIZED": c.ZeusGPUAlreadyInitializedError,
    "NVML_ERROR_NOT_FOUND": c.ZeusGPUNotFoundError,
    "NVML_ERROR_INSUFFICIENT_SIZE": c.ZeusGPUInsufficientSizeError,
    "NVML_ERROR_INSUFFICIENT_POWER": c.ZeusGPUInsufficientPowerError,
    "NVML_ERROR_DRIVER_NOT_LOADED": c.ZeusGPUDriverNotLoadedError,
    "NVML_ERROR_TIMEOUT": c.ZeusGPUTimeoutError,
    "NVML_ERROR_IRQ_ISSUE": c.ZeusGPUIRQError,
    "NVML_ERROR_LIBRARY_NOT_FOUND": c.ZeusGPULibraryNotFoundError,
    "NVML_ERROR_FUNCTION_NOT_FOUND": c.ZeusGPUFunctionNotFoundError,
    "NVML_ERROR_CORRUPTED_INFOROM": c.ZeusGPUCorruptedInfoROMError,
    "NVML_ERROR_GPU_IS_LOST": c.ZeusGPULostError,
    "NVML_ERROR_RESET_REQUIRED": c.ZeusGPUResetRequiredError,
    "NVML_ERROR_OPERATING_SYSTEM": c.ZeusGPUOperatingSystemError,
    "NVML_ERROR_LIB_RM_VERSION_MISMATCH": c.ZeusGPULibRMVersionMismatchError,
    "NVML_ERROR_MEMORY": c.ZeusGPUMemoryError,
    "NVML_ERROR_UNKNOWN": c.ZeusGPUUnknownError,
}

#: zeus-nb error type -> Zeus's error class, first match wins (for untagged errors).
BY_TYPE: tuple[tuple[type[Exception], type[ZeusBaseGPUError]], ...] = (
    (PermissionError, c.ZeusGPUNoPermissionError),
    (UnsupportedError, c.ZeusGPUNotSupportedError),
    (NoGPUError, c.ZeusGPUInitError),
    (ValueError, c.ZeusGPUInvalidArgError),
    (DeviceError, c.ZeusGPUUnknownError),
)


def zeus_error(err: Exception) -> ZeusBaseGPUError:
    """Zeus's error for ``err`` with the same message (``err`` itself if already Zeus's)."""
    if isinstance(err, ZeusBaseGPUError):
        return err
    cls = NVML_ERRORS.get(getattr(err, "nvml_error", None) or "")
    if cls is None:
        cls = next((z for t, z in BY_TYPE if isinstance(err, t)), c.ZeusGPUUnknownError)
    return cls(str(err))


def zeus_errors(fn: F) -> F:
    """Decorator: zeus-nb errors (and ValueErrors) raised by ``fn`` leave as Zeus's classes."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ZeusBaseGPUError:
            raise
        except (ZeusNbError, ValueError) as e:
            raise zeus_error(e) from e

    return wrapper  # type: ignore[return-value]
