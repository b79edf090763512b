"""NVML's errors as Zeus's GPU error classes, with zeus-nb's messages: the one place they map.

:func:`nvml_error` turns an ``NVMLError`` into the Zeus class for its code (as Zeus picks it)
whose message says what to do: no driver -> use the simulated GPU, no permission -> how to get
SYS_ADMIN. Every Zeus class is also the matching zeus-nb error (see
:mod:`zeus_nb.device.gpu.common`). :func:`zeus_error` gives any other zeus-nb error its Zeus
class, for code that wraps a device call of its own.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

import zeus_nb.device.gpu.common as c
from zeus_nb.device.exception import ZeusBaseGPUError
from zeus_nb.errors import (
    NO_DRIVER_HINT,
    NO_PERMISSION_HINT,
    DeviceError,
    NoGPUError,
    UnsupportedError,
    ZeusNbError,
)

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


def nvml_code_name(nv, err: Exception) -> str | None:
    """The ``NVML_ERROR_*`` name of ``err``'s code in the pynvml module ``nv`` (None if none)."""
    value = getattr(err, "value", None)
    for name in NVML_ERRORS:
        if getattr(nv, name, None) == value and isinstance(value, int):
            return name
    return None


def nvml_error(nv, err: Exception, what: str, setting: str | None = None) -> ZeusBaseGPUError:
    """Zeus's error for the ``NVMLError`` ``err`` raised while doing ``what``.

    ``setting`` names what a missing privilege kept from changing (default: power limits); a
    setting other than power limits gets :class:`ZeusGPUClockPermissionError`.
    """
    name = nvml_code_name(nv, err)
    cls = NVML_ERRORS.get(name or "", c.ZeusGPUUnknownError)
    if name in ("NVML_ERROR_LIBRARY_NOT_FOUND", "NVML_ERROR_DRIVER_NOT_LOADED"):
        out = cls(NO_DRIVER_HINT)
    elif name == "NVML_ERROR_NO_PERMISSION":
        if setting is not None:
            cls = c.ZeusGPUClockPermissionError
            out = cls(f"{what}: {NO_PERMISSION_HINT.replace('power limits', setting)}")
        else:
            out = cls(f"{what}: {NO_PERMISSION_HINT}")
    elif name == "NVML_ERROR_NOT_SUPPORTED":
        out = cls(f"{what}: not supported by this GPU")
    else:
        out = cls(f"{what}: NVML error: {err}")
    out.nvml_error = name  # type: ignore[attr-defined]
    return out


#: zeus-nb error type -> Zeus's error class, first match wins.
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
