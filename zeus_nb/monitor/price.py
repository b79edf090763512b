"""Electricity cost of measured energy, with Zeus's ``zeus.monitor.price`` shapes.

:class:`EnergyCostMonitor` measures windows with a :class:`~zeus_nb.monitor.ZeusMonitor` and
converts each hour's energy at that hour's price (:mod:`zeus_nb.monitor.polling`).
:class:`OpenEIClient` reads a rate of the OpenEI Utility Rate Database; the offline providers
``FixedIntensity`` (``FixedPrice``) and ``CsvIntensity`` keep runs reproducible.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from zeus_nb.errors import IntensityProviderError
from zeus_nb.inputs import check_record
from zeus_nb.inputs.kinds import OPENEI_PERIOD
from zeus_nb.monitor.energy import ZeusMonitor
from zeus_nb.monitor.polling import ONE_HOUR, Op, PollingMonitor, WindowLedger, serve
from zeus_nb.monitor.providers import (
    OFFLINE_HINT,
    CsvIntensity,
    ElectricityPriceProvider,
    FixedIntensity,
    FixedPrice,
    IntensityProvider,
    _Cached,
    api_key_from,
    get_json,
)

log = logging.getLogger(__name__)

#: Where a free OpenEI API key is issued (zeus-nb ships none: a key is its owner's quota).
OPENEI_SIGNUP = "https://openei.org/services/api/signup/"


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
    "Op",
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


class OpenEIClient(_Cached, IntensityProvider, ElectricityPriceProvider):
    """Electricity price from the OpenEI Utility Rate Database (``/utility_rates``).

    The rate named ``label`` gives a price per period (first tier's ``rate``, $/kWh) and a
    month x hour schedule of periods for weekdays and weekends; the price at a time is that of
    its local month, hour and day type.

    Args:
        location: (latitude, longitude).
        label: the rate's unique label in the database.
        sector: ``Residential``, ``Commercial``, ``Industrial`` or ``Lighting``.
        radius: search radius in miles.
        api_key: your OpenEI API key (default ``ZEUS_NB_OPENEI_KEY``); without one the
            constructor raises, saying where to get one.
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
        key = api_key_from(api_key, "ZEUS_NB_OPENEI_KEY")
        if not key:
            raise IntensityProviderError(
                f"OpenEI needs an API key: get a free one at {OPENEI_SIGNUP}, then pass "
                f"api_key=... or set ZEUS_NB_OPENEI_KEY; {OFFLINE_HINT}"
            )
        self._api_key = key
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.cache_seconds = cache_seconds

    def _fetch(self) -> dict[str, Any]:
        url = (
            f"{self.base_url}?version=latest&format=json&api_key={self._api_key}"
            f"&lat={self.lat}&lon={self.long}&radius={self.radius}"
            f"&detail=full&sector={self.sector}"
        )
        doc, answer = get_json(
            url,
            shown=f"OpenEI ({self.base_url})",
            error=ZeusElectricityPriceHTTPError,
            timeout=self.timeout,
        )
        items = doc.get("items") if isinstance(doc, dict) else None
        rate = next(
            (i for i in items or [] if isinstance(i, dict) and i.get("label") == self.label),
            None,
        )
        if rate is None:
            errors = doc.get("errors") if isinstance(doc, dict) else None
            raise ZeusElectricityPriceNotFoundError(
                f"OpenEI has no rate labelled {self.label!r} near ({self.lat}, {self.long}) in "
                f"the {self.sector} sector"
                + (f" ({'; '.join(map(str, errors))})" if errors else "")
                + f"; check the label, location and API key; {OFFLINE_HINT}"
                + ("" if items is not None else f". Answer: {answer}")
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


def rate_at(rates: dict[str, list], t: datetime) -> float:
    """The price at ``t`` (its local month, hour and day type) of a rate in OpenEI's shape."""
    local = t.astimezone()
    weekend = local.weekday() >= 5
    table = rates["energy_weekend_schedule" if weekend else "energy_weekday_schedule"]
    try:
        period = int(table[local.month - 1][local.hour])
        return float(rates["energy_rate_structure"][period][0]["rate"])
    except (IndexError, KeyError, TypeError, ValueError) as e:
        raise ZeusElectricityPriceNotFoundError(
            f"the rate schedule has no price for {local:%B, %A %H:00} ({e})"
        ) from e


def _prices(provider: Any):
    """How a window's periods get their price per kWh: a provider known at any time gives its
    mean over the span measured; a Zeus-style provider's rate is asked once, then looked up."""
    if isinstance(provider, IntensityProvider):
        return lambda: lambda p: provider.mean(p.t0.timestamp(), p.t1.timestamp())
    rates: dict[str, list] = {}

    def ask():
        if not rates:
            rates.update(provider.get_current_electricity_prices())
        return lambda p: rate_at(rates, p.start)

    return ask


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _polling_process(
    command_q: Any,
    finished_q: Any,
    gpu_indices: list[int],
    cpu_indices: list[int],
    electricity_price_provider: Any,
    *,
    monitor_args: dict[str, Any] | None = None,
    ledger_ready: Callable[[WindowLedger], None] | None = None,
) -> None:
    """Zeus's polling loop (:func:`~zeus_nb.monitor.polling.serve`) converting to cost.

    Measures with a ZeusMonitor of its own (``monitor_args`` add e.g. ``system=``; the
    ledger is handed to ``ledger_ready``, for the monitor that started the loop); answers
    each ``(Op.END, key)`` with the window's (gpu, cpu, dram) cost on ``finished_q``.
    """

    def make() -> WindowLedger:
        monitor = ZeusMonitor(
            gpu_indices=gpu_indices, cpu_indices=cpu_indices, **(monitor_args or {})
        )
        ledger = WindowLedger(monitor, ONE_HOUR, _prices(electricity_price_provider))
        if ledger_ready is not None:
            ledger_ready(ledger)
        return ledger

    serve(command_q, finished_q, make, _now)


class EnergyCostMonitor(PollingMonitor):
    """Time, energy and electricity cost of named windows (Zeus's ``EnergyCostMonitor``).

    Each hour's energy is converted at that hour's price, on a polling thread of this process
    (on a simulated GPU's virtual clock, at ``end_window`` on the simulated time).

    Args:
        electricity_price_provider: where prices per kWh come from (``OpenEIClient``,
            ``FixedPrice``, ``CsvIntensity``, or any Zeus-style provider).
        gpu_indices, cpu_indices, sync_execution_with: as for ``ZeusMonitor``; keyword arguments
            such as ``backend=`` and ``system=`` choose the GPUs as there.
    """

    def __init__(
        self,
        electricity_price_provider: Any,
        gpu_indices: list[int] | None = None,
        cpu_indices: list[int] | None = None,
        sync_execution_with: str = "torch",
        **monitor_args: Any,
    ) -> None:
        if not isinstance(
            electricity_price_provider, (ElectricityPriceProvider, IntensityProvider)
        ):
            raise TypeError(
                "the provider must be an ElectricityPriceProvider or IntensityProvider "
                "(OpenEIClient, FixedPrice, CsvIntensity...), got "
                f"{type(electricity_price_provider).__name__}"
            )
        monitor_args.setdefault("approx_instant_energy", True)
        monitor = ZeusMonitor(
            gpu_indices, cpu_indices, sync_execution_with=sync_execution_with, **monitor_args
        )
        super().__init__(electricity_price_provider, monitor)
        self.electricity_price_provider = electricity_price_provider

    def _poll(self, *args: Any, **kwargs: Any) -> None:
        _polling_process(*args, **kwargs)

    def _ledger(self) -> WindowLedger:
        monitor = ZeusMonitor(self.gpu_indices, self.cpu_indices, **self._monitor_args)
        return WindowLedger(monitor, ONE_HOUR, _prices(self.electricity_price_provider))

    def _measurement(self, m: Any, gpu: dict, cpu: dict, dram: dict) -> EnergyCostMeasurement:
        return EnergyCostMeasurement(
            time=m.time,
            gpu_energy=m.gpu_energy,
            gpu_energy_cost=gpu,
            cpu_energy=m.cpu_energy,
            cpu_energy_cost=cpu or None,
            dram_energy=m.dram_energy,
            dram_energy_cost=dram or None,
        )

    def begin_window(self, key: str, sync_execution: bool = True) -> None:
        """Begin window ``key`` (names may nest and overlap, as in ZeusMonitor)."""
        super().begin_window(key, sync_execution)

    def end_window(self, key: str, sync_execution: bool = True) -> EnergyCostMeasurement:
        """End window ``key``: its time, energy and cost."""
        return super().end_window(key, sync_execution)
