"""A frequency model of the simulated GPU: time and power of work at each SM clock.

A unit of work (one training step, one pipeline instruction) has three numbers:

- ``time_at_max``: seconds it takes at the GPU's maximum SM clock ``f_max``;
- ``compute_share`` ``c``: the share of that time bound by the SMs. That part stretches as
  ``f_max / f`` when the clock drops; the rest (memory, communication) does not, so
  ``time(f) = time_at_max * (c * f_max / f + 1 - c)``;
- ``dynamic_power``: watts above static power at ``f_max``. Power at clock ``f`` is
  ``static_power + dynamic_power * (f / f_max) ** alpha`` (dynamic CMOS power ``~ f V^2`` with the
  voltage following the clock, so ``alpha`` near 2-3; ``alpha`` is fitted, not assumed).

``static_power`` and ``alpha`` belong to the GPU; the rest to the work. None of the parameters is
typed in: :func:`calibrate` fits them to the Zeus power-limit traces shipped in
``zeus_nb/resources/zeus_traces``. Under a power cap ``L`` the GPU runs at the highest clock whose
power fits, ``f(L) = f_max * ((L - static_power) / dynamic_power) ** (1 / alpha)`` clamped to the
supported range, so every measured (limit, time per epoch, average power) row is a point of the
model; :func:`fit_table` compares model and measurement row by row and :data:`FIT_ERROR_BOUND`
states how close they are (``tests/test_frequency_model.py`` asserts it).
"""

from __future__ import annotations

import functools
import hashlib
import math
from dataclasses import dataclass

import numpy as np

from zeus_nb.data.traces import load_power_trace
from zeus_nb.errors import InputError
from zeus_nb.utils.diskcache import cached


@dataclass(frozen=True)
class ClockSpec:
    """The SM clocks a GPU model offers and where the numbers come from."""

    max_mhz: int
    min_mhz: int
    step_mhz: float
    source: str

    def clocks(self) -> list[int]:
        """Supported SM clocks in MHz, highest first (the order NVML returns them in)."""
        n = int(round((self.max_mhz - self.min_mhz) / self.step_mhz))
        return sorted(
            {int(round(self.max_mhz - i * self.step_mhz)) for i in range(n + 1)}, reverse=True
        )


# Maximum SM clock: the boost clock of each product's NVIDIA datasheet ("NVIDIA A40 datasheet":
# boost clock 1740 MHz; "NVIDIA V100 Tensor Core GPU datasheet", PCIe: 1380 MHz; the traced V100's
# 250 W maximum power limit is the PCIe card's). Minimum clock and step: the supported graphics
# clocks NVML lists for those architectures (`nvidia-smi -q -d SUPPORTED_CLOCKS`): Ampere steps by
# 15 MHz down to 210 MHz, Volta by 7.5 MHz (listed rounded) down to 135 MHz.
CLOCKS: dict[str, ClockSpec] = {
    "a40": ClockSpec(1740, 210, 15, "NVIDIA A40 datasheet (boost 1740 MHz); Ampere NVML list"),
    "v100": ClockSpec(
        1380, 135, 7.5, "NVIDIA V100 PCIe datasheet (boost 1380 MHz); Volta NVML list"
    ),
}

# Relative error of the calibrated model against the traces (see fit_table): the median over all
# rows of each GPU's trace, and the worst row. Measured by tests/test_frequency_model.py.
FIT_ERROR_BOUND = {"median_time": 0.05, "median_power": 0.05, "max_time": 0.3, "max_power": 0.3}


@dataclass(frozen=True)
class Work:
    """One unit of work at the maximum clock; see the module docstring for the model."""

    time_at_max: float
    compute_share: float
    dynamic_power: float

    def __post_init__(self):
        if self.time_at_max <= 0:
            raise InputError(f"time_at_max must be > 0 s, got {self.time_at_max}")
        if not 0.0 <= self.compute_share <= 1.0:
            raise InputError(f"compute_share must be in [0, 1], got {self.compute_share}")
        if self.dynamic_power < 0:
            raise InputError(f"dynamic_power must be >= 0 W, got {self.dynamic_power}")


