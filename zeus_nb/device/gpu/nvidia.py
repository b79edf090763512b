"""Real NVIDIA GPUs through NVML: Zeus's :class:`NVIDIAGPU` and :class:`NVIDIAGPUs`.

This is the only module of zeus-nb that calls NVML, through the name ``pynvml`` bound here, as
Zeus does, so ``mock.patch("zeus_nb.device.gpu.nvidia.pynvml")`` reaches every NVML call. That name
is :mod:`zeus_nb.device.gpu.nvml`, the NVML names zeus-nb uses, looked up in nvidia-ml-py's
``pynvml`` at each use. Units are NVML's and Zeus's (mW, mJ, MHz); zeus-nb's helpers in W and J
come from :class:`zeus_nb.device.base.GPU`. NVML errors become Zeus's classes with messages that
say what to do (:func:`zeus_nb.device.gpu.translate.nvml_error`). :class:`NVIDIAGPUs` numbers GPUs
as CUDA does (``CUDA_VISIBLE_DEVICES`` by index or UUID). Like every GPU class, their public
methods check numeric arguments (:func:`zeus_nb.inputs.api.checked_methods`) before NVML sees
them: a NaN or text clock is our error, never NVML's ``InvalidArgument``.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import time
import warnings
from collections.abc import Callable

from zeus_nb.device.base import FROM_ENV, GPU, GPUSystem
from zeus_nb.device.common import CAP_SYS_ADMIN, has_sys_admin  # noqa: F401 - tests patch it here
from zeus_nb.device.gpu import nvml as pynvml
from zeus_nb.device.gpu.access import Access, can_change, change, probe, said
from zeus_nb.device.gpu.common import (
    ZeusGPUFunctionNotFoundError,
    ZeusGPUInitError,
    ZeusGPUNotSupportedError,
)
from zeus_nb.device.gpu.translate import nvml_error
from zeus_nb.device.gpu.zeusd import ZeusdSettersMixin
from zeus_nb.device.guard import SettingsGuard
from zeus_nb.device.sampling import PowerIntegrator, ThreadSampler  # noqa: F401 - old path
from zeus_nb.errors import ZeusNbError
from zeus_nb.inputs.api import checked_methods
from zeus_nb.inputs.registry import environ_read

__all__ = [
    "FROM_ENV",
    "NVIDIAGPU",
    "NVIDIAGPUs",
    "ZeusdNVIDIAGPU",
    "nvml_is_available",
    "visible_nvml_indices",
]

log = logging.getLogger(__name__)


def nvml_is_available() -> bool:
    """Whether NVML starts and lists at least one visible GPU (never raises)."""
    try:
        NVIDIAGPUs()
    except (ZeusNbError, ImportError) as e:
        log.info("NVML is not usable: %s", e)
        return False
    return True


def _nvml(what: str | Callable[..., str], setting: str | None = None):
    """Decorator: an ``NVMLError`` leaves the method as Zeus's class, naming the GPU and ``what``
    (a text, or a function of the method's arguments that builds one)."""

    def decorate(method):
        @functools.wraps(method)
        def wrapper(self, *args, **kwargs):
            try:
                return method(self, *args, **kwargs)
            except pynvml.NVMLError as e:
                text = what(*args, **kwargs) if callable(what) else what
                raise nvml_error(pynvml, e, f"GPU {self.index}: {text}", setting) from e

        return wrapper

    return decorate


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@checked_methods
class NVIDIAGPU(GPU):
    """One NVIDIA GPU: ``gpu_index`` is its NVML index, ``index`` its CUDA index.

    Constructed alone (Zeus's way) it opens NVML and ``index`` is the NVML index:
    ``CUDA_VISIBLE_DEVICES`` does not apply; :class:`NVIDIAGPUs` applies it.
    """

    backend = "nvml"
    settings_guard = SettingsGuard

    def __init__(self, gpu_index: int, *, index: int | None = None, handle=None) -> None:
        super().__init__(gpu_index, index)
        if handle is None:
            try:
                pynvml.nvmlInit()
                handle = pynvml.nvmlDeviceGetHandleByIndex(gpu_index)
            except pynvml.NVMLError as e:
                raise nvml_error(pynvml, e, f"opening GPU {gpu_index}") from e
        self.handle = handle
        self._supportsGetTotalEnergyConsumption: bool | None = None
        self._grace_hopper: bool | None = None
        self._no_instant = False  # the driver answered that it has no instant power field
        # NVML cannot report locked clocks: this process's own locks, None when unlocked by it.
        self._locked: tuple[int, int] | None = None
        # Who changes this GPU's settings, found by the first setter (None: none ran yet).
        self._access: Access | None = None

    @_nvml("reading the name")
    def get_name(self) -> str:
        return _text(pynvml.nvmlDeviceGetName(self.handle))

    @_nvml("reading power-limit constraints")
    def get_power_management_limit_constraints(self) -> tuple[int, int]:
        lo, hi = pynvml.nvmlDeviceGetPowerManagementLimitConstraints(self.handle)
        return lo, hi

    @_nvml("reading the power limit")
    def get_power_management_limit(self) -> int:
        return pynvml.nvmlDeviceGetPowerManagementLimit(self.handle)

    @_nvml("reading the default power limit")
    def get_default_power_management_limit(self) -> int:
        return pynvml.nvmlDeviceGetPowerManagementDefaultLimit(self.handle)

    def _write_power_limit(self, power_limit_mw: int, ask_only: bool = False) -> None:
        """``ask_only``: the limit the GPU has, written to learn who may change it (a probe)."""
        what = lambda: f"setting the power limit to {power_limit_mw / 1000:g} W"  # noqa: E731
        nvml = ("SetPowerManagementLimit", power_limit_mw)
        self._change(what, nvml, ("set_power_limit", power_limit_mw, True), ask_only=ask_only)

    # --- who changes settings: this process, zeusd for it, or nobody (read-only) ------------
    def _change(self, what, nvml: tuple, zeusd: tuple, setting=None, ask_only=False) -> None:
        """NVML's ``nvmlDevice<nvml[0]>(handle, *nvml[1:])``, or the zeusd client's
        ``<zeusd[0]>([gpu_index], *zeusd[1:])`` once NVML refused one (:func:`change`);
        ``what`` (text, or a function that builds it) names the change in messages."""
        name, *args = nvml

        def attempt() -> None:
            try:
                getattr(pynvml, f"nvmlDevice{name}")(self.handle, *args)
            except pynvml.NVMLError as e:
                raise nvml_error(pynvml, e, f"GPU {self.index}: {said(what)}", setting) from e

        call = lambda client, ids: getattr(client, zeusd[0])(ids, *zeusd[1:])  # noqa: E731
        change(self, what, attempt, call, setting, ask_only)

    def settings_access(self) -> Access:
        return probe(self)

    def can_set_power_limit(self) -> tuple[bool, str]:
        return can_change(self, has_sys_admin())

    # --- energy and power -------------------------------------------------------------------
    @_nvml("reading the architecture")
    def _architecture(self) -> int:
        return pynvml.nvmlDeviceGetArchitecture(self.handle)

    def supports_get_total_energy_consumption(self) -> bool:
        """Whether the GPU has an energy counter: Volta and newer (by its architecture)."""
        if self._supportsGetTotalEnergyConsumption is None:
            try:
                supported = self._architecture() >= pynvml.NVML_DEVICE_ARCH_VOLTA
            except (ZeusGPUNotSupportedError, ZeusGPUFunctionNotFoundError):
                # no architecture to go by: ask the counter itself
                try:
                    self.get_total_energy_consumption()
                    supported = True
                except ZeusGPUNotSupportedError:
                    supported = False
            self._supportsGetTotalEnergyConsumption = supported
        return self._supportsGetTotalEnergyConsumption

    def _no_energy_counter(self) -> None:
        self._supportsGetTotalEnergyConsumption = False

    def get_total_energy_consumption(self) -> int:
        try:
            return self._counter()
        except ZeusGPUNotSupportedError as e:
            raise ZeusGPUNotSupportedError(
                f"GPU {self.index} ({self.name}) has no energy counter (NVIDIA: Volta and newer "
                "have one); measure with zeus_nb.monitor.ZeusMonitor, which integrates power there"
            ) from e

    @_nvml("reading the energy counter")
    def _counter(self) -> int:
        return pynvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)

    def counter_reader(self) -> Callable[[], int]:
        """NVML's counter read straight on the handle (no Python frame in between): its errors
        are NVML's; :meth:`get_total_energy_consumption` gives them Zeus's class and advice."""
        return functools.partial(pynvml.nvmlDeviceGetTotalEnergyConsumption, self.handle)

    def power_reader(self) -> Callable[[], float]:
        """Instant power (W) in one frame, errors as counter_reader's: the instant field, as Zeus
        reads (nvmlDeviceGetPowerUsage, a 1 s average on Ampere and newer: docs/real_gpus.md)."""
        try:
            self._instant()
        except ZeusNbError:
            return lambda read=pynvml.nvmlDeviceGetPowerUsage, h=self.handle: read(h) / 1000.0
        fields = [(pynvml.NVML_FI_DEV_POWER_INSTANT, self._scope())]

        def read(get=pynvml.nvmlDeviceGetFieldValues, h=self.handle) -> float:
            (value,) = get(h, fields)
            if value.nvmlReturn:  # not NVML_SUCCESS (0)
                raise pynvml.NVMLError(value.nvmlReturn)
            return value.value.uiVal / 1000.0

        return read

    @_nvml("reading power")
    def get_power_usage(self) -> int:
        return pynvml.nvmlDeviceGetPowerUsage(self.handle)

    def _scope(self) -> int | None:
        """The power scope of board readings: the module on Grace Hopper, else the GPU."""
        if self._grace_hopper is None:
            info = getattr(pynvml, "nvmlDeviceGetC2cModeInfoV", None)
            try:
                self._grace_hopper = bool(info is not None and info(self.handle).isC2cEnabled)
            except pynvml.NVMLError:
                self._grace_hopper = False
        name = "NVML_POWER_SCOPE_MODULE" if self._grace_hopper else "NVML_POWER_SCOPE_GPU"
        return getattr(pynvml, name, None)

    def _field_power(self, field_name: str, scope: int | None, domain: str) -> int:
        """A power field in mW from ``nvmlDeviceGetFieldValues`` (Zeus's not-supported if not)."""
        field = getattr(pynvml, field_name, None)
        if field is None or scope is None or not hasattr(pynvml, "nvmlDeviceGetFieldValues"):
            raise ZeusGPUNotSupportedError(f"GPU {self.index}: this pynvml cannot read {domain}")
        (value,) = pynvml.nvmlDeviceGetFieldValues(self.handle, [(field, scope)])
        if value.nvmlReturn != getattr(pynvml, "NVML_SUCCESS", 0):
            raise pynvml.NVMLError(value.nvmlReturn)
        return value.value.uiVal

    def get_instant_power_usage(self) -> int:
        """Instant power in mW; where the driver has no such field (asked once, not at every
        sample), nvmlDeviceGetPowerUsage."""
        if not self._no_instant:
            try:
                return self._instant()
            except ZeusGPUNotSupportedError:
                self._no_instant = True
        return self.get_power_usage()

    @_nvml("reading instant power")
    def _instant(self) -> int:
        return self._field_power("NVML_FI_DEV_POWER_INSTANT", self._scope(), "instant power")

    @_nvml("reading average power")
    def get_average_power_usage(self) -> int:
        return self._field_power("NVML_FI_DEV_POWER_AVERAGE", self._scope(), "average power")

    @_nvml("reading memory power")
    def get_average_memory_power_usage(self) -> int:
        scope = getattr(pynvml, "NVML_POWER_SCOPE_MEMORY", None)
        power = self._field_power("NVML_FI_DEV_POWER_AVERAGE", scope, "memory power")
        if power == 0:
            warnings.warn(
                f"GPU {self.index}: NVML reports 0 mW of memory power; this GPU may not measure "
                "it (an H100 does, an A40 does not)",
                stacklevel=2,
            )
        return power

    @_nvml("reading the temperature")
    def get_gpu_temperature(self) -> int:
        return int(pynvml.nvmlDeviceGetTemperature(self.handle, pynvml.NVML_TEMPERATURE_GPU))

    # --- clocks and persistence mode --------------------------------------------------------
    @_nvml("reading memory clocks", "clocks")
    def get_supported_memory_clocks(self) -> list[int]:
        return list(pynvml.nvmlDeviceGetSupportedMemoryClocks(self.handle))

    @_nvml("reading SM clocks", "clocks")
    def get_supported_graphics_clocks(self, memory_clock_mhz: int | None = None) -> list[int]:
        """SM clocks at ``memory_clock_mhz`` (default: the highest memory clock)."""
        if memory_clock_mhz is None:
            memory = self.get_supported_memory_clocks()
            if not memory:
                raise ZeusGPUNotSupportedError(f"GPU {self.index}: NVML lists no memory clock")
            memory_clock_mhz = max(memory)
        return list(pynvml.nvmlDeviceGetSupportedGraphicsClocks(self.handle, memory_clock_mhz))

    def set_memory_locked_clocks(
        self, min_clock_mhz: int, max_clock_mhz: int, block: bool = True
    ) -> None:
        self._warn_sys_admin()
        what = f"locking memory clocks to {min_clock_mhz}-{max_clock_mhz} MHz"
        lock = ("SetMemoryLockedClocks", min_clock_mhz, max_clock_mhz)
        self._change(what, lock, ("set_mem_locked_clocks", *lock[1:], block), "clocks")

    def reset_memory_locked_clocks(self, block: bool = True) -> None:
        self._warn_sys_admin()
        what, zeusd = "resetting locked memory clocks", ("reset_mem_locked_clocks", block)
        self._change(what, ("ResetMemoryLockedClocks",), zeusd, "clocks")

    def _write_locked_clocks(self, min_mhz: int, max_mhz: int) -> None:
        what, lock = f"locking SM clocks to {min_mhz}-{max_mhz} MHz", (min_mhz, max_mhz)
        self._change(
            what, ("SetGpuLockedClocks", *lock), ("set_gpu_locked_clocks", *lock, True), "clocks"
        )
        self._locked = (int(min_mhz), int(max_mhz))

    def _write_reset_locked_clocks(self) -> None:
        what, zeusd = "resetting locked SM clocks", ("reset_gpu_locked_clocks", True)
        self._change(what, ("ResetGpuLockedClocks",), zeusd, "clocks")
        self._locked = None

    def locked_clocks(self) -> tuple[int, int] | None:
        """The lock this process set (NVML has no query for it); None: the driver chooses."""
        return self._locked

    @_nvml("reading persistence mode")
    def get_persistence_mode(self) -> bool:
        return pynvml.nvmlDeviceGetPersistenceMode(self.handle) == pynvml.NVML_FEATURE_ENABLED

    def set_persistence_mode(self, enabled: bool, block: bool = True) -> None:
        if self.get_persistence_mode() != bool(enabled):  # the mode it has is not a change
            self._warn_sys_admin()
            mode = pynvml.NVML_FEATURE_ENABLED if enabled else pynvml.NVML_FEATURE_DISABLED
            what = f"turning persistence mode {'on' if enabled else 'off'}"
            zeusd = ("set_persistence_mode", bool(enabled), block)
            self._change(what, ("SetPersistenceMode", mode), zeusd, "persistence mode")


