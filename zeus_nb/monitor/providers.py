"""Intensity providers: a value per kWh over time (gCO2eq/kWh or a price), and Zeus's interfaces.

:mod:`zeus_nb.monitor.carbon` and :mod:`zeus_nb.monitor.price` convert each window's GPU, CPU and
DRAM energy, hour by hour (:mod:`zeus_nb.monitor.polling`), with a provider of one of two kinds:

- Zeus's interfaces, :class:`CarbonIntensityProvider` (the current intensity and those of the
  last ``history_length`` hours) and :class:`ElectricityPriceProvider` (the current rate in
  OpenEI's shape): what the live services answer (``ElectrictyMapsClient``, ``OpenEIClient``).
- :class:`IntensityProvider`: a value known at any time (:meth:`~IntensityProvider.value_at`).
  The default providers call out to nothing, so notebook runs are deterministic:
  :class:`FixedIntensity` (one value) and :class:`CsvIntensity` (a CSV of ``time,value`` rows,
  a step function in time). They answer Zeus's calls too, and a window's energy within an hour
  is converted at their time-weighted mean over the span measured.

The live services are asked through :func:`get_json`, with a timeout; every network or format
failure is an :class:`~zeus_nb.errors.IntensityProviderError` subclass that says what to do.
"""

from __future__ import annotations

import abc
import time
from bisect import bisect_right
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import requests

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


class CarbonIntensityProvider(abc.ABC):
    """Zeus's carbon-intensity interface: gCO2eq/kWh now and over the recent hours."""

    @abc.abstractmethod
    def get_current_carbon_intensity(self) -> float:
        """The carbon intensity now, in gCO2eq/kWh."""

    @abc.abstractmethod
    def get_recent_carbon_intensity(self) -> dict[datetime, float]:
        """Intensities of the last :attr:`history_length` periods, by period start (UTC)."""

    @property
    @abc.abstractmethod
    def update_period(self) -> timedelta:
        """How long one intensity value holds."""

    @property
    @abc.abstractmethod
    def history_length(self) -> int:
        """How many periods :meth:`get_recent_carbon_intensity` covers."""


class ElectricityPriceProvider(abc.ABC):
    """Zeus's electricity-price interface: the current rate in OpenEI's shape."""

    @abc.abstractmethod
    def get_current_electricity_prices(self) -> dict[str, list]:
        """``energy_rate_structure`` (periods' tiers, ``rate`` in $/kWh) and the month x hour
        ``energy_weekday_schedule`` and ``energy_weekend_schedule`` of period numbers."""


class KnownIntensity(IntensityProvider, CarbonIntensityProvider, ElectricityPriceProvider):
    """A value known at any time; answers Zeus's provider calls from :meth:`value_at`."""

    def get_current_carbon_intensity(self) -> float:
        return self.value_at(datetime.now(timezone.utc).timestamp())

    def get_recent_carbon_intensity(self) -> dict[datetime, float]:
        now = datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0)
        hours = [now - timedelta(hours=h) for h in range(self.history_length)]
        return {h: self.value_at(h.timestamp()) for h in reversed(hours)}

    @property
    def update_period(self) -> timedelta:
        return timedelta(hours=1)

    @property
    def history_length(self) -> int:
        return 24

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


class FixedIntensity(KnownIntensity):
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


class CsvIntensity(KnownIntensity):
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


OFFLINE_HINT = "for offline or reproducible runs use FixedIntensity(value) or CsvIntensity(path)"


def api_key_from(api_key: str | None, variable: str) -> str | None:
    """The API key given, else the one in environment variable ``variable`` (None if neither)."""
    return api_key or env(variable) or None


def get_json(
    url: str,
    *,
    shown: str,
    error: type[IntensityProviderError],
    timeout: float,
    headers: dict[str, str] | None = None,
) -> tuple[Any, str]:
    """The JSON document at ``url`` and a short description of the answer for messages.

    Network failures and answers that are not JSON are ``error``; a JSON error document (HTTP
    4xx) is returned, for the caller to say what it lacks. ``shown`` names the service in
    messages (never the query, which may hold a key).
    """
    try:
        response = requests.get(url, headers=headers or {}, timeout=timeout)
    except requests.exceptions.Timeout:
        raise error(
            f"could not reach {shown} within {timeout:g} s; check the network; {OFFLINE_HINT}"
        ) from None
    except requests.exceptions.RequestException as e:
        reason = type(e).__name__  # the exception's text would show the query
        raise error(
            f"could not reach {shown} ({reason}); check the network; {OFFLINE_HINT}"
        ) from None
    text = str(getattr(response, "text", ""))[:300]
    status = getattr(response, "status_code", None)
    answer = f"HTTP {status}: {text}" if status is not None else text
    try:
        return response.json(), answer
    except ValueError:
        raise error(f"{shown} did not answer JSON ({answer}); {OFFLINE_HINT}") from None


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