@dataclass(frozen=True)
class FrequencyModel:
    """A GPU's clock range, static power and dynamic-power exponent."""

    gpu: str
    clocks: tuple[int, ...]
    static_power: float
    alpha: float

    @property
    def f_max(self) -> int:
        return self.clocks[0]

    @property
    def f_min(self) -> int:
        return self.clocks[-1]

    def time(self, work: Work, clock: float) -> float:
        """Seconds ``work`` takes at SM clock ``clock`` (MHz)."""
        c = work.compute_share
        return work.time_at_max * (c * self.f_max / float(clock) + 1.0 - c)

    def power(self, work: Work, clock: float) -> float:
        """Average watts while ``work`` runs at ``clock``."""
        return self.static_power + work.dynamic_power * (float(clock) / self.f_max) ** self.alpha

    def energy(self, work: Work, clock: float) -> float:
        return self.time(work, clock) * self.power(work, clock)

    def blocking_power(self) -> float:
        """Watts of a GPU that waits on communication: static power, no SM activity."""
        return self.static_power

    def clock_under_cap(self, work: Work, cap: float, continuous: bool = False) -> float:
        """The highest clock whose power fits under ``cap`` W (a supported clock unless
        ``continuous``); the lowest clock when even that exceeds the cap."""
        if work.dynamic_power <= 0 or cap >= self.power(work, self.f_max):
            return float(self.f_max)
        ratio = max(cap - self.static_power, 0.0) / work.dynamic_power
        f = float(np.clip(self.f_max * ratio ** (1.0 / self.alpha), self.f_min, self.f_max))
        if continuous:
            return f
        fitting = [c for c in self.clocks if c <= f + 1e-9]
        return float(fitting[0] if fitting else self.f_min)


@dataclass(frozen=True)
class Calibration:
    """The fitted model of one GPU and the per-curve work it explains."""

    model: FrequencyModel
    curves: dict[tuple[str, int, str], Work]  # (dataset, batch size, optimizer) -> work per epoch


def _predict(model: FrequencyModel, work: Work, limits: np.ndarray) -> tuple[np.ndarray, ...]:
    clocks = np.array([model.clock_under_cap(work, cap, continuous=True) for cap in limits])
    times = np.array([model.time(work, f) for f in clocks])
    powers = np.array([model.power(work, f) for f in clocks])
    return clocks, times, powers


def _curve_groups(gpu: str):
    df = load_power_trace(gpu)
    return [
        (key, g.sort_values("power_limit"))
        for key, g in df.groupby(["dataset", "batch_size", "optimizer"], sort=True)
    ]


def _model_rows(x: np.ndarray, curve: np.ndarray, limit: np.ndarray, f_ratio_min: float):
    """Vectorized model over trace rows: (time, power) per row for parameter vector ``x``."""
    p_static, alpha = x[0], x[1]
    t_max, share, p_dyn = x[2::3][curve], x[3::3][curve], x[4::3][curve]
    ratio = np.maximum(limit - p_static, 0.0) / np.maximum(p_dyn, 1e-9)
    r = np.clip(ratio ** (1.0 / alpha), f_ratio_min, 1.0)  # clock / f_max
    return t_max * (share / r + 1.0 - share), p_static + p_dyn * r**alpha


FIT_VERSION = 1  # bump when the fit below changes, so cached fits are not reused


def _data_digest(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.asarray(a, dtype=float).tobytes())
        h.update(b"|")
    return h.hexdigest()