@checked_methods
class ZeusdNVIDIAGPU(ZeusdSettersMixin, NVIDIAGPU):
    """An NVIDIA GPU read through NVML whose settings go through Zeus's daemon zeusd, for a
    process without SYS_ADMIN beside a root zeusd: ``ZeusdNVIDIAGPU(gpu_index, ZeusdClient)``."""


@environ_read("CUDA_VISIBLE_DEVICES, parsed there")
def visible_nvml_indices(
    count: int, cuda_visible_devices: str | None = FROM_ENV
) -> list[int | str]:
    """NVML indices (or UUIDs) of the GPUs CUDA numbers 0, 1, ... under CUDA_VISIBLE_DEVICES;
    ``cuda_visible_devices`` overrides the environment variable (None: every GPU is visible)."""
    env = cuda_visible_devices
    if env is FROM_ENV:
        env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is None:
        return list(range(count))
    out: list[int | str] = []
    for item in (s.strip() for s in env.split(",")):
        if not item:
            continue
        if item.startswith("MIG"):
            raise ZeusGPUInitError(
                f"CUDA_VISIBLE_DEVICES names a MIG slice ({item}); NVML cannot measure the power "
                "or energy of MIG slices: set CUDA_VISIBLE_DEVICES to whole GPUs (indices or "
                "GPU-... UUIDs) while measuring"
            )
        if item.isdigit():
            i = int(item)
            if i >= count:
                break  # CUDA stops at the first invalid entry
            out.append(i)
        else:
            out.append(item)
    return out


