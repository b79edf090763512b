"""Grams of CO2 and electricity cost of measured energy, with Zeus's monitor shapes.

:class:`CarbonEmissionMonitor` and :class:`EnergyCostMonitor` wrap a
:class:`~zeus_nb.monitor.ZeusMonitor` and convert each window's GPU, CPU and DRAM energy with an
*intensity provider*: gCO2eq per kWh, or price per kWh. The default providers call out to nothing,
so notebook runs are deterministic: :class:`FixedIntensity` (one value) and :class:`CsvIntensity`
(a CSV of ``time,value`` rows, a step function in time). Live providers
(:mod:`zeus_nb.carbon_http`: ElectricityMaps for carbon, OpenEI for prices) are used only when
configured with an API key.

A window's energy is spread evenly over its duration and weighted by the provider's values over
that span (exact when power is constant within the window or the intensity is). Window times are
Unix times through the GPU system's clock (:meth:`~zeus_nb.device.GPUSystem.wall_time`).
"""

from __future__ import annotations

import abc
import csv
from bisect import bisect_right
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from zeus_nb.errors import TraceFormatError

J_PER_KWH = 3.6e6


class IntensityProvider(abc.ABC):
    """A value per kWh over time: carbon intensity (gCO2eq/kWh) or electricity price (/kWh)."""

    unit: str = "per kWh"

    @abc.abstractmethod
    def value_at(self, t: float) -> float:
        """The value in force at Unix time ``t``."""

    def change_points(self, t0: float, t1: float) -> list[float]:
        """Unix times in (t0, t1) where the value may change (none for a constant)."""
        return []

    def mean(self, t0: float, t1: float) -> float:
        """Time-weighted mean value over [t0, t1] (the value at t0 for an empty span)."""
        if t1 <= t0:
            return self.value_at(t0)
        edges = [t0, *sorted(t for t in self.change_points(t0, t1) if t0 < t < t1), t1]
        total = sum(self.value_at(a) * (b - a) for a, b in zip(edges, edges[1:], strict=False))
        return total / (t1 - t0)


class CarbonIntensityProvider(IntensityProvider):
    """gCO2eq per kWh over time, with Zeus's provider methods."""

    unit = "gCO2eq/kWh"

    def get_current_carbon_intensity(self) -> float:
        return self.value_at(datetime.now(timezone.utc).timestamp())

    def get_recent_carbon_intensity(self) -> dict[datetime, float]:
        """Values of the last ``history_length`` hours, one per ``update_period``."""
        now = datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0)
        hours = [now - timedelta(hours=h) for h in range(self.history_length)]
        return {h: self.value_at(h.timestamp()) for h in reversed(hours)}

    @property
    def update_period(self) -> timedelta:
        return timedelta(hours=1)

    @property
    def history_length(self) -> int:
        return 24


class ElectricityPriceProvider(IntensityProvider):
    """Price per kWh over time (in the provider's currency, e.g. USD)."""

    unit = "$/kWh"

    def get_current_electricity_price(self) -> float:
        return self.value_at(datetime.now(timezone.utc).timestamp())


class FixedIntensity(CarbonIntensityProvider, ElectricityPriceProvider):
    """One value at all times: a carbon intensity or a price per kWh."""

    def __init__(self, value: float, unit: str | None = None):
        if not value >= 0:
            raise ValueError(f"an intensity or price must be >= 0, got {value}")
        self.value = float(value)
        if unit:
            self.unit = unit

    def value_at(self, t: float) -> float:
        return self.value


FixedPrice = FixedIntensity


def _parse_time(text: str) -> float:
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


class CsvIntensity(CarbonIntensityProvider, ElectricityPriceProvider):
    """Values from a CSV of ``time,value`` rows (a header row first).

    ``time`` is Unix seconds or ISO 8601 (UTC unless an offset is given). Each value holds from
    its time until the next row's; before the first row the first value holds, after the last
    row the last one. ``column`` picks the value column by name (default: the second).
    """

    def __init__(self, path: str | Path, column: str | None = None, unit: str | None = None):
        self.path = Path(path)
        if unit:
            self.unit = unit
        with self.path.open(newline="") as f:
            rows = list(csv.reader(f))
        if len(rows) < 2 or len(rows[0]) < 2:
            raise TraceFormatError(f"{self.path}: want a header and at least one time,value row")
        header = [h.strip() for h in rows[0]]
        col = 1 if column is None else header.index(column) if column in header else -1
        if col < 0:
            raise TraceFormatError(f"{self.path}: no column {column!r} (have {header})")
        points = []
        for n, row in enumerate(rows[1:], start=2):
            if not row:
                continue
            try:
                points.append((_parse_time(row[0]), float(row[col])))
            except (ValueError, IndexError):
                raise TraceFormatError(
                    f"{self.path}, line {n}: want a time (Unix seconds or ISO 8601) and a number"
                ) from None
        points.sort()
        if any(v < 0 for _, v in points):
            raise TraceFormatError(f"{self.path}: negative value")
        self.times = [t for t, _ in points]
        self.values = [v for _, v in points]

    def value_at(self, t: float) -> float:
        return self.values[max(0, bisect_right(self.times, t) - 1)]

    def change_points(self, t0: float, t1: float) -> list[float]:
        return [t for t in self.times if t0 < t < t1]


def _convert(energy: dict[int, float] | None, factor: float) -> dict[int, float] | None:
    return None if energy is None else {i: j / J_PER_KWH * factor for i, j in energy.items()}


