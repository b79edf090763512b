"""Measuring time and energy, with Zeus's ``zeus.monitor`` layout.

``energy`` (``ZeusMonitor`` windows), ``power`` (``PowerMonitor`` timelines), ``temperature``,
``carbon`` and ``price`` (grams of CO2 and cost of a window's energy, over the intensity providers
of ``providers``), and ``python -m zeus_nb.monitor energy|power`` (``cli``). Names load on first
use, so ``from zeus_nb.monitor import ZeusMonitor`` does not load the carbon providers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# public name -> module that defines it
_LAZY = {
    "ZeusMonitor": "energy",
    "Measurement": "energy",
    "SYNC_FRAMEWORKS": "energy",
    "PowerMonitor": "power",
    "PowerDomain": "power",
    "TemperatureMonitor": "temperature",
    "CarbonEmissionMonitor": "carbon",
    "CarbonEmissionMeasurement": "carbon",
    "ElectricityMapsClient": "carbon",
    "ElectrictyMapsClient": "carbon",
    "EnergyCostMonitor": "price",
    "EnergyCostMeasurement": "price",
    "OpenEIClient": "price",
    "IntensityProvider": "providers",
    "CarbonIntensityProvider": "providers",
    "ElectricityPriceProvider": "providers",
    "FixedIntensity": "providers",
    "FixedPrice": "providers",
    "CsvIntensity": "providers",
    "OFFLINE_HINT": "providers",
    "J_PER_KWH": "providers",
}

if TYPE_CHECKING:
    from zeus_nb.monitor.energy import Measurement as Measurement
    from zeus_nb.monitor.energy import ZeusMonitor as ZeusMonitor
    from zeus_nb.monitor.power import PowerMonitor as PowerMonitor
    from zeus_nb.monitor.temperature import TemperatureMonitor as TemperatureMonitor

__all__ = ["Measurement", "PowerMonitor", "TemperatureMonitor", "ZeusMonitor"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
