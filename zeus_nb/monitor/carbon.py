"""Grams of CO2 of measured energy, with Zeus's ``zeus.monitor.carbon`` shapes.

:class:`CarbonEmissionMonitor` measures windows with a :class:`~zeus_nb.monitor.ZeusMonitor`
and converts each hour's energy at that hour's carbon intensity
(:mod:`zeus_nb.monitor.polling`). :class:`ElectrictyMapsClient` (Zeus's spelling;
``ElectricityMapsClient`` too) asks the ElectricityMaps API; the offline providers
``FixedIntensity`` and ``CsvIntensity`` (:mod:`zeus_nb.monitor.providers`) keep runs
reproducible.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from dateutil import parser

from zeus_nb.errors import InputError, IntensityProviderError
from zeus_nb.inputs import check_record
from zeus_nb.inputs.kinds import ELECTRICITYMAPS_POINT
from zeus_nb.monitor.energy import ZeusMonitor
from zeus_nb.monitor.polling import (
    ONE_HOUR,
    Op,
    PollingMonitor,
    WindowLedger,
    serve,
    value_for,
)
from zeus_nb.monitor.providers import (
    OFFLINE_HINT,
    CarbonIntensityProvider,
    CsvIntensity,
    FixedIntensity,
    IntensityProvider,
    api_key_from,
    get_json,
)


class ZeusCarbonIntensityHTTPError(IntensityProviderError):
    """The carbon-intensity service could not be reached or did not answer JSON."""


class ZeusCarbonIntensityNotFoundError(IntensityProviderError):
    """The carbon-intensity service has no usable value for the location."""


__all__ = [
    "CarbonEmissionMeasurement",
    "CarbonEmissionMonitor",
    "CarbonIntensityProvider",
    "CsvIntensity",
    "ElectricityMapsClient",
    "ElectrictyMapsClient",
    "FixedIntensity",
    "IntensityProvider",
    "Op",
    "ZeusCarbonIntensityHTTPError",
    "ZeusCarbonIntensityNotFoundError",
]


class ElectrictyMapsClient(CarbonIntensityProvider):
    """Carbon intensity from the ElectricityMaps API (``/carbon-intensity/latest`` and
    ``/history``), asked afresh each time.

    Args:
        location: (latitude, longitude).
        estimate: accept estimated values where measured ones are missing.
        emission_factor_type: ``"direct"`` or ``"lifecycle"``.
        api_key: sent as the ``auth-token`` header (default ``ZEUS_NB_ELECTRICITYMAPS_KEY``;
            none is sent without one, as in Zeus).
        base_url, timeout: where to ask, seconds to wait.
    """

    def __init__(
        self,
        location: tuple[float, float],
        estimate: bool = False,
        emission_factor_type: str = "direct",
        *,
        api_key: str | None = None,
        base_url: str = "https://api.electricitymap.org/v3",
        timeout: float = 10.0,
    ) -> None:
        self.lat, self.long = location
        self.estimate = estimate
        self.emission_factor_type = emission_factor_type
        self._api_key = api_key_from(api_key, "ZEUS_NB_ELECTRICITYMAPS_KEY")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout

    def _ask(self, what: str) -> tuple[Any, str]:
        url = (
            f"{self.base_url}/carbon-intensity/{what}?lat={self.lat}&lon={self.long}"
            f"&disableEstimations={not self.estimate}"
            f"&emissionFactorType={self.emission_factor_type}"
        )
        return get_json(
            url,
            shown=f"ElectricityMaps ({self.base_url})",
            error=ZeusCarbonIntensityHTTPError,
            timeout=self.timeout,
            headers={"auth-token": self._api_key} if self._api_key else None,
        )

    def _not_found(self, what: str, answer: str, why: object = "") -> IntensityProviderError:
        return ZeusCarbonIntensityNotFoundError(
            f"ElectricityMaps has no {what} carbon intensity at ({self.lat}, {self.long}) with "
            f"estimate={self.estimate} and emission_factor_type={self.emission_factor_type!r}"
            f"{f' ({why})' if why else ''}; try estimate=True, or check the API key "
            f"(api_key= or ZEUS_NB_ELECTRICITYMAPS_KEY); {OFFLINE_HINT}. Answer: {answer}"
        )

    def get_current_carbon_intensity(self) -> float:
        """The latest carbon intensity in gCO2eq/kWh."""
        doc, answer = self._ask("latest")
        try:
            return doc["carbonIntensity"]
        except (KeyError, TypeError):
            raise self._not_found("current", answer) from None

    def get_recent_carbon_intensity(self) -> dict[datetime, float]:
        """Intensities of the last 24 hours, by hour (UTC)."""
        doc, answer = self._ask("history")
        try:
            history = doc["history"]
            values = {}
            for i, entry in enumerate(history):
                if entry.get("carbonIntensity") is None:
                    continue  # an hour the service has no value for
                row = check_record(entry, ELECTRICITYMAPS_POINT, f"ElectricityMaps history[{i}]")
                values[parser.parse(entry["datetime"])] = row["carbonIntensity"]
        except (KeyError, TypeError, AttributeError) as e:
            raise self._not_found("recent", answer, e) from None
        except (InputError, ValueError) as e:
            raise self._not_found("recent", answer, e) from None
        if not values:
            raise self._not_found("recent", answer)
        return values

    @property
    def update_period(self) -> timedelta:
        return ONE_HOUR

    @property
    def history_length(self) -> int:
        return 24


ElectricityMapsClient = ElectrictyMapsClient  # the service's own spelling


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


def _intensities(provider: Any):
    """How a window's periods get their gCO2eq/kWh: a provider known at any time gives its mean
    over the span measured; Zeus's providers give their recent hours, asked when converting."""
    if isinstance(provider, IntensityProvider):
        return lambda: lambda p: provider.mean(p.t0.timestamp(), p.t1.timestamp())

    def ask():
        table = provider.get_recent_carbon_intensity()
        return lambda p: value_for(table, p.start, ZeusCarbonIntensityNotFoundError, "carbon")

    return ask


