"""Intensity providers: a value per kWh over time (gCO2eq/kWh or a price), and how windows use them.

:mod:`zeus_nb.monitor.carbon` and :mod:`zeus_nb.monitor.price` convert each window's GPU, CPU and
DRAM energy with a provider. The default providers call out to nothing, so notebook runs are
deterministic: :class:`FixedIntensity` (one value) and :class:`CsvIntensity` (a CSV of
``time,value`` rows, a step function in time). Live providers (ElectricityMaps for carbon, OpenEI
for prices) are used only when configured with an API key; they share the HTTP helpers here, which
ask with a timeout and turn every network or format failure into an
:class:`~zeus_nb.errors.IntensityProviderError` that says what to do.

A window's energy is spread evenly over its duration and weighted by the provider's values over
that span (exact when power is constant within the window or the intensity is). Window times are
Unix times through the GPU system's clock (:meth:`~zeus_nb.device.GPUSystem.wall_time`).
"""

from __future__ import annotations

import abc
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from bisect import bisect_right
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from zeus_nb.errors import InputError, IntensityProviderError, TraceFormatError, UnsupportedError
from zeus_nb.inputs import read_table, reader
from zeus_nb.inputs.env import env
from zeus_nb.inputs.kinds import INTENSITY_CSV, intensity_csv
from zeus_nb.inputs.table import read_header

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

    def get_current_electricity_prices(self) -> dict[str, list]:
        """The price as an OpenEI rate (Zeus's shape): one tier, every month and hour in period 0.

        Only a price that is the same at all times has this form; a varying provider says so.
        """
        value = self.value_at(datetime.now(timezone.utc).timestamp())
        if self.change_points(float("-inf"), float("inf")):
            raise UnsupportedError(
                f"{type(self).__name__} varies over time, which an OpenEI rate schedule cannot "
                "express; use value_at(unix_time) or get_current_electricity_price()"
            )
        schedule = [[0] * 24 for _ in range(12)]
        return {
            "energy_rate_structure": [[{"rate": value}]],
            "energy_weekday_schedule": schedule,
            "energy_weekend_schedule": [row[:] for row in schedule],
        }


class FixedIntensity(CarbonIntensityProvider, ElectricityPriceProvider):
    """One value at all times: a carbon intensity or a price per kWh."""

    def __init__(self, value: float, unit: str | None = None):
        if not value >= 0:
            raise InputError(f"an intensity or price must be >= 0, got {value}")
        self.value = float(value)
        if unit:
            self.unit = unit

    def value_at(self, t: float) -> float:
        return self.value


FixedPrice = FixedIntensity


class CsvIntensity(CarbonIntensityProvider, ElectricityPriceProvider):
    """Values from a CSV of ``time,value`` rows (a header row first).

    ``time`` is Unix seconds or ISO 8601 (UTC unless an offset is given). Each value holds from
    its time until the next row's; before the first row the first value holds, after the last
    row the last one. ``column`` picks the value column by name (default: the second). Read
    through :func:`zeus_nb.inputs.kinds.intensity_csv`: every value finite and >= 0, every
    time once.
    """

    def __init__(self, path: str | Path, column: str | None = None, unit: str | None = None):
        self.path = Path(path)
        if unit:
            self.unit = unit
        points = read_intensity_csv(self.path, column)
        self.times = [t for t, _ in points]
        self.values = [v for _, v in points]

    def value_at(self, t: float) -> float:
        return self.values[max(0, bisect_right(self.times, t) - 1)]

    def change_points(self, t0: float, t1: float) -> list[float]:
        return [t for t in self.times if t0 < t < t1]


@reader(INTENSITY_CSV)
def read_intensity_csv(path: Path, column: str | None = None) -> list[tuple[float, float]]:
    """Sorted (time, value) points of a ``time,value`` CSV; ``column`` names the value column
    (default: the second column of the header)."""
    header = read_header(path, INTENSITY_CSV)
    if header is None or len(header) < 2:
        raise TraceFormatError(f"{path}: want a header and at least one time,value row")
    header_time = header[0]  # the first column holds the times, whatever its name
    name = column if column is not None else header[1]
    if name not in header:
        raise TraceFormatError(f"{path}: no column {name!r} (have {header})")
    schema = intensity_csv(name, header_time)
    table = read_table(path, schema)
    return sorted((r[header_time], r[name]) for r in table.rows)


def _convert(energy: dict[int, float] | None, factor: float) -> dict[int, float] | None:
    return None if energy is None else {i: j / J_PER_KWH * factor for i, j in energy.items()}


class _ConvertingMonitor:
    """Windows of a ZeusMonitor whose energies are converted with a provider."""

    def __init__(self, provider, gpu_indices, cpu_indices, sync_execution_with, **monitor_args):
        from zeus_nb.monitor.energy import ZeusMonitor

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


OFFLINE_HINT = "for offline or reproducible runs use FixedIntensity(value) or CsvIntensity(path)"


def _key(api_key: str | None, variable: str, service: str) -> str:
    key = api_key or env(variable)
    if not key:
        raise IntensityProviderError(
            f"{service} needs an API key: pass api_key=... or set {variable}; {OFFLINE_HINT}"
        )
    return key


def _get_json(
    url: str,
    params: dict[str, Any],
    headers: dict[str, str],
    timeout: float,
    error: type[IntensityProviderError] = IntensityProviderError,
) -> Any:
    """The JSON document at ``url``; any failure is ``error`` (the caller's Zeus error class)."""
    full = f"{url}?{urllib.parse.urlencode(params)}"
    shown = url  # never print the query: it may hold the key
    request = urllib.request.Request(full, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read().decode())
    except urllib.error.HTTPError as e:
        raise error(
            f"{shown} answered HTTP {e.code} ({e.reason}); check the API key and location; "
            f"{OFFLINE_HINT}"
        ) from e
    except (urllib.error.URLError, TimeoutError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise error(
            f"could not reach {shown} within {timeout:g} s ({reason}); check the network; "
            f"{OFFLINE_HINT}"
        ) from e
    except (ValueError, UnicodeDecodeError) as e:
        raise error(f"{shown} did not answer JSON: {e}") from e


class _Cached:
    """One cached JSON document per provider, refreshed after ``cache_seconds``."""

    cache_seconds: float
    _doc: Any = None
    _fetched: float = -float("inf")

    def _fetch(self) -> Any: ...

    def document(self) -> Any:
        if self._doc is None or time.monotonic() - self._fetched > self.cache_seconds:
            self._doc = self._fetch()
            self._fetched = time.monotonic()
        return self._doc