@functools.lru_cache(maxsize=4)
def calibrate(gpu: str = "a40") -> Calibration:
    """Fit static power, ``alpha`` (shared by the GPU) and each curve's work to the trace.

    Least squares on relative time and power errors over every row of the bundled trace; the
    work's ``time_at_max`` is the time of one epoch at the maximum clock.
    """
    from importlib.metadata import version

    gpu = gpu.lower()
    if gpu not in CLOCKS:
        raise InputError(f"no clock data for {gpu!r}; use one of: {', '.join(CLOCKS)}")
    clocks = tuple(CLOCKS[gpu].clocks())
    groups = _curve_groups(gpu)
    curve = np.concatenate([np.full(len(g), i) for i, (_, g) in enumerate(groups)])
    limit = np.concatenate([g["power_limit"].to_numpy(float) for _, g in groups])
    time = np.concatenate([g["time_per_epoch"].to_numpy(float) for _, g in groups])
    power = np.concatenate([g["average_power"].to_numpy(float) for _, g in groups])
    min_power = float(power.min())
    f_ratio_min = clocks[-1] / clocks[0]

    def residuals(x):
        tp, pp = _model_rows(x, curve, limit, f_ratio_min)
        return np.concatenate([tp / time - 1.0, pp / power - 1.0])

    # Start: static power a third of the lowest measured power, cubic dynamic power, each curve's
    # fastest measurement as its time at max clock, half compute-bound.
    x0, lo, hi = [min_power / 3, 3.0], [0.0, 1.0], [min_power, 4.0]
    for _, g in groups:
        t_min, p_max = float(g["time_per_epoch"].min()), float(g["average_power"].max())
        x0 += [t_min, 0.5, max(p_max - min_power / 3, 1.0)]
        lo += [t_min * 0.5, 0.0, 0.0]
        hi += [t_min * 1.5, 1.0, float(g["power_limit"].max()) * 2]

    def fit() -> list[float]:
        from scipy.optimize import least_squares
        from scipy.sparse import lil_matrix

        sparsity = lil_matrix((2 * len(curve), len(x0)), dtype=int)
        for row, c in enumerate(np.concatenate([curve, curve])):
            sparsity[row, [0, 1, 2 + 3 * c, 3 + 3 * c, 4 + 3 * c]] = 1
        found = least_squares(
            residuals, np.array(x0), bounds=(np.array(lo), np.array(hi)), jac_sparsity=sparsity
        )
        return [float(v) for v in found.x]

    # Each pipeline rank would refit the same trace: cache the fit under the data it fits.
    key = {
        "fit": FIT_VERSION,
        "gpu": gpu,
        "clocks": clocks,
        "data": _data_digest(curve, limit, time, power, x0, lo, hi),
        "scipy": version("scipy"),
        "numpy": np.__version__,
    }
    x = cached(
        "frequency-fit",
        key,
        fit,
        valid=lambda v: (
            isinstance(v, list)
            and len(v) == len(x0)
            and all(isinstance(a, float) and math.isfinite(a) for a in v)
        ),
    )
    model = FrequencyModel(gpu, clocks, float(x[0]), float(x[1]))
    works = {
        key: Work(float(x[2 + 3 * i]), float(x[3 + 3 * i]), float(x[4 + 3 * i]))
        for i, (key, _) in enumerate(groups)
    }
    return Calibration(model, works)


def fit_table(gpu: str = "a40"):
    """One row per trace row: measured and modelled time per epoch and power, and the clock."""
    import pandas as pd

    cal = calibrate(gpu)
    rows = []
    for key, g in _curve_groups(gpu):
        work = cal.curves[key]
        lim = g["power_limit"].to_numpy(float)
        clocks, tp, pp = _predict(cal.model, work, lim)
        for i in range(len(g)):
            rows.append(
                {
                    "dataset": key[0],
                    "batch_size": key[1],
                    "optimizer": key[2],
                    "power_limit": lim[i],
                    "clock": clocks[i],
                    "time_measured": float(g["time_per_epoch"].iloc[i]),
                    "time_model": tp[i],
                    "power_measured": float(g["average_power"].iloc[i]),
                    "power_model": pp[i],
                }
            )
    df = pd.DataFrame(rows)
    df["time_error"] = (df["time_model"] / df["time_measured"] - 1).abs()
    df["power_error"] = (df["power_model"] / df["power_measured"] - 1).abs()
    return df


def frequency_model(gpu: str = "a40") -> FrequencyModel:
    """The calibrated frequency model of a bundled GPU (``"a40"`` or ``"v100"``)."""
    return calibrate(gpu).model
