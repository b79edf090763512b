"""Where this machine is, for carbon intensity (Zeus's ``get_ip_lat_long``).

Zeus looks the location up from the machine's public IP address through an online service.
zeus-nb never calls out to the network on its own, and an IP address says little about which
grid a data centre draws from, so the location is given explicitly instead.
"""

from __future__ import annotations

from zeus_nb.errors import UnsupportedError

HINT = (
    "zeus-nb does not look up your location online: pass it yourself, e.g. "
    "ElectricityMapsClient(location=(47.37, 8.54)) with your (latitude, longitude), or use "
    "FixedIntensity(g_per_kwh) / CsvIntensity(path) for offline, reproducible runs"
)


def get_ip_lat_long() -> tuple[float, float]:
    """Always raises :class:`~zeus_nb.errors.UnsupportedError` saying what to pass instead."""
    raise UnsupportedError(HINT)
