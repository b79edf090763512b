"""A test double of ``pynvml`` (nvidia-ml-py) for the NVML backend.

State lives in a JSON file named by ``ZEUS_NB_FAKE_NVML_STATE`` so that subprocesses (notebook
kernels, torchrun ranks, interrupted or killed optimizer runs, ``zeus-nb restore``) share one set
of fake GPUs; changes are made under a file lock, so ranks that set their limits at once lose
none. Errors are injected by naming them in the state: ``init_error`` (``LibraryNotFound``,
``DriverNotLoaded``), and per device ``set_error`` / ``energy_error`` / ``power_error`` /
``clock_error`` (``NoPermission``, ``NotSupported``...). ``deny_setters: true`` in the state makes
every setter refuse with ``NoPermission`` and every reading answer, as NVML does for a process
without root or SYS_ADMIN (a shared node, a hosted notebook, a container without the capability):
:func:`row_state`'s ``deny_setters`` argument.

Two kinds of device:

- **Shaped like a real GPU** (:func:`row_state`, rows in ``nvml_rows.py``: ``h100``, ``a40``,
  ``v100``): the energy counter advances with wall time, in steps of the row's period (100 ms on
  the H100), at the power the row measured for the current limit and load; every read costs the
  time the row measured (2.8 ms for the counter, with its tail), spent sleeping. Code that works
  on these works on the hardware they stand for.
- **Smooth** (:func:`default_state`, the generic two A40s): each counter read advances that GPU's
  counter by ``power_mw x read_interval_s`` and reads cost nothing. No GPU behaves like this; it
  stays for the tests that must not sleep or wait on a clock (unit tests of the NVML backend's
  calls, errors and restores, which need exact, deterministic energies).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import threading
import time
from pathlib import Path

from nvml_rows import GPU_COUNTS, counter_mj, device_fields, power_mw, settle, spend

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_ALREADY_INITIALIZED = 5
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_ERROR_INSUFFICIENT_POWER = 8
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_IRQ_ISSUE = 11
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_CORRUPTED_INFOROM = 14
NVML_ERROR_RESET_REQUIRED = 16
NVML_ERROR_OPERATING_SYSTEM = 17
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_MEMORY = 20
NVML_ERROR_UNKNOWN = 999
NVML_DEVICE_ARCH_VOLTA = 5
NVML_DEVICE_ARCH_AMPERE = 7
NVML_DEVICE_ARCH_HOPPER = 9
NVML_TEMPERATURE_GPU = 0
NVML_FI_DEV_POWER_AVERAGE = 185
NVML_FI_DEV_POWER_INSTANT = 186
NVML_POWER_SCOPE_GPU = 0
NVML_POWER_SCOPE_MEMORY = 1
NVML_FEATURE_DISABLED = 0
NVML_FEATURE_ENABLED = 1


class NVMLError(Exception):
    value = NVML_ERROR_UNKNOWN

    def __init__(self, value: int | None = None):
        if value is not None:
            self.value = value
        super().__init__(f"fake NVML error {self.value}")


def _sub(name: str, code: int) -> type[NVMLError]:
    cls = type(f"NVMLError_{name}", (NVMLError,), {"value": code})
    globals()[cls.__name__] = cls
    return cls


_ERRORS = {
    "Uninitialized": _sub("Uninitialized", NVML_ERROR_UNINITIALIZED),
    "InvalidArgument": _sub("InvalidArgument", NVML_ERROR_INVALID_ARGUMENT),
    "NotSupported": _sub("NotSupported", NVML_ERROR_NOT_SUPPORTED),
    "NoPermission": _sub("NoPermission", NVML_ERROR_NO_PERMISSION),
    "NotFound": _sub("NotFound", NVML_ERROR_NOT_FOUND),
    "DriverNotLoaded": _sub("DriverNotLoaded", NVML_ERROR_DRIVER_NOT_LOADED),
    "LibraryNotFound": _sub("LibraryNotFound", NVML_ERROR_LIBRARY_NOT_FOUND),
    "Timeout": _sub("Timeout", NVML_ERROR_TIMEOUT),
    "GpuIsLost": _sub("GpuIsLost", NVML_ERROR_GPU_IS_LOST),
    "FunctionNotFound": _sub("FunctionNotFound", NVML_ERROR_FUNCTION_NOT_FOUND),
    "Unknown": _sub("Unknown", NVML_ERROR_UNKNOWN),
}


def default_device(i: int, **overrides) -> dict:
    dev = {
        "name": "NVIDIA A40",
        "uuid": f"GPU-fake-{i}",
        "min_mw": 100_000,
        "max_mw": 300_000,
        "default_mw": 300_000,
        "limit_mw": 300_000,
        "power_mw": 200_000,
        "energy_mj": 0,
        "read_interval_s": 1.0,
        "set_error": None,
        "energy_error": None,
        "power_error": None,
        "temperature_c": 45,
        "architecture": NVML_DEVICE_ARCH_AMPERE,
        # Field-value power domains in mW (None: the field is not supported).
        "power_instant_mw": None,
        "power_average_mw": None,
        "memory_power_mw": None,
        # SM clocks, A40-like (boost 1740 MHz, 15 MHz steps), one memory clock; clock_error
        # injects an error into the lock/reset calls, locked_clocks is [min, max] or None.
        "memory_clocks_mhz": [7251],
        "graphics_clocks_mhz": list(range(1740, 209, -15)),
        "locked_clocks": None,
        "clock_error": None,
        # Locked memory clocks ([min, max] or None) and persistence mode (NVML_FEATURE_*).
        "memory_locked_clocks": None,
        "persistence_mode": NVML_FEATURE_DISABLED,
    }
    dev.update(overrides)
    return dev


def default_state(num_gpus: int = 2) -> dict:
    return {
        "init_error": None,
        "driver": "550.54.15",
        "nvml": "12.550.54.15",
        "devices": [default_device(i) for i in range(num_gpus)],
        "set_calls": [],
        "clock_calls": [],
    }


def row_device(row: str, i: int, **overrides) -> dict:
    """Device ``i`` shaped like the measured GPU ``row`` (see ``nvml_rows.py``)."""
    dev = default_device(i)
    dev.update(device_fields(row))
    dev["uuid"] = f"GPU-fake-{row}-{i}"
    now = time.time()
    # the counter: energy_mj at anchor_t; boundary_mj is its value at the last update
    dev.update(energy_mj=0.0, anchor_t=now, boundary_mj=0.0)
    dev.update(overrides)
    return dev


def row_state(row: str = "h100", num_gpus: int = 1, deny_setters: bool = False) -> dict:
    """``num_gpus`` (1, 2, 4 or 8) GPUs shaped like the measured GPU ``row``; with
    ``deny_setters``, GPUs this process may read but not change."""
    from nvml_rows import row as get_row

    if num_gpus not in GPU_COUNTS:
        raise ValueError(f"num_gpus must be one of {GPU_COUNTS}, got {num_gpus}")
    r = get_row(row)
    return {
        "init_error": None,
        "driver": r["driver"],
        "nvml": r["nvml"],
        "devices": [row_device(row, i) for i in range(num_gpus)],
        "set_calls": [],
        "clock_calls": [],
        "deny_setters": bool(deny_setters),
    }


_POWER_KEYS = {"limit_mw", "load", "power_mw", "busy_mw", "idle_mw", "memory_busy_mw"}


def update_device(index: int, **changes) -> None:
    """Change device ``index`` (tests' control); a change of power banks the counter first."""
    with _changing() as state:
        d = state["devices"][index]
        if _POWER_KEYS & set(changes):
            settle(d, time.time())
        d.update(changes)


def update_state(**changes) -> None:
    """Change top-level state (``init_error``, ``driver``...)."""
    with _changing() as state:
        state.update(changes)


_memory_state: dict | None = None


def keep_state_in_memory(state: dict | None) -> None:
    """Serve ``state`` from memory instead of the JSON file; None goes back to the file.

    Benchmarks use this so that a call costs what a driver call costs, not a JSON round trip
    (subprocesses then no longer share the state).
    """
    global _memory_state
    _memory_state = state


def _path() -> Path:
    p = os.environ.get("ZEUS_NB_FAKE_NVML_STATE")
    if not p:
        raise RuntimeError("fake pynvml: set ZEUS_NB_FAKE_NVML_STATE to a JSON state file")
    return Path(p)


def load_state() -> dict:
    if _memory_state is not None:
        return _memory_state
    return json.loads(_path().read_text())


def save_state(state: dict) -> None:
    if _memory_state is not None:
        return  # callers changed the in-memory state in place
    p = _path()
    tmp = p.with_name(f".{p.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(state))
    os.replace(tmp, p)


_HELD_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT}


@contextlib.contextmanager
def _signals_wait():
    """Signals wait for the change to be saved, as they wait for a driver call to return.

    A handler that restores a GPU's setting (zeus-nb's guard on SIGTERM) would otherwise run in
    the middle of a change, wait for the lock this process holds, and never return. Handlers are
    swapped for a recorder meanwhile (a signal already pending runs the handler current when
    Python gets to it), and what was caught is raised again afterwards.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    saved = {}
    for sig in _HELD_SIGNALS:
        if signal.getsignal(sig) is not None:  # None: a handler set outside Python
            saved[sig] = signal.signal(sig, lambda n, _frame: caught.append(n))
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        for sig in caught:
            signal.raise_signal(sig)


@contextlib.contextmanager
def _changing():
    """The state to change in place, saved at the end; processes take turns (a file lock)."""
    if _memory_state is not None:
        yield _memory_state
        return
    p = _path()
    with _signals_wait(), open(p.with_name(p.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            state = load_state()
            yield state
            save_state(state)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _raise(name: str | None) -> None:
    if name:
        raise _ERRORS[name]()


def _refuse_setter(state: dict, error: str | None) -> None:
    """A setter's injected error, or NoPermission on GPUs this process may not change."""
    _raise(error or ("NoPermission" if state.get("deny_setters") else None))


class _Handle:
    def __init__(self, index: int):
        self.index = index


_initialized = False


def _check_init() -> None:
    if not _initialized:
        raise _ERRORS["Uninitialized"]()


def nvmlInit() -> None:
    global _initialized
    _raise(load_state().get("init_error"))
    _initialized = True


def nvmlShutdown() -> None:
    global _initialized
    _initialized = False


def nvmlSystemGetDriverVersion() -> str:
    _check_init()
    return load_state()["driver"]


def nvmlSystemGetNVMLVersion() -> str:
    _check_init()
    return load_state()["nvml"]


def nvmlDeviceGetCount() -> int:
    _check_init()
    return len(load_state()["devices"])


def nvmlDeviceGetHandleByIndex(index: int) -> _Handle:
    _check_init()
    if not 0 <= index < len(load_state()["devices"]):
        raise _ERRORS["InvalidArgument"]()
    return _Handle(index)


def nvmlDeviceGetHandleByUUID(uuid: str) -> _Handle:
    _check_init()
    for i, d in enumerate(load_state()["devices"]):
        if d["uuid"] == uuid:
            return _Handle(i)
    raise _ERRORS["NotFound"]()


def _dev(handle: _Handle, cost: str | None = None) -> dict:
    """The device's state; with ``cost``, the call lasts what that kind of read costs."""
    start = time.perf_counter()
    _check_init()
    d = load_state()["devices"][handle.index]
    if cost is not None:
        spend(d, cost, start)
    return d


def nvmlDeviceGetName(handle: _Handle) -> str:
    return _dev(handle)["name"]


def nvmlDeviceGetPowerManagementLimitConstraints(handle: _Handle) -> list[int]:
    d = _dev(handle)
    return [d["min_mw"], d["max_mw"]]


def nvmlDeviceGetPowerManagementDefaultLimit(handle: _Handle) -> int:
    return _dev(handle)["default_mw"]


def nvmlDeviceGetPowerManagementLimit(handle: _Handle) -> int:
    return _dev(handle, "limit")["limit_mw"]


def nvmlDeviceGetEnforcedPowerLimit(handle: _Handle) -> int:
    return _dev(handle, "limit")["limit_mw"]


def nvmlDeviceSetPowerManagementLimit(handle: _Handle, limit_mw: int) -> None:
    _check_init()
    with _changing() as state:
        d = state["devices"][handle.index]
        _refuse_setter(state, d.get("set_error"))
        if not d["min_mw"] <= limit_mw <= d["max_mw"]:
            raise _ERRORS["InvalidArgument"]()
        if d["limit_mw"] == int(limit_mw):
            return  # the limit it has: NVML accepts, nothing changes (set_calls lists changes)
        settle(d, time.time())  # the energy so far was drawn at the old limit
        d["limit_mw"] = int(limit_mw)
        state["set_calls"].append([handle.index, int(limit_mw)])


def nvmlDeviceGetTotalEnergyConsumption(handle: _Handle) -> int:
    start = time.perf_counter()
    _check_init()
    d = load_state()["devices"][handle.index]
    _raise(d.get("energy_error"))
    if d.get("counter") == "periodic":  # moves with wall time, in steps of its period
        spend(d, "energy", start)
        return int(counter_mj(d, time.time()))
    if _memory_state is not None:  # a benchmark's state: a read costs what a driver call does
        return _advance(d)
    with _changing() as state:  # smooth: each read advances the counter
        return _advance(state["devices"][handle.index])


def _advance(d: dict) -> int:
    """The smooth counter after one more read (mJ): each read advances it."""
    d["energy_mj"] += int(d["power_mw"] * d["read_interval_s"])
    return d["energy_mj"]


def nvmlDeviceGetArchitecture(handle: _Handle) -> int:
    return int(_dev(handle).get("architecture", NVML_DEVICE_ARCH_AMPERE))


def nvmlDeviceGetC2cModeInfoV(handle: _Handle):
    """No fake GPU is a Grace Hopper chip (the call exists on such drivers only)."""
    _dev(handle)
    raise _ERRORS["NotSupported"]()


def _nvmlGetFunctionPointer(name: str):
    """Present in the official bindings (libraries such as Zeus check for it); unused here."""
    raise _ERRORS["FunctionNotFound"]()


def nvmlDeviceGetPowerUsage(handle: _Handle) -> int:
    d = _dev(handle, "power")
    _raise(d.get("power_error"))
    return int(power_mw(d))


def nvmlDeviceGetTemperature(handle: _Handle, sensor: int) -> int:
    d = _dev(handle, "temperature")
    if sensor != NVML_TEMPERATURE_GPU or d.get("temperature_c") is None:
        raise _ERRORS["NotSupported"]()
    return int(d["temperature_c"])


class _Value:
    def __init__(self, value):
        self.uiVal = value


class _FieldValue:
    def __init__(self, ret: int, value: int):
        self.nvmlReturn = ret
        self.value = _Value(value)


def nvmlDeviceGetFieldValues(handle: _Handle, field_ids: list) -> list[_FieldValue]:
    """Power fields only: instant, average, and average with the memory scope.

    A device shaped like a GPU whose fields answer (``power_fields``) reports its current power
    for the instant and average fields; others report what the state holds (None: unsupported).
    """
    d = _dev(handle, "field")
    if d.get("power_fields"):
        d = dict(d, power_instant_mw=power_mw(d), power_average_mw=power_mw(d))
    out = []
    for ident in field_ids:
        field, scope = ident if isinstance(ident, tuple) else (ident, NVML_POWER_SCOPE_GPU)
        key = {
            (NVML_FI_DEV_POWER_INSTANT, NVML_POWER_SCOPE_GPU): "power_instant_mw",
            (NVML_FI_DEV_POWER_AVERAGE, NVML_POWER_SCOPE_GPU): "power_average_mw",
            (NVML_FI_DEV_POWER_AVERAGE, NVML_POWER_SCOPE_MEMORY): "memory_power_mw",
        }.get((field, scope))
        value = d.get(key) if key else None
        if value is None:
            out.append(_FieldValue(NVML_ERROR_NOT_SUPPORTED, 0))
        else:
            out.append(_FieldValue(NVML_SUCCESS, int(value)))
    return out


def nvmlDeviceGetSupportedMemoryClocks(handle: _Handle) -> list[int]:
    return list(_dev(handle).get("memory_clocks_mhz", []))


def nvmlDeviceGetSupportedGraphicsClocks(handle: _Handle, memory_clock_mhz: int) -> list[int]:
    d = _dev(handle)
    if memory_clock_mhz not in d.get("memory_clocks_mhz", []):
        raise _ERRORS["InvalidArgument"]()
    return list(d["graphics_clocks_mhz"])


@contextlib.contextmanager
def _clock_change(handle: _Handle):
    """(state, device) to change a clock setting in; ``clock_error`` raises first."""
    _check_init()
    with _changing() as state:
        d = state["devices"][handle.index]
        _refuse_setter(state, d.get("clock_error"))
        yield state, d


def nvmlDeviceSetGpuLockedClocks(handle: _Handle, min_mhz: int, max_mhz: int) -> None:
    with _clock_change(handle) as (state, d):
        if min_mhz > max_mhz:
            raise _ERRORS["InvalidArgument"]()
        d["locked_clocks"] = [int(min_mhz), int(max_mhz)]
        state.setdefault("clock_calls", []).append([handle.index, int(min_mhz), int(max_mhz)])


def nvmlDeviceResetGpuLockedClocks(handle: _Handle) -> None:
    with _clock_change(handle) as (state, d):
        d["locked_clocks"] = None
        state.setdefault("clock_calls", []).append([handle.index, "reset"])


def nvmlDeviceSetMemoryLockedClocks(handle: _Handle, min_mhz: int, max_mhz: int) -> None:
    with _clock_change(handle) as (_, d):
        if min_mhz > max_mhz:
            raise _ERRORS["InvalidArgument"]()
        d["memory_locked_clocks"] = [int(min_mhz), int(max_mhz)]


def nvmlDeviceResetMemoryLockedClocks(handle: _Handle) -> None:
    with _clock_change(handle) as (_, d):
        d["memory_locked_clocks"] = None


def nvmlDeviceGetPersistenceMode(handle: _Handle) -> int:
    return _dev(handle).get("persistence_mode", NVML_FEATURE_DISABLED)


def nvmlDeviceSetPersistenceMode(handle: _Handle, mode: int) -> None:
    _check_init()
    with _changing() as state:
        d = state["devices"][handle.index]
        _refuse_setter(state, d.get("set_error"))
        d["persistence_mode"] = int(mode)
