"""Where this machine is, for carbon intensity and prices (Zeus's ``get_ip_lat_long``).

The location is looked up from the machine's public IP address at ipinfo.io, as Zeus does, with
a bounded wait. Offline, or when the service answers something unusable, the error says to pass
the location yourself. An IP address can place a cloud machine far from the grid that powers it,
so an explicit ``location=(latitude, longitude)`` is the more accurate choice anyway, and
``FixedIntensity`` / ``CsvIntensity`` keep runs offline and reproducible.

The HTTP client is requests (the ``net`` extra: ``pip install 'zeus-nb[net]'``).
"""

from __future__ import annotations

import logging

from zeus_nb.errors import ZeusNbError
from zeus_nb.utils.boundary import needs_extra

__all__ = ["IP_INFO_URL", "LocationLookupError", "get_ip_lat_long"]

log = logging.getLogger(__name__)

IP_INFO_URL = "http://ipinfo.io/json"
HINT = (
    "pass the location yourself as (latitude, longitude), e.g. "
    "ElectricityMapsClient(location=(47.37, 8.54)), or use FixedIntensity(g_per_kwh) / "
    "CsvIntensity(path) for offline, reproducible runs"
)


class LocationLookupError(ZeusNbError, OSError):
    """The IP location service could not be reached or gave no usable location."""


def get_ip_lat_long(timeout: float = 5.0) -> tuple[float, float]:
    """(latitude, longitude) of this machine's public IP address, waiting at most ``timeout`` s.

    Raises :class:`LocationLookupError` (an ``OSError``) saying what to pass instead when the
    service cannot be reached in time or answers without a location.
    """
    with needs_extra("net", "Looking up the location from the IP address"):
        import requests

    try:
        response = requests.get(IP_INFO_URL, timeout=timeout)
    except requests.exceptions.RequestException as e:
        raise LocationLookupError(
            f"could not reach {IP_INFO_URL} within {timeout:g} s to look up this machine's "
            f"location ({type(e).__name__}); {HINT}"
        ) from e
    try:
        loc = response.json()["loc"]
        lat, lon = (float(part) for part in str(loc).split(","))
    except (KeyError, TypeError, ValueError) as e:  # requests' JSONDecodeError is a ValueError
        status = getattr(response, "status_code", "?")
        raise LocationLookupError(
            f"{IP_INFO_URL} answered (HTTP {status}) without a usable location "
            f"({type(e).__name__}: {e}); {HINT}"
        ) from e
    log.info("location of this machine's IP address: %s, %s", lat, lon)
    return lat, lon
