"""A fake ``pynvml`` whose energy counter behaves in time as a real H100's did.

Measured on an H100 through NVML (docs/measuring.md): a counter read costs 2.8 ms (median of
200; 2.6 ms least, 16.8 ms most), the counter's value moves only every 100 ms, and a power read
costs about 1 us. Here a counter read sleeps for such a cost (1 read in 200 the slowest, the
others spread evenly over 2.6-3.0 ms; ``time.sleep`` releases the GIL as NVML does) and returns
the energy drawn up to the latest 100 ms step, as of the end of the read. Power reads return the
power drawn now, or, with ``reading_period``, the average over the latest whole period of that
length (the H100's power reading changed about every 50-100 ms), times ``power_scale`` (on some
GPUs power readings and the counter disagree widely). The load is a repeating list of
``(seconds, watts)`` phases. Used by the counter tests and ``benchmarks/bench_monitor.py``, for
zeus-nb's NVML backend and for Zeus's own monitor (both import this module as ``pynvml``).

:func:`configure` sets the GPUs up; :func:`true_energy` is what was drawn between two times, the
reference a measurement is judged against; ``counter_reads`` counts counter reads by thread name.
"""

from __future__ import annotations

import collections
import math
import random
import threading
import time

# NVML's constants, as nvidia-ml-py names them (the ones zeus-nb and Zeus use).
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
NVML_ERROR_IRQ_ISSUE = 11
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_CORRUPTED_INFOROM = 14
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_RESET_REQUIRED = 16
NVML_ERROR_OPERATING_SYSTEM = 17
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_MEMORY = 20
NVML_ERROR_UNKNOWN = 999
NVML_DEVICE_ARCH_PASCAL = 4
NVML_DEVICE_ARCH_VOLTA = 5
NVML_DEVICE_ARCH_HOPPER = 9
NVML_TEMPERATURE_GPU = 0
NVML_FI_DEV_POWER_AVERAGE = 185
NVML_FI_DEV_POWER_INSTANT = 186
NVML_POWER_SCOPE_GPU = 0
NVML_POWER_SCOPE_MODULE = 1
NVML_POWER_SCOPE_MEMORY = 2
NVML_FEATURE_DISABLED = 0
NVML_FEATURE_ENABLED = 1

#: The H100's counter read costs (s): median, least and most of 200 reads.
READ_COST_H100 = (2.8e-3, 2.6e-3, 16.8e-3)
#: Seconds between the H100's counter updates.
PERIOD_H100 = 0.1
#: The H100's idle power and its power under back-to-back bf16 matmuls (W).
IDLE_W, BUSY_W = 127.0, 693.0


class NVMLError(Exception):
    def __init__(self, value: int = NVML_ERROR_UNKNOWN):
        self.value = value
        super().__init__(f"timed fake NVML error {value}")


class _Load:
    """A repeating list of ``(seconds, watts)`` phases from ``t0``; energy in closed form."""

    def __init__(self, phases: list[tuple[float, float]], t0: float):
        self.phases, self.t0 = phases, t0
        self.cycle = sum(d for d, _ in phases)
        self.cycle_energy = sum(d * w for d, w in phases)

    def power(self, t: float) -> float:
        x = (t - self.t0) % self.cycle
        for d, w in self.phases:
            if x < d:
                return w
            x -= d
        return self.phases[-1][1]

    def energy(self, t: float) -> float:
        """J drawn from ``t0`` to ``t``."""
        n, x = divmod(t - self.t0, self.cycle)
        joules = n * self.cycle_energy
        for d, w in self.phases:
            joules += min(x, d) * w
            x -= d
            if x <= 0:
                break
        return joules


class _GPU:
    def __init__(self, index, load, period, cost, power_scale, offset, reading_period, average_s):
        self.index, self.load, self.period = index, load, period
        self.cost, self.power_scale = cost, power_scale
        self.offset = offset  # where this GPU's counter steps fall within a period
        self.reading_period = reading_period
        self.average_s = average_s
        self._held: tuple[float, float] = (math.nan, 0.0)  # the power reading the GPU holds

    def reading_w(self, t: float) -> float:
        """What a power read returns at ``t``: the latest average, which the GPU holds until
        its next update (so a read between updates costs a lookup, as the H100's 1 us does)."""
        r = self.reading_period
        if r <= 0:
            return self.load.power(t) * self.power_scale
        end = self.load.t0 + math.floor((t - self.load.t0) / r) * r
        held = self._held  # (update time, W), one object: threads read it whole
        if held[0] == end:
            return held[1]
        if end - r < self.load.t0:
            return self.load.power(t) * self.power_scale
        watts = (self.load.energy(end) - self.load.energy(end - r)) / r * self.power_scale
        self._held = (end, watts)
        return watts

    def usage_w(self, t: float) -> float:
        """What ``nvmlDeviceGetPowerUsage`` returns at ``t``: with ``average_s``, the average
        over that many seconds up to the latest update (an H200's: 1 s, updated every 100 ms);
        else the same as the instant field."""
        a = self.average_s
        if a <= 0:
            return self.reading_w(t)
        r = self.reading_period or PERIOD_H100
        end = self.load.t0 + math.floor((t - self.load.t0) / r) * r
        start = max(self.load.t0, end - a)
        if end <= start:
            return self.load.power(t) * self.power_scale
        return (self.load.energy(end) - self.load.energy(start)) / (end - start) * self.power_scale

    def counter_mj(self, t: float) -> int:
        k = math.floor((t - self.load.t0 - self.offset) / self.period)
        step = self.load.t0 + self.offset + k * self.period
        return int(self.load.energy(max(step, self.load.t0)) * 1000)


