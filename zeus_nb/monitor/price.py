"""Electricity cost of measured energy, with Zeus's ``zeus.monitor.price`` shapes.

:class:`EnergyCostMonitor` wraps a :class:`~zeus_nb.monitor.ZeusMonitor` and converts each
window's energy with a price provider (:mod:`zeus_nb.monitor.providers`); :class:`OpenEIClient`
is the live provider (an API key is needed).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from zeus_nb.errors import IntensityProviderError
from zeus_nb.inputs import check_record
from zeus_nb.inputs.kinds import OPENEI_PERIOD
from zeus_nb.monitor.providers import (
    CsvIntensity,
    ElectricityPriceProvider,
    FixedIntensity,
    FixedPrice,
    IntensityProvider,
    _Cached,
    _convert,
    _ConvertingMonitor,
    _get_json,
    _key,
)


class ZeusElectricityPriceHTTPError(IntensityProviderError):
    """The electricity-price service could not be reached or refused the request."""


class ZeusElectricityPriceNotFoundError(IntensityProviderError):
    """The electricity-price service has no usable rate for the location and label."""


def get_time_info() -> tuple[str, str, int]:
    """This moment's (month name, ``"Weekday"`` or ``"Weekend"``, hour), in local time."""
    now = datetime.now()
    return now.strftime("%B"), "Weekend" if now.weekday() >= 5 else "Weekday", now.hour


__all__ = [
    "ZeusElectricityPriceHTTPError",
    "ZeusElectricityPriceNotFoundError",
    "get_time_info",
    "CsvIntensity",
    "ElectricityPriceProvider",
    "EnergyCostMeasurement",
    "EnergyCostMonitor",
    "FixedIntensity",
    "FixedPrice",
    "IntensityProvider",
    "OpenEIClient",
]


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


class OpenEIClient(_Cached, ElectricityPriceProvider):
    """Electricity price from the OpenEI Utility Rate Database (``/utility_rates``).

    The rate named ``label`` gives a price per period (first tier's ``rate``, $/kWh) and a
    month x hour schedule of periods for weekdays and weekends; the price at a time is that of
    its local month, hour and day type.

    Args:
        location: (latitude, longitude).
        label: the rate's unique label in the database.
        sector: ``Residential``, ``Commercial``, ``Industrial`` or ``Lighting``.
        radius: search radius in miles.
        api_key: the API key (default ``ZEUS_NB_OPENEI_KEY``).
        base_url, timeout, cache_seconds: where to ask, seconds to wait, seconds to reuse.
    """

    def __init__(
        self,
        location: tuple[float, float],
        label: str,
        sector: str = "Residential",
        radius: int = 0,
        *,
        api_key: str | None = None,
        base_url: str = "https://api.openei.org/utility_rates",
        timeout: float = 10.0,
        cache_seconds: float = 86400.0,
    ):
        self.lat, self.long = location
        self.label, self.sector, self.radius = label, sector, radius
        self._api_key = _key(api_key, "ZEUS_NB_OPENEI_KEY", "OpenEI")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.cache_seconds = cache_seconds

    def _fetch(self) -> dict[str, Any]:
        doc = _get_json(
            self.base_url,
            {
                "version": "latest",
                "format": "json",
                "api_key": self._api_key,
                "lat": self.lat,
                "lon": self.long,
                "radius": self.radius,
                "detail": "full",
                "sector": self.sector,
            },
            {},
            self.timeout,
            ZeusElectricityPriceHTTPError,
        )
        items = doc.get("items", []) if isinstance(doc, dict) else []
        rate = next((i for i in items if i.get("label") == self.label), None)
        if rate is None:
            raise ZeusElectricityPriceNotFoundError(
                f"OpenEI has no rate labelled {self.label!r} near ({self.lat}, {self.long}) in "
                f"the {self.sector} sector"
            )
        try:
            return {
                "prices": [
                    check_record(period[0], OPENEI_PERIOD, f"OpenEI rate {self.label!r}")["rate"]
                    for period in rate["energyratestructure"]
                ],
                "weekday": rate["energyweekdayschedule"],
                "weekend": rate["energyweekendschedule"],
                "structure": rate["energyratestructure"],
            }
        except (KeyError, IndexError, TypeError, ValueError) as e:
            raise ZeusElectricityPriceNotFoundError(
                f"OpenEI rate {self.label!r} is incomplete: {e}"
            ) from e

    def get_current_electricity_prices(self) -> dict[str, list]:
        """The rate as OpenEI gives it (Zeus's shape): its tiers and the period schedules."""
        rates = self.document()
        return {
            "energy_rate_structure": rates["structure"],
            "energy_weekday_schedule": rates["weekday"],
            "energy_weekend_schedule": rates["weekend"],
        }

    @staticmethod
    def search_json(data, key_name, target_value, return_value) -> list:
        """Every ``return_value`` beside a ``key_name: target_value`` pair in nested JSON."""
        found = []
        if isinstance(data, dict):
            if data.get(key_name, object()) == target_value:
                found.append(data.get(return_value))
            values = data.values()
        elif isinstance(data, list):
            values = data
        else:
            return found
        for value in values:
            found += OpenEIClient.search_json(value, key_name, target_value, return_value)
        return found

    def get_current_electricity_price(self) -> float:  # type: ignore[override]
        return self.value_at(time.time())

    def value_at(self, t: float) -> float:
        rates = self.document()
        local = datetime.fromtimestamp(t, tz=timezone.utc).astimezone()
        table = rates["weekend"] if local.weekday() >= 5 else rates["weekday"]
        try:
            return rates["prices"][int(table[local.month - 1][local.hour])]
        except (IndexError, TypeError, ValueError) as e:
            raise ZeusElectricityPriceNotFoundError(
                f"OpenEI schedule has no entry for {local}: {e}"
            ) from e

    def change_points(self, t0: float, t1: float) -> list[float]:
        start = int(t0 // 3600 + 1) * 3600
        return [float(h) for h in range(start, int(t1) + 1, 3600) if t0 < h < t1][:10_000]