@dataclass
class CarbonEmissionMeasurement:
    """Time (s), energy (J) and emissions (gCO2eq) of one window, per GPU and CPU package."""

    time: float
    gpu_energy: dict[int, float]
    gpu_carbon_emission: dict[int, float]
    cpu_energy: dict[int, float] | None = None
    cpu_carbon_emission: dict[int, float] | None = None
    dram_energy: dict[int, float] | None = None
    dram_carbon_emission: dict[int, float] | None = None

    @property
    def total_carbon_emission(self) -> float:
        """gCO2eq of everything measured: GPUs, CPUs and DRAM."""
        parts = (self.gpu_carbon_emission, self.cpu_carbon_emission, self.dram_carbon_emission)
        return sum(sum(p.values()) for p in parts if p)


@dataclass
class EnergyCostMeasurement:
    """Time (s), energy (J) and electricity cost of one window, per GPU and CPU package."""

    time: float
    gpu_energy: dict[int, float]
    gpu_energy_cost: dict[int, float]
    cpu_energy: dict[int, float] | None = None
    cpu_energy_cost: dict[int, float] | None = None
    dram_energy: dict[int, float] | None = None
    dram_energy_cost: dict[int, float] | None = None

    @property
    def total_energy_cost(self) -> float:
        """Cost of everything measured: GPUs, CPUs and DRAM."""
        parts = (self.gpu_energy_cost, self.cpu_energy_cost, self.dram_energy_cost)
        return sum(sum(p.values()) for p in parts if p)


class _ConvertingMonitor:
    """Windows of a ZeusMonitor whose energies are converted with a provider."""

    def __init__(self, provider, gpu_indices, cpu_indices, sync_execution_with, **monitor_args):
        from zeus_nb.monitor import ZeusMonitor

        if not isinstance(provider, IntensityProvider):
            raise TypeError(
                "the provider must be an IntensityProvider (FixedIntensity, CsvIntensity, "
                f"ElectricityMapsClient, OpenEIClient...), got {type(provider).__name__}"
            )
        self.provider = provider
        self.zeus_monitor = ZeusMonitor(
            gpu_indices, cpu_indices, sync_execution_with=sync_execution_with, **monitor_args
        )
        self.gpu_indices = self.zeus_monitor.gpu_indices
        self.cpu_indices = self.zeus_monitor.cpu_indices
        self._starts: dict[str, float] = {}

    def begin_window(self, key: str, sync_execution: bool = True) -> None:
        self.zeus_monitor.begin_window(key, sync_execution=sync_execution)
        self._starts[key] = self.zeus_monitor.system.wall_time()

    def _end(self, key: str, sync_execution: bool):
        m = self.zeus_monitor.end_window(key, sync_execution=sync_execution)
        t0 = self._starts.pop(key)
        factor = self.provider.mean(t0, t0 + m.time)
        return m, factor


class CarbonEmissionMonitor(_ConvertingMonitor):
    """Time, energy and gCO2eq of named windows (Zeus's ``CarbonEmissionMonitor``).

    Args:
        carbon_intensity_provider: where gCO2eq/kWh come from.
        gpu_indices, cpu_indices, sync_execution_with: as for ``ZeusMonitor``; keyword arguments
            ``backend=`` and ``system=`` choose the GPUs as there.
    """

    def __init__(
        self,
        carbon_intensity_provider: IntensityProvider,
        gpu_indices: list[int] | None = None,
        cpu_indices: list[int] | None = None,
        sync_execution_with: str = "torch",
        **monitor_args,
    ):
        super().__init__(
            carbon_intensity_provider, gpu_indices, cpu_indices, sync_execution_with, **monitor_args
        )
        self.carbon_intensity_provider = carbon_intensity_provider

    def end_window(self, key: str, sync_execution: bool = True) -> CarbonEmissionMeasurement:
        m, g_per_kwh = self._end(key, sync_execution)
        return CarbonEmissionMeasurement(
            time=m.time,
            gpu_energy=m.gpu_energy,
            gpu_carbon_emission=_convert(m.gpu_energy, g_per_kwh),
            cpu_energy=m.cpu_energy,
            cpu_carbon_emission=_convert(m.cpu_energy, g_per_kwh),
            dram_energy=m.dram_energy,
            dram_carbon_emission=_convert(m.dram_energy, g_per_kwh),
        )


class EnergyCostMonitor(_ConvertingMonitor):
    """Time, energy and electricity cost of named windows (Zeus's ``EnergyCostMonitor``).

    Args:
        electricity_price_provider: where prices per kWh come from.
        gpu_indices, cpu_indices, sync_execution_with: as for ``ZeusMonitor``.
    """

    def __init__(
        self,
        electricity_price_provider: IntensityProvider,
        gpu_indices: list[int] | None = None,
        cpu_indices: list[int] | None = None,
        sync_execution_with: str = "torch",
        **monitor_args,
    ):
        super().__init__(
            electricity_price_provider,
            gpu_indices,
            cpu_indices,
            sync_execution_with,
            **monitor_args,
        )
        self.electricity_price_provider = electricity_price_provider

    def end_window(self, key: str, sync_execution: bool = True) -> EnergyCostMeasurement:
        m, price = self._end(key, sync_execution)
        return EnergyCostMeasurement(
            time=m.time,
            gpu_energy=m.gpu_energy,
            gpu_energy_cost=_convert(m.gpu_energy, price),
            cpu_energy=m.cpu_energy,
            cpu_energy_cost=_convert(m.cpu_energy, price),
            dram_energy=m.dram_energy,
            dram_energy_cost=_convert(m.dram_energy, price),
        )


def __getattr__(name: str):
    """The HTTP providers live in :mod:`zeus_nb.carbon_http` (importable from here too)."""
    if name in ("ElectricityMapsClient", "ElectrictyMapsClient", "OpenEIClient"):
        from zeus_nb import carbon_http

        return getattr(carbon_http, name)
    raise AttributeError(f"module 'zeus_nb.carbon' has no attribute {name!r}")