_gpus: list[_GPU] = []
_rng = random.Random(0)
_rng_lock = threading.Lock()
counter_reads: collections.Counter[str] = collections.Counter()


def configure(
    num_gpus: int = 1,
    phases: list[tuple[float, float]] | None = None,
    read_cost: tuple[float, float, float] | float = READ_COST_H100,
    period: float = PERIOD_H100,
    power_scale: float = 1.0,
    seed: int = 0,
    reading_period: float = 0.0,
    average_s: float = 0.0,
) -> None:
    """GPUs from now on drawing ``phases`` (default: constant H100 matmul power), whose counter
    reads cost ``read_cost`` (the H100's by default; a number: always that) and step every
    ``period`` s, and whose power reads are instant or held ``reading_period`` averages; with
    ``average_s``, ``nvmlDeviceGetPowerUsage`` is an average over that long (see H200)."""
    global _gpus, _rng
    t0 = time.perf_counter()
    load = _Load(phases or [(1.0, BUSY_W)], t0)
    _rng = random.Random(seed)
    offsets = random.Random(seed + 1)
    _gpus = [
        _GPU(
            i,
            load,
            period,
            read_cost,
            power_scale,
            offsets.uniform(0, period),
            reading_period,
            average_s,
        )
        for i in range(num_gpus)
    ]
    counter_reads.clear()


def true_energy(index: int, t0: float, t1: float) -> float:
    """J GPU ``index`` drew between ``time.perf_counter()`` readings ``t0`` and ``t1``."""
    load = _gpus[index].load
    return load.energy(t1) - load.energy(t0)


def _read_cost(cost) -> float:
    if not isinstance(cost, tuple):
        return float(cost)
    median, least, most = cost
    with _rng_lock:
        if _rng.random() < 1 / 200:
            return most
        return _rng.uniform(least, 2 * median - least)


def _gpu(handle) -> _GPU:
    return _gpus[handle]


def nvmlInit() -> None:
    if not _gpus:
        configure()


def nvmlShutdown() -> None:
    pass


def _nvmlGetFunctionPointer(name):  # present in the official bindings; Zeus checks for it
    raise NVMLError(NVML_ERROR_FUNCTION_NOT_FOUND)


def nvmlSystemGetDriverVersion() -> str:
    return "580.159.04 (timed fake)"


def nvmlSystemGetNVMLVersion() -> str:
    return "13.580.159.04 (timed fake)"


def nvmlDeviceGetCount() -> int:
    return len(_gpus)


def nvmlDeviceGetHandleByIndex(index: int) -> int:
    if not 0 <= index < len(_gpus):
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return index


def nvmlDeviceGetName(handle) -> str:
    return "NVIDIA H100 80GB HBM3 (timed fake)"


def nvmlDeviceGetArchitecture(handle) -> int:
    return NVML_DEVICE_ARCH_HOPPER


def nvmlDeviceGetC2cModeInfoV(handle):
    raise NVMLError(NVML_ERROR_NOT_SUPPORTED)


def nvmlDeviceGetPowerManagementLimitConstraints(handle) -> list[int]:
    return [200_000, 700_000]


def nvmlDeviceGetPowerManagementLimit(handle) -> int:
    return 700_000


def nvmlDeviceGetPowerManagementDefaultLimit(handle) -> int:
    return 700_000


def nvmlDeviceGetTotalEnergyConsumption(handle) -> int:
    gpu = _gpu(handle)
    counter_reads[threading.current_thread().name] += 1
    cost = _read_cost(gpu.cost)
    if cost > 0:
        time.sleep(cost)
    return gpu.counter_mj(time.perf_counter())


def nvmlDeviceGetPowerUsage(handle) -> int:
    return int(_gpu(handle).usage_w(time.perf_counter()) * 1000)


class _Value:
    def __init__(self, value):
        self.uiVal = value


class _FieldValue:
    def __init__(self, ret: int, value: int):
        self.nvmlReturn, self.value = ret, _Value(value)


def nvmlDeviceGetFieldValues(handle, field_ids: list) -> list[_FieldValue]:
    """Instant power only (the H100 answers it in 2.4 us)."""
    out = []
    for ident in field_ids:
        field = ident[0] if isinstance(ident, tuple) else ident
        if field == NVML_FI_DEV_POWER_INSTANT:
            watts = _gpu(handle).reading_w(time.perf_counter())
            out.append(_FieldValue(NVML_SUCCESS, int(watts * 1000)))
        else:
            out.append(_FieldValue(NVML_ERROR_NOT_SUPPORTED, 0))
    return out


def nvmlDeviceGetTemperature(handle, sensor: int) -> int:
    return 45