def _ledger(provider: Any, monitor: Any) -> WindowLedger:
    period = getattr(provider, "update_period", ONE_HOUR)
    history = getattr(provider, "history_length", None)
    return WindowLedger(monitor, period, _intensities(provider), history - 1 if history else None)


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _polling_process(
    command_q: Any,
    finished_q: Any,
    gpu_indices: list[int],
    cpu_indices: list[int],
    carbon_intensity_provider: Any,
    *,
    monitor_args: dict[str, Any] | None = None,
    ledger_ready: Callable[[WindowLedger], None] | None = None,
) -> None:
    """Zeus's polling loop (:func:`~zeus_nb.monitor.polling.serve`) converting to gCO2eq.

    Measures with a ZeusMonitor of its own (``monitor_args`` add e.g. ``system=``; the
    ledger is handed to ``ledger_ready``, for the monitor that started the loop); answers
    each ``(Op.END, key)`` with the window's (gpu, cpu, dram) gCO2eq on ``finished_q``.
    """

    def make() -> WindowLedger:
        monitor = ZeusMonitor(
            gpu_indices=gpu_indices, cpu_indices=cpu_indices, **(monitor_args or {})
        )
        ledger = _ledger(carbon_intensity_provider, monitor)
        if ledger_ready is not None:
            ledger_ready(ledger)
        return ledger

    serve(command_q, finished_q, make, _now)


class CarbonEmissionMonitor(PollingMonitor):
    """Time, energy and gCO2eq of named windows (Zeus's ``CarbonEmissionMonitor``).

    Each hour's energy is converted at that hour's intensity, on a polling thread of this
    process (on a simulated GPU's virtual clock, at ``end_window`` on the simulated time).

    Args:
        carbon_intensity_provider: where gCO2eq/kWh come from (``ElectrictyMapsClient``,
            ``FixedIntensity``, ``CsvIntensity``, or any Zeus-style provider).
        gpu_indices, cpu_indices, sync_execution_with: as for ``ZeusMonitor``; keyword arguments
            such as ``backend=`` and ``system=`` choose the GPUs as there.
    """

    def __init__(
        self,
        carbon_intensity_provider: Any,
        gpu_indices: list[int] | None = None,
        cpu_indices: list[int] | None = None,
        sync_execution_with: str = "torch",
        **monitor_args: Any,
    ) -> None:
        if not isinstance(carbon_intensity_provider, (CarbonIntensityProvider, IntensityProvider)):
            raise TypeError(
                "the provider must be a CarbonIntensityProvider or IntensityProvider "
                "(ElectrictyMapsClient, FixedIntensity, CsvIntensity...), got "
                f"{type(carbon_intensity_provider).__name__}"
            )
        monitor = ZeusMonitor(
            gpu_indices, cpu_indices, sync_execution_with=sync_execution_with, **monitor_args
        )
        super().__init__(carbon_intensity_provider, monitor)
        self.carbon_intensity_provider = carbon_intensity_provider

    def _poll(self, *args: Any, **kwargs: Any) -> None:
        _polling_process(*args, **kwargs)

    def _ledger(self) -> WindowLedger:
        monitor = ZeusMonitor(self.gpu_indices, self.cpu_indices, **self._monitor_args)
        return _ledger(self.carbon_intensity_provider, monitor)

    def _measurement(self, m: Any, gpu: dict, cpu: dict, dram: dict) -> CarbonEmissionMeasurement:
        return CarbonEmissionMeasurement(
            time=m.time,
            gpu_energy=m.gpu_energy,
            gpu_carbon_emission=gpu,
            cpu_energy=m.cpu_energy,
            cpu_carbon_emission=cpu or None,
            dram_energy=m.dram_energy,
            dram_carbon_emission=dram or None,
        )

    def begin_window(self, key: str, sync_execution: bool = True) -> None:
        """Begin window ``key`` (names may nest and overlap, as in ZeusMonitor)."""
        super().begin_window(key, sync_execution)

    def end_window(self, key: str, sync_execution: bool = True) -> CarbonEmissionMeasurement:
        """End window ``key``: its time, energy and gCO2eq."""
        return super().end_window(key, sync_execution)
