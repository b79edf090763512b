"""Zeus's AMD GPU classes, read and set through ROCm's ``amdsmi`` Python library.

zeus-nb's own backends (``zeus_nb.device.current()``, ``ZeusMonitor``'s default) are NVML and the
simulated GPU; these classes are for Zeus code that asks for AMD GPUs by name. ``amdsmi`` is
looked up each time it is needed, not when this module is imported, so installing it later (or
a test putting a stand-in into ``sys.modules``) takes effect at once. Without it, constructing
:class:`AMDGPU` or :class:`AMDGPUs` raises :class:`AMDUnsupportedError` (a ``ZeusGPUInitError``
to Zeus code) saying what to install or use instead, and :func:`amdsmi_is_available` is False.

Indices are HIP indices, what PyTorch calls ``cuda:N``: ``amdsmi`` numbers GPUs by PCI bus
instead, and the two orders differ on some machines, so each HIP index is matched to its
``amdsmi`` handle by the ``hip_id`` ``amdsmi`` reports for it. ``HIP_VISIBLE_DEVICES`` (else
``CUDA_VISIBLE_DEVICES``) picks and renumbers the GPUs :class:`AMDGPUs` tracks, as HIP does.

Power limits and clock ranges changed through these classes are put back at interpreter exit
(not after SIGKILL). Units are Zeus's: mW, mJ, MHz, degrees Celsius.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import importlib
import io
import logging
import os
import time
from collections.abc import Sequence
from typing import Any

import zeus_nb.device.gpu.common as c
from zeus_nb.errors import UnsupportedError
from zeus_nb.inputs.registry import environ_read

__all__ = ["AMDGPU", "AMDGPUs", "AMDUnsupportedError", "amdsmi_is_available"]

log = logging.getLogger(__name__)

INSTALL = (
    "zeus-nb reads AMD GPUs through ROCm's amdsmi Python package (ROCm 6.2 or newer: pip install "
    "/opt/rocm/share/amd_smi, or your ROCm's python3-amdsmi); without an AMD GPU use "
    "zeus_nb.device.get_gpus(), which reads NVIDIA GPUs or simulates one (ZEUS_NB_BACKEND=sim)"
)

# amdsmi's status codes (amdsmi_status_t) -> Zeus's error classes; others are ZeusGPUUnknownError.
STATUS_ERRORS: dict[int, type[c.ZeusBaseGPUError]] = {
    1: c.ZeusGPUInvalidArgError,  # AMDSMI_STATUS_INVAL
    2: c.ZeusGPUNotSupportedError,  # AMDSMI_STATUS_NOT_SUPPORTED
    8: c.ZeusGPUTimeoutError,  # AMDSMI_STATUS_TIMEOUT
    10: c.ZeusGPUNoPermissionError,  # AMDSMI_STATUS_NO_PERM
    15: c.ZeusGPUMemoryError,  # AMDSMI_STATUS_OUT_OF_RESOURCES
    18: c.ZeusGPUInitError,  # AMDSMI_STATUS_INIT_ERROR
    31: c.ZeusGPUNotFoundError,  # AMDSMI_STATUS_NOT_FOUND
    32: c.ZeusGPUInitError,  # AMDSMI_STATUS_NOT_INIT
    34: c.ZeusGPUDriverNotLoadedError,  # AMDSMI_STATUS_DRIVER_NOT_LOADED
    41: c.ZeusGPUInsufficientSizeError,  # AMDSMI_STATUS_INSUFFICIENT_SIZE
}

ENERGY_CHECK_S = 0.5  # how long AMDGPUs watches each energy counter before trusting it


class AMDUnsupportedError(c.ZeusGPUInitError, UnsupportedError):
    """``amdsmi`` is not installed or cannot load: AMD GPUs cannot be read here."""


def _amdsmi() -> Any:
    """The ``amdsmi`` module as it is now, or :class:`AMDUnsupportedError` saying what to do."""
    try:
        with contextlib.redirect_stdout(io.StringIO()) as said:  # it prints when its library
            module = importlib.import_module("amdsmi")  # is missing; kept for the log
    except ImportError as e:
        raise AMDUnsupportedError(f"amdsmi is not installed ({e}): {INSTALL}") from e
    except (OSError, AttributeError, KeyError) as e:
        raise AMDUnsupportedError(
            f"amdsmi is installed but cannot load ({type(e).__name__}: {e}): is ROCm installed "
            "(ROCM_PATH), and is amdsmi's version at least ROCm's?"
        ) from e
    if said.getvalue().strip():
        log.debug("amdsmi said on import: %s", said.getvalue().strip())
    return module


def _init(lib: Any) -> None:
    lib.amdsmi_init(lib.AmdSmiInitFlags.INIT_AMD_GPUS)


def _zeus_error(e: Exception) -> c.ZeusBaseGPUError:
    """Zeus's error for an ``amdsmi`` exception, keeping its code and text."""
    code = e.get_error_code() if hasattr(e, "get_error_code") else None
    info = e.get_error_info() if hasattr(e, "get_error_info") else str(e)
    cls = (
        STATUS_ERRORS.get(code, c.ZeusGPUUnknownError)
        if isinstance(code, int)
        else c.ZeusGPUUnknownError
    )
    return cls(f"amdsmi error {code}: {info}")


