"""Real NVIDIA GPUs through NVML (the ``pynvml`` module of ``nvidia-ml-py``).

This is the only module in zeus-nb that imports ``pynvml``. NVML errors become zeus-nb errors whose
message says what to do. GPU indices follow CUDA's numbering: ``CUDA_VISIBLE_DEVICES`` is respected.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

from zeus_nb.device.base import GPU, GPUSystem, PowerSampler
from zeus_nb.device.common import CAP_SYS_ADMIN, has_sys_admin  # noqa: F401 - tests patch it here
from zeus_nb.device.sampling import PowerIntegrator, ThreadSampler
from zeus_nb.errors import (
    NO_DRIVER_HINT,
    NO_PERMISSION_HINT,
    ClockPermissionError,
    DeviceError,
    InputError,
    NoGPUError,
    PowerLimitPermissionError,
    UnsupportedError,
)


def _pynvml():
    import pynvml

    return pynvml


def _err_is(err: Exception, const: str) -> bool:
    return getattr(err, "value", None) == getattr(_pynvml(), const, object())


def _tagged(out: Exception, err: Exception) -> Exception:
    """``out`` with the ``NVML_ERROR_*`` name of ``err`` as ``out.nvml_error`` (else None).

    Zeus's device API (:mod:`zeus_nb.device.gpu`) picks its error class by that name.
    """
    value, nv = getattr(err, "value", None), _pynvml()
    names = (n for n in dir(nv) if n.startswith("NVML_ERROR_") and getattr(nv, n) == value)
    out.nvml_error = next(names, None)  # type: ignore[attr-defined]
    return out


def _translate(err: Exception, what: str) -> Exception:
    """Map an NVMLError to a zeus-nb error with advice."""
    if _err_is(err, "NVML_ERROR_LIBRARY_NOT_FOUND") or _err_is(err, "NVML_ERROR_DRIVER_NOT_LOADED"):
        return _tagged(NoGPUError(NO_DRIVER_HINT), err)
    if _err_is(err, "NVML_ERROR_NO_PERMISSION"):
        return _tagged(PowerLimitPermissionError(f"{what}: {NO_PERMISSION_HINT}"), err)
    if _err_is(err, "NVML_ERROR_NOT_SUPPORTED"):
        return _tagged(UnsupportedError(f"{what}: not supported by this GPU"), err)
    return _tagged(DeviceError(f"{what}: NVML error: {err}"), err)


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class NvmlGPU(GPU):
    def __init__(self, index: int, handle):
        self.index = index
        self.handle = handle
        self._integrator: PowerIntegrator | None = None
        self._counter: bool | None = None
        # NVML cannot report locked clocks: this process's own locks, None when unlocked by it.
        self._locked: tuple[int, int] | None = None

    def _call(self, what: str, fn, *args):
        try:
            return fn(self.handle, *args)
        except _pynvml().NVMLError as e:
            raise _translate(e, f"GPU {self.index}: {what}") from e

    @property
    def name(self) -> str:
        return _text(self._call("reading the name", _pynvml().nvmlDeviceGetName))

    def power_limit_constraints(self) -> tuple[float, float]:
        lo, hi = self._call(
            "reading power-limit constraints",
            _pynvml().nvmlDeviceGetPowerManagementLimitConstraints,
        )
        return lo / 1000.0, hi / 1000.0

    def default_power_limit(self) -> float:
        nv = _pynvml()
        return (
            self._call("reading the default limit", nv.nvmlDeviceGetPowerManagementDefaultLimit)
            / 1000.0
        )

    def get_power_limit(self) -> float:
        nv = _pynvml()
        return self._call("reading the power limit", nv.nvmlDeviceGetPowerManagementLimit) / 1000.0

    def set_power_limit(self, watts: float) -> None:
        w = self.check_power_limit(watts)
        self._call(
            f"setting the power limit to {w:g} W",
            _pynvml().nvmlDeviceSetPowerManagementLimit,
            int(round(w * 1000)),
        )

    def supports_energy_counter(self) -> bool:
        if self._counter is None:
            try:
                self._call(
                    "reading the energy counter", _pynvml().nvmlDeviceGetTotalEnergyConsumption
                )
                self._counter = True
            except UnsupportedError:
                self._counter = False
        return self._counter

    def energy(self) -> float:
        if self.supports_energy_counter():
            mj = self._call(
                "reading the energy counter", _pynvml().nvmlDeviceGetTotalEnergyConsumption
            )
            return mj / 1000.0
        if self._integrator is None:
            self._integrator = PowerIntegrator(self.power)
        return self._integrator.energy()

    def power(self) -> float:
        return self._call("reading power", _pynvml().nvmlDeviceGetPowerUsage) / 1000.0

    # Zeus's power domains through NVML field values: (field constant, scope constant or None).
    _DOMAIN_FIELDS = {
        "device_instant": ("NVML_FI_DEV_POWER_INSTANT", None),
        "device_average": ("NVML_FI_DEV_POWER_AVERAGE", None),
        "memory_average": ("NVML_FI_DEV_POWER_AVERAGE", "NVML_POWER_SCOPE_MEMORY"),
    }

    def _field_power(self, domain: str) -> float:
        """Power of ``domain`` in W from ``nvmlDeviceGetFieldValues`` (UnsupportedError if not)."""
        nv = _pynvml()
        field_name, scope_name = self._DOMAIN_FIELDS[domain]
        field = getattr(nv, field_name, None)
        scope = getattr(nv, scope_name, None) if scope_name else None
        if (
            field is None
            or (scope_name and scope is None)
            or not hasattr(nv, "nvmlDeviceGetFieldValues")
        ):
            raise UnsupportedError(f"GPU {self.index}: this pynvml cannot read {domain!r}")
        ident = (field, scope) if scope is not None else field
        (value,) = self._call(f"reading {domain} power", nv.nvmlDeviceGetFieldValues, [ident])
        if value.nvmlReturn != getattr(nv, "NVML_SUCCESS", 0):
            raise UnsupportedError(f"GPU {self.index}: {domain!r} power is not supported")
        return value.value.uiVal / 1000.0

    def power_domains(self) -> tuple[str, ...]:
        if getattr(self, "_domains", None) is None:
            found = []
            for domain in self._DOMAIN_FIELDS:
                try:
                    self._field_power(domain)
                    found.append(domain)
                except (UnsupportedError, DeviceError):
                    pass
            # Without the instant field (older drivers), nvmlDeviceGetPowerUsage stands for it.
            self._instant_from_usage = "device_instant" not in found
            self._domains = tuple(["device_instant"] * self._instant_from_usage + found)
        return self._domains

    def read_power(self, domain: str = "device_instant") -> float:
        if domain not in self.power_domains():
            return super().read_power(domain)
        if domain == "device_instant" and self._instant_from_usage:
            return self.power()
        return self._field_power(domain)

    def temperature(self) -> float:
        nv = _pynvml()
        return float(
            self._call(
                "reading the temperature", nv.nvmlDeviceGetTemperature, nv.NVML_TEMPERATURE_GPU
            )
        )

    # --- SM and memory clocks, persistence mode ----------------------------------------------
    def _clock_call(self, what: str, fn, *args, setting: str = "clocks"):
        """Like _call, but a missing privilege is a ClockPermissionError about ``setting``."""
        try:
            return fn(self.handle, *args)
        except _pynvml().NVMLError as e:
            if _err_is(e, "NVML_ERROR_NO_PERMISSION"):
                hint = NO_PERMISSION_HINT.replace("power limits", setting)
                raise _tagged(ClockPermissionError(f"GPU {self.index}: {what}: {hint}"), e) from e
            raise _translate(e, f"GPU {self.index}: {what}") from e

    def supported_memory_clocks(self) -> list[int]:
        nv = _pynvml()
        mem = self._clock_call("reading memory clocks", nv.nvmlDeviceGetSupportedMemoryClocks)
        return sorted({int(c) for c in mem}, reverse=True)

    def supported_clocks(self) -> list[int]:
        mem = self.supported_memory_clocks()
        if not mem:
            raise UnsupportedError(f"GPU {self.index}: NVML lists no memory clock")
        return self.supported_clocks_at(mem[0])

    def supported_clocks_at(self, memory_mhz: int) -> list[int]:
        clocks = self._clock_call(
            f"reading SM clocks at memory clock {memory_mhz} MHz",
            _pynvml().nvmlDeviceGetSupportedGraphicsClocks,
            int(memory_mhz),
        )
        return sorted({int(c) for c in clocks}, reverse=True)

    def set_memory_locked_clocks(self, min_mhz: int, max_mhz: int) -> None:
        what = f"locking memory clocks to {min_mhz}-{max_mhz} MHz"
        self._clock_call(what, _pynvml().nvmlDeviceSetMemoryLockedClocks, min_mhz, max_mhz)

    def reset_memory_locked_clocks(self) -> None:
        nv = _pynvml()
        self._clock_call("resetting locked memory clocks", nv.nvmlDeviceResetMemoryLockedClocks)

    def persistence_mode(self) -> bool:
        nv = _pynvml()
        mode = self._call("reading persistence mode", nv.nvmlDeviceGetPersistenceMode)
        return mode == nv.NVML_FEATURE_ENABLED

    def set_persistence_mode(self, enabled: bool) -> None:
        nv = _pynvml()
        mode = nv.NVML_FEATURE_ENABLED if enabled else nv.NVML_FEATURE_DISABLED
        what = f"turning persistence mode {'on' if enabled else 'off'}"
        self._clock_call(what, nv.nvmlDeviceSetPersistenceMode, mode, setting="persistence mode")

    def set_locked_clocks(self, min_mhz: int, max_mhz: int) -> None:
        lo, hi = self.check_clock(min_mhz), self.check_clock(max_mhz)
        if lo > hi:
            raise InputError(f"locked clock range is empty: {lo} MHz > {hi} MHz")
        self._clock_call(
            f"locking SM clocks to {lo}-{hi} MHz", _pynvml().nvmlDeviceSetGpuLockedClocks, lo, hi
        )
        self._locked = (lo, hi)

    def reset_locked_clocks(self) -> None:
        self._clock_call("resetting locked SM clocks", _pynvml().nvmlDeviceResetGpuLockedClocks)
        self._locked = None

    def locked_clocks(self) -> tuple[int, int] | None:
        """The lock this process set (NVML has no query for it); None: the driver chooses."""
        return self._locked

    def can_set_power_limit(self) -> tuple[bool, str]:
        if has_sys_admin():
            return True, "this process holds CAP_SYS_ADMIN"
        return False, NO_PERMISSION_HINT


FROM_ENV = "from the environment"  # sentinel: read CUDA_VISIBLE_DEVICES


def visible_nvml_indices(
    count: int, cuda_visible_devices: str | None = FROM_ENV
) -> list[int | str]:
    """NVML indices (or UUIDs) of the GPUs CUDA numbers 0, 1, ... under CUDA_VISIBLE_DEVICES.

    ``cuda_visible_devices`` overrides the environment variable (None: every GPU is visible).
    """
    env = (
        os.environ.get("CUDA_VISIBLE_DEVICES")
        if cuda_visible_devices is FROM_ENV
        else cuda_visible_devices
    )
    if env is None:
        return list(range(count))
    out: list[int | str] = []
    for item in (s.strip() for s in env.split(",")):
        if not item:
            continue
        if item.isdigit():
            i = int(item)
            if i >= count:
                break  # CUDA stops at the first invalid entry
            out.append(i)
        else:
            out.append(item)
    return out


class NvmlSystem(GPUSystem):
    """The GPUs NVML sees, numbered as CUDA numbers them.

    Args:
        cuda_visible_devices: a ``CUDA_VISIBLE_DEVICES`` value to number GPUs by (None: all of
            them); default: the environment's. ``zeus-nb restore`` passes the crashed process's.
    """

    backend = "nvml"

    def __init__(self, cuda_visible_devices: str | None = FROM_ENV):
        self._cuda: bool | None = None  # torch.cuda.is_available(), asked once torch is in use
        nv = _pynvml()
        try:
            nv.nvmlInit()
        except nv.NVMLError as e:
            raise _translate(e, "initializing NVML") from e
        try:
            count = nv.nvmlDeviceGetCount()
            self.gpus = []
            for cuda_index, ident in enumerate(visible_nvml_indices(count, cuda_visible_devices)):
                if isinstance(ident, int):
                    handle = nv.nvmlDeviceGetHandleByIndex(ident)
                else:
                    handle = nv.nvmlDeviceGetHandleByUUID(ident)
                self.gpus.append(NvmlGPU(cuda_index, handle))
        except nv.NVMLError as e:
            raise _translate(e, "listing GPUs") from e
        if not self.gpus:
            raise NoGPUError(
                "NVML found no visible GPU (check CUDA_VISIBLE_DEVICES); "
                "use the simulated backend: ZEUS_NB_BACKEND=sim"
            )

    def clock(self) -> float:
        return time.monotonic()

    def snapshot_reader(self, gpus: list[GPU]) -> Callable[[], tuple[float, list[float]]]:
        """The clock and each GPU's energy counter, called straight on the driver.

        On an NVML error the snapshot is read again through :meth:`NvmlGPU.energy`, whose error
        names the GPU and says what to do. GPUs without a counter (pre-Volta) integrate power,
        through the general reader.
        """
        if not all(isinstance(g, NvmlGPU) and g.supports_energy_counter() for g in gpus):
            return super().snapshot_reader(gpus)
        nv = _pynvml()
        read, error, clock = nv.nvmlDeviceGetTotalEnergyConsumption, nv.NVMLError, time.monotonic
        gpus, handles = list(gpus), [g.handle for g in gpus]
        if len(handles) == 1:
            (handle,) = handles

            def snapshot() -> tuple[float, list[float]]:
                try:
                    return clock(), [read(handle) / 1000.0]
                except error:
                    return self.snapshot(gpus)

            return snapshot

        def snapshot_all() -> tuple[float, list[float]]:
            try:
                return clock(), [read(h) / 1000.0 for h in handles]
            except error:
                return self.snapshot(gpus)

        return snapshot_all

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
        nv = _pynvml()
        out = {"backend": "NVML (real GPUs)"}
        for key, fn in (
            ("driver", "nvmlSystemGetDriverVersion"),
            ("nvml", "nvmlSystemGetNVMLVersion"),
        ):
            try:
                out[key] = _text(getattr(nv, fn)())
            except (nv.NVMLError, AttributeError) as e:
                out[key] = f"unknown ({e})"
        return out

    def power_sampler(self, indices: list[int], period: float) -> PowerSampler:
        return ThreadSampler(self, indices, period)
