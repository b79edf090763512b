"""Grams of CO2 of measured energy, with Zeus's ``zeus.monitor.carbon`` shapes.

:class:`CarbonEmissionMonitor` wraps a :class:`~zeus_nb.monitor.ZeusMonitor` and converts each
window's energy with a carbon-intensity provider (:mod:`zeus_nb.monitor.providers`);
:class:`ElectricityMapsClient` is the live provider (an API key is needed).
"""

from __future__ import annotations

from dataclasses import dataclass

from zeus_nb.errors import IntensityProviderError
from zeus_nb.inputs import check_record
from zeus_nb.inputs.kinds import ELECTRICITYMAPS_POINT
from zeus_nb.monitor.providers import (
    OFFLINE_HINT,
    CarbonIntensityProvider,
    CsvIntensity,
    FixedIntensity,
    IntensityProvider,
    _Cached,
    _convert,
    _ConvertingMonitor,
    _get_json,
    _key,
)


class ZeusCarbonIntensityHTTPError(IntensityProviderError):
    """The carbon-intensity service could not be reached or refused the request."""


class ZeusCarbonIntensityNotFoundError(IntensityProviderError):
    """The carbon-intensity service has no usable value for the location."""


__all__ = [
    "ZeusCarbonIntensityHTTPError",
    "ZeusCarbonIntensityNotFoundError",
    "CarbonEmissionMeasurement",
    "CarbonEmissionMonitor",
    "CarbonIntensityProvider",
    "CsvIntensity",
    "ElectricityMapsClient",
    "ElectrictyMapsClient",
    "FixedIntensity",
    "IntensityProvider",
]


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


class ElectricityMapsClient(_Cached, CarbonIntensityProvider):
    """Carbon intensity from the ElectricityMaps API (``/carbon-intensity/history``).

    Args:
        location: (latitude, longitude).
        estimate: accept estimated values where measured ones are missing.
        emission_factor_type: ``"direct"`` or ``"lifecycle"``.
        api_key: the ``auth-token`` (default ``ZEUS_NB_ELECTRICITYMAPS_KEY``).
        base_url, timeout, cache_seconds: where to ask, seconds to wait, seconds to reuse.
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
        cache_seconds: float = 900.0,
    ):
        self.lat, self.long = location
        self.estimate = estimate
        self.emission_factor_type = emission_factor_type
        self._api_key = _key(api_key, "ZEUS_NB_ELECTRICITYMAPS_KEY", "ElectricityMaps")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.cache_seconds = cache_seconds

    def _fetch(self) -> list[tuple[float, float]]:
        doc = _get_json(
            f"{self.base_url}/carbon-intensity/history",
            {
                "lat": self.lat,
                "lon": self.long,
                "disableEstimations": str(not self.estimate).lower(),
                "emissionFactorType": self.emission_factor_type,
            },
            {"auth-token": self._api_key},
            self.timeout,
            ZeusCarbonIntensityHTTPError,
        )
        try:
            rows = [
                check_record(h, ELECTRICITYMAPS_POINT, f"ElectricityMaps history[{i}]")
                for i, h in enumerate(doc["history"])
                if h.get("carbonIntensity") is not None
            ]
            points = sorted((r["datetime"], r["carbonIntensity"]) for r in rows)
        except (KeyError, TypeError, ValueError) as e:
            raise ZeusCarbonIntensityNotFoundError(
                f"ElectricityMaps answered without a usable history ({e}): {str(doc)[:200]}"
            ) from e
        if not points:
            raise ZeusCarbonIntensityNotFoundError(
                f"ElectricityMaps has no carbon intensity at ({self.lat}, {self.long}); try "
                f"estimate=True; {OFFLINE_HINT}"
            )
        return points

    def value_at(self, t: float) -> float:
        points = self.document()
        earlier = [v for ts, v in points if ts <= t]
        return earlier[-1] if earlier else points[0][1]

    def change_points(self, t0: float, t1: float) -> list[float]:
        return [ts for ts, _ in self.document() if t0 < ts < t1]


ElectrictyMapsClient = ElectricityMapsClient  # Zeus's spelling