def _amd_errors(method):
    """Decorator: ``amdsmi``'s exceptions leave a method as Zeus's GPU errors."""

    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        lib = _amdsmi()
        try:
            return method(*args, **kwargs)
        except lib.AmdSmiLibraryException as e:
            raise _zeus_error(e) from e

    return wrapper


def amdsmi_is_available() -> bool:
    """Whether ``amdsmi`` imports and initialises (never raises; not cached)."""
    try:
        lib = _amdsmi()
    except AMDUnsupportedError as e:
        log.info("AMD GPUs cannot be read: %s", e)
        return False
    try:
        _init(lib)
    except lib.AmdSmiLibraryException as e:
        log.info("amdsmi is installed but does not initialise: %s", e)
        return False
    return True


@environ_read("HIP_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES, parsed there")
def visible_hip_indices(count: int) -> list[int]:
    """HIP indices of the GPUs this process sees: ``HIP_VISIBLE_DEVICES``, else
    ``CUDA_VISIBLE_DEVICES`` (as ROCm's PyTorch reads it), else all ``count``."""
    for name in ("HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        value = os.environ.get(name)
        if value is None:
            continue
        try:
            indices = [int(item) for item in value.split(",")]
        except ValueError:
            raise c.ZeusGPUInitError(
                f"{name}={value!r}: AMD GPUs are chosen by comma-separated HIP indices (e.g. "
                f"0,2); unset {name} to use every GPU"
            ) from None
        return indices
    return list(range(count))


class AMDGPU(c.GPU):
    """One AMD GPU by its HIP index."""

    def __init__(self, gpu_index: int) -> None:
        super().__init__(gpu_index)
        self._supports_get_total_energy_consumption = True
        self._supports_instant_power_usage = True
        self._supports_average_power_usage = True
        self._originals: dict[str, Any] = {}
        self._get_handle()

    @_amd_errors
    def _get_handle(self) -> None:
        lib = _amdsmi()
        _init(lib)  # as AMDGPUs does, so that a lone AMDGPU works too
        by_hip = {
            lib.amdsmi_get_gpu_enumeration_info(h)["hip_id"]: h
            for h in lib.amdsmi_get_processor_handles()
        }
        if self.gpu_index not in by_hip:
            raise c.ZeusGPUNotFoundError(
                f"no AMD GPU with HIP index {self.gpu_index}; the HIP indices here are "
                f"{sorted(by_hip)} (HIP_VISIBLE_DEVICES renumbers them from 0 in PyTorch, "
                "not for amdsmi)"
            )
        self.handle = by_hip[self.gpu_index]

    # --- putting settings back ------------------------------------------------------------------
    def _remember(self, kind: str, original: Any) -> None:
        """Note ``kind``'s value before the first change; restored at exit."""
        if not self._originals:
            atexit.register(self.restore_settings)
        self._originals.setdefault(kind, original)

    def restore_settings(self) -> None:
        """Put back the power limit and clock ranges changed through this object (at exit too)."""
        originals, self._originals = self._originals, {}
        atexit.unregister(self.restore_settings)
        for kind, original in originals.items():
            try:
                if kind == "power_cap_uw":
                    _amdsmi().amdsmi_set_power_cap(self.handle, 0, int(original))
                else:
                    self._set_clock_range(kind, *original)
            except Exception as e:  # keep restoring the others
                log.warning("AMD GPU %d: could not restore %s: %s", self.gpu_index, kind, e)

    # --- reading ----------------------------------------------------------------------------------
    @property
    def supports_nonblocking_setters(self) -> bool:
        return False

    @_amd_errors
    def get_name(self) -> str:
        return _amdsmi().amdsmi_get_gpu_asic_info(self.handle)["market_name"]

    def _power_caps(self) -> dict[str, int]:
        """amdsmi's power cap information in uW."""
        return _amdsmi().amdsmi_get_power_cap_info(self.handle)

    @_amd_errors
    def get_power_management_limit_constraints(self) -> tuple[int, int]:
        info = self._power_caps()
        return int(info["min_power_cap"]) // 1000, int(info["max_power_cap"]) // 1000

    @_amd_errors
    def get_power_management_limit(self) -> int:
        return int(self._power_caps()["power_cap"]) // 1000

    @_amd_errors
    def set_power_management_limit(self, power_limit_mw: int, block: bool = True) -> None:
        """Set the power cap in mW (a no-op when already set); put back at exit."""
        info = self._power_caps()
        if int(info["power_cap"]) // 1000 == power_limit_mw:
            return
        lo, hi = int(info["min_power_cap"]) // 1000, int(info["max_power_cap"]) // 1000
        if not lo <= power_limit_mw <= hi:
            raise c.ZeusGPUInvalidArgError(
                f"AMD GPU {self.gpu_index}: power limit {power_limit_mw} mW is outside "
                f"[{lo}, {hi}] mW; Zeus's API takes mW"
            )
        self._warn_sys_admin()
        self._remember("power_cap_uw", int(info["power_cap"]))
        _amdsmi().amdsmi_set_power_cap(self.handle, 0, int(power_limit_mw) * 1000)

    @_amd_errors
    def reset_power_management_limit(self, block: bool = True) -> None:
        default = int(self._power_caps()["default_power_cap"]) // 1000
        self.set_power_management_limit(default, block)

    def set_persistence_mode(self, enabled: bool, block: bool = True) -> None:
        raise c.ZeusGPUNotSupportedError("AMD GPUs have no persistence mode (amdsmi sets none)")

    def get_persistence_mode(self) -> bool:
        raise c.ZeusGPUNotSupportedError("AMD GPUs have no persistence mode (amdsmi reads none)")

    def _clock_limits(self, kind: str) -> tuple[int, int]:
        lib = _amdsmi()
        info = lib.amdsmi_get_clock_info(self.handle, getattr(lib.AmdSmiClkType, kind))
        return int(info["min_clk"]), int(info["max_clk"])

    def _set_clock_range(self, kind: str, lo: int, hi: int) -> None:
        lib = _amdsmi()
        lib.amdsmi_set_gpu_clk_range(self.handle, lo, hi, clk_type=getattr(lib.AmdSmiClkType, kind))

    def _lock(self, kind: str, lo: int, hi: int) -> None:
        if lo > hi:
            raise c.ZeusGPUInvalidArgError(f"clock range [{lo}, {hi}] MHz: the minimum is larger")
        self._warn_sys_admin()
        self._remember(kind, self._clock_limits(kind))
        self._set_clock_range(kind, lo, hi)

    def _unlock(self, kind: str) -> None:
        """Back to the range before the first lock through this object, else amdsmi's."""
        self._warn_sys_admin()
        original = self._originals.pop(kind, None)
        self._set_clock_range(kind, *(original or self._clock_limits(kind)))

    @_amd_errors
    def get_supported_memory_clocks(self) -> list[int]:
        """amdsmi reports a range, not a list: its (maximum, minimum) in MHz."""
        lo, hi = self._clock_limits("MEM")
        return [hi, lo]

    @_amd_errors
    def set_memory_locked_clocks(
        self, min_clock_mhz: int, max_clock_mhz: int, block: bool = True
    ) -> None:
        self._lock("MEM", min_clock_mhz, max_clock_mhz)

    @_amd_errors
    def reset_memory_locked_clocks(self, block: bool = True) -> None:
        self._unlock("MEM")

    @_amd_errors
    def get_supported_graphics_clocks(self, memory_clock_mhz: int | None = None) -> list[int]:
        """(maximum, minimum) graphics clock in MHz, whatever the memory clock."""
        lo, hi = self._clock_limits("GFX")
        return [hi, lo]

    @_amd_errors
    def set_gpu_locked_clocks(
        self, min_clock_mhz: int, max_clock_mhz: int, block: bool = True
    ) -> None:
        self._lock("GFX", min_clock_mhz, max_clock_mhz)

    @_amd_errors
    def reset_gpu_locked_clocks(self, block: bool = True) -> None:
        self._unlock("GFX")

    def _socket_power_w(self, field: str, supported: bool, other: str) -> int:
        if supported:
            value = _amdsmi().amdsmi_get_power_info(self.handle)[field]
            if isinstance(value, int):
                return value
        raise c.ZeusGPUNotSupportedError(
            f"AMD GPU {self.gpu_index}: amdsmi reports no {field} here; use {other} instead"
        )

    @_amd_errors
    def get_average_power_usage(self) -> int:
        watts = self._socket_power_w(
            "average_socket_power", self._supports_average_power_usage, "get_instant_power_usage"
        )
        return watts * 1000

    @_amd_errors
    def get_instant_power_usage(self) -> int:
        watts = self._socket_power_w(
            "current_socket_power", self._supports_instant_power_usage, "get_average_power_usage"
        )
        return watts * 1000

    def get_average_memory_power_usage(self) -> int:
        raise c.ZeusGPUNotSupportedError("amdsmi reports no memory power for AMD GPUs")

    def supports_get_total_energy_consumption(self) -> bool:
        return self._supports_get_total_energy_consumption

    @_amd_errors
    def get_total_energy_consumption(self) -> int:
        """The energy counter in mJ (counter ticks times their resolution in uJ)."""
        if not self._supports_get_total_energy_consumption:
            raise c.ZeusGPUNotSupportedError(
                f"AMD GPU {self.gpu_index}: its energy counter disagrees with its power reading "
                "(a known amdsmi issue on some GPUs) or cannot be checked; ZeusMonitor "
                "integrates power instead"
            )
        counter = _amdsmi().amdsmi_get_energy_count(self.handle)
        ticks = counter.get("energy_accumulator", counter.get("power"))  # "power" before 6.2.1
        return int(ticks * counter["counter_resolution"] / 1000)

    @_amd_errors
    def get_gpu_temperature(self) -> int:
        """The hotspot (junction) temperature, the one closest to the cores under load."""
        lib = _amdsmi()
        millidegrees = lib.amdsmi_get_temp_metric(
            self.handle, lib.AmdSmiTemperatureType.HOTSPOT, lib.AmdSmiTemperatureMetric.CURRENT
        )
        return int(millidegrees) // 1000


class AMDGPUs(c.GPUs):
    """The AMD GPUs this process sees (``HIP_VISIBLE_DEVICES``), numbered from 0 as in PyTorch.

    Each GPU's energy counter is checked against its power for ``ENERGY_CHECK_S`` at start: one
    off by more than 10x, or on a GPU that reports no power, is not used
    (``supports_get_total_energy_consumption`` False).
    """

    def __init__(self, ensure_homogeneous: bool = False) -> None:
        lib = _amdsmi()
        try:
            _init(lib)
            count = len(lib.amdsmi_get_processor_handles())
            self._gpus = [AMDGPU(i) for i in visible_hip_indices(count)]
            for gpu in self._gpus:
                power = lib.amdsmi_get_power_info(gpu.handle)
                gpu._supports_instant_power_usage = isinstance(power["current_socket_power"], int)
                gpu._supports_average_power_usage = isinstance(power["average_socket_power"], int)
            self._check_energy_counters()
            if ensure_homogeneous:
                self._ensure_homogeneous()
        except lib.AmdSmiLibraryException as e:
            raise _zeus_error(e) from e

    @property
    def gpus(self) -> Sequence[AMDGPU]:
        return self._gpus

    def _power_mw(self, gpu: AMDGPU) -> int:
        for read in (gpu.get_average_power_usage, gpu.get_instant_power_usage):
            with contextlib.suppress(c.ZeusGPUNotSupportedError):
                return read()
        return 0

    def _check_energy_counters(self) -> None:
        powers = [self._power_mw(gpu) for gpu in self._gpus]
        before = [gpu.get_total_energy_consumption() for gpu in self._gpus]
        time.sleep(ENERGY_CHECK_S)
        after = [gpu.get_total_energy_consumption() for gpu in self._gpus]
        for gpu, mw, e0, e1 in zip(self._gpus, powers, before, after, strict=True):
            expected_mj = mw * ENERGY_CHECK_S
            ok = expected_mj >= 0.001 and 0.1 < (e1 - e0) / expected_mj < 10
            gpu._supports_get_total_energy_consumption = ok
            if not ok:
                log.info(
                    "AMD GPU %d (%s): energy counter not used (%d mJ counted, %.0f mJ expected "
                    "from its power); energy is integrated from power instead",
                    gpu.gpu_index,
                    gpu.get_name(),
                    e1 - e0,
                    expected_mj,
                )

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            _amdsmi().amdsmi_shut_down()
