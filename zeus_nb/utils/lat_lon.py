"""Where this machine is, for carbon intensity (Zeus's ``get_ip_lat_long``).

Looked up, when called, from the machine's public IP address at ipinfo.io, as Zeus does. Nothing
in zeus-nb calls it on its own, and an IP address says little about which grid a data centre
draws from: passing the location yourself is better where you know it.
"""

from __future__ import annotations

import logging

import requests

from zeus_nb.errors import ZeusNbError

log = logging.getLogger(__name__)

IP_INFO_URL = "http://ipinfo.io/json"
TIMEOUT = 10.0

HINT = (
    "pass the location yourself, e.g. ElectricityMapsClient(location=(47.37, 8.54)) with your "
    "(latitude, longitude), or use FixedIntensity(g_per_kwh) / CsvIntensity(path) for offline, "
    "reproducible runs"
)


class LocationLookupError(ZeusNbError, ConnectionError):
    """This machine's location could not be looked up online."""


def get_ip_lat_long() -> tuple[float, float]:
    """(latitude, longitude) of this machine's public IP address, from ipinfo.io.

    Raises :class:`LocationLookupError` (saying what to pass instead) when the service cannot
    be reached or answers without a location.
    """
    try:
        answer = requests.get(IP_INFO_URL, timeout=TIMEOUT).json()
        lat, lon = (float(x) for x in answer["loc"].split(","))
    except requests.exceptions.RequestException as e:
        raise LocationLookupError(
            f"could not look up this machine's location at {IP_INFO_URL} "
            f"({type(e).__name__}); {HINT}"
        ) from None
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise LocationLookupError(
            f"{IP_INFO_URL} answered without a location ({e!r}); {HINT}"
        ) from None
    log.info("location from the IP address: %s, %s", lat, lon)
    return lat, lon