@checked_methods
class NVIDIAGPUs(GPUSystem):
    """The NVIDIA GPUs this process sees, numbered as CUDA numbers them (zeus-nb's NVML system).

    Args:
        ensure_homogeneous: insist the GPUs are all one model.
        cuda_visible_devices: a ``CUDA_VISIBLE_DEVICES`` value to number GPUs by (None: all of
            them); default: the environment's. ``zeus-nb restore`` passes the crashed process's.
    """

    backend = "nvml"
    windows_read_counters = True

    def __init__(
        self, ensure_homogeneous: bool = False, *, cuda_visible_devices: str | None = FROM_ENV
    ) -> None:
        self._cuda: bool | None = None  # torch.cuda.is_available(), asked once torch is in use
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as e:
            raise nvml_error(pynvml, e, "initializing NVML") from e
        gpus: list[NVIDIAGPU] = []
        try:
            count = pynvml.nvmlDeviceGetCount()
            for cuda_index, ident in enumerate(visible_nvml_indices(count, cuda_visible_devices)):
                if isinstance(ident, int):
                    handle = pynvml.nvmlDeviceGetHandleByIndex(ident)
                else:
                    handle = pynvml.nvmlDeviceGetHandleByUUID(ident)
                    get_index = getattr(pynvml, "nvmlDeviceGetIndex", None)
                    ident = get_index(handle) if get_index is not None else cuda_index
                gpus.append(NVIDIAGPU(ident, index=cuda_index, handle=handle))
        except pynvml.NVMLError as e:
            raise nvml_error(pynvml, e, "listing GPUs") from e
        if not gpus:
            raise ZeusGPUInitError(
                "NVML found no visible GPU (check CUDA_VISIBLE_DEVICES); "
                "use the simulated backend: ZEUS_NB_BACKEND=sim"
            )
        self.gpus = gpus
        if ensure_homogeneous:
            self._ensure_homogeneous()

    def clock(self) -> float:
        return time.monotonic()

    def sync(self, indices: list[int] | None = None) -> None:
        torch = sys.modules.get("torch")  # never import torch just to synchronize
        if torch is None:
            return
        if self._cuda is None:  # whether torch sees CUDA does not change within a process
            self._cuda = bool(torch.cuda.is_available())
        if not self._cuda:
            return
        for i in indices if indices is not None else [g.index for g in self.gpus]:
            torch.cuda.synchronize(i)

    def sync_function(self, indices: list[int]) -> Callable[[], None]:
        """:meth:`sync`, reduced to one dictionary lookup while torch is not imported."""
        modules, indices = sys.modules, list(indices)

        def sync() -> None:
            if modules.get("torch") is not None:
                self.sync(indices)

        return sync

    def info(self) -> dict[str, str]:
        out = {"backend": "NVML (real GPUs)"}
        for key, fn in (
            ("driver", "nvmlSystemGetDriverVersion"),
            ("nvml", "nvmlSystemGetNVMLVersion"),
        ):
            try:
                out[key] = _text(getattr(pynvml, fn)())
            except (pynvml.NVMLError, AttributeError) as e:
                out[key] = f"unknown ({e})"
        return out

    def power_sampler(self, indices: list[int], period: float) -> ThreadSampler:
        return ThreadSampler(self, indices, period)
