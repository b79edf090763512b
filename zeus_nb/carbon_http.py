"""Live intensity providers over HTTP: ElectricityMaps (gCO2eq/kWh) and OpenEI (price/kWh).

They call out only when configured with an API key (argument, or ``ZEUS_NB_ELECTRICITYMAPS_KEY``
/ ``ZEUS_NB_OPENEI_KEY``), with a timeout, and turn every network or format failure into an
:class:`~zeus_nb.errors.IntensityProviderError` that says what to do. ``base_url`` points them at
another server (the tests run one on 127.0.0.1). Responses are cached for ``cache_seconds``.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timezone
from typing import Any

from zeus_nb.carbon import CarbonIntensityProvider, ElectricityPriceProvider, _parse_time
from zeus_nb.errors import IntensityProviderError

OFFLINE_HINT = "for offline or reproducible runs use FixedIntensity(value) or CsvIntensity(path)"


def _key(api_key: str | None, env: str, service: str) -> str:
    key = api_key or os.environ.get(env)
    if not key:
        raise IntensityProviderError(
            f"{service} needs an API key: pass api_key=... or set {env}; {OFFLINE_HINT}"
        )
    return key


def _get_json(url: str, params: dict[str, Any], headers: dict[str, str], timeout: float) -> Any:
    full = f"{url}?{urllib.parse.urlencode(params)}"
    shown = url  # never print the query: it may hold the key
    request = urllib.request.Request(full, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read().decode())
    except urllib.error.HTTPError as e:
        raise IntensityProviderError(
            f"{shown} answered HTTP {e.code} ({e.reason}); check the API key and location; "
            f"{OFFLINE_HINT}"
        ) from e
    except (urllib.error.URLError, TimeoutError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise IntensityProviderError(
            f"could not reach {shown} within {timeout:g} s ({reason}); check the network; "
            f"{OFFLINE_HINT}"
        ) from e
    except (ValueError, UnicodeDecodeError) as e:
        raise IntensityProviderError(f"{shown} did not answer JSON: {e}") from e


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
        )
        try:
            points = sorted(
                (_parse_time(h["datetime"]), float(h["carbonIntensity"]))
                for h in doc["history"]
                if h.get("carbonIntensity") is not None
            )
        except (KeyError, TypeError, ValueError) as e:
            raise IntensityProviderError(
                f"ElectricityMaps answered without a usable history ({e}): {str(doc)[:200]}"
            ) from e
        if not points:
            raise IntensityProviderError(
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
        )
        items = doc.get("items", []) if isinstance(doc, dict) else []
        rate = next((i for i in items if i.get("label") == self.label), None)
        if rate is None:
            raise IntensityProviderError(
                f"OpenEI has no rate labelled {self.label!r} near ({self.lat}, {self.long}) in "
                f"the {self.sector} sector"
            )
        try:
            return {
                "prices": [float(period[0]["rate"]) for period in rate["energyratestructure"]],
                "weekday": rate["energyweekdayschedule"],
                "weekend": rate["energyweekendschedule"],
            }
        except (KeyError, IndexError, TypeError, ValueError) as e:
            raise IntensityProviderError(f"OpenEI rate {self.label!r} is incomplete: {e}") from e

    def get_current_electricity_price(self) -> float:  # type: ignore[override]
        return self.value_at(time.time())

    def value_at(self, t: float) -> float:
        rates = self.document()
        local = datetime.fromtimestamp(t, tz=timezone.utc).astimezone()
        table = rates["weekend"] if local.weekday() >= 5 else rates["weekday"]
        try:
            return rates["prices"][int(table[local.month - 1][local.hour])]
        except (IndexError, TypeError, ValueError) as e:
            raise IntensityProviderError(f"OpenEI schedule has no entry for {local}: {e}") from e

    def change_points(self, t0: float, t1: float) -> list[float]:
        start = int(t0 // 3600 + 1) * 3600
        return [float(h) for h in range(start, int(t1) + 1, 3600) if t0 < h < t1][:10_000]
