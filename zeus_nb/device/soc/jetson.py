"""Zeus's NVIDIA Jetson SoC: names only, because zeus-nb does not read Jetson power rails.

``jetson_is_available()`` answers False; constructing :class:`Jetson`, its measurement record or
its power-rail readers raises :class:`ZeusJetsonInitError` (also an ``UnsupportedError``). The
plain helpers (:func:`check_file`, :class:`Command`, :class:`DeviceMap`) work as Zeus's.
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Any, TypedDict

from zeus_nb.device.soc.common import ZeusSoCInitError
from zeus_nb.errors import UnsupportedError

__all__ = [
    "Command",
    "DeviceMap",
    "DirectPower",
    "Jetson",
    "JetsonMeasurement",
    "PowerMeasurementStrategy",
    "VoltageCurrentProduct",
    "ZeusJetsonInitError",
    "check_file",
    "jetson_is_available",
]

_REASON = (
    "{name}: zeus-nb does not read NVIDIA Jetson power rails; it measures discrete NVIDIA GPUs "
    "(NVML, or the simulated GPU: ZEUS_NB_BACKEND=sim) and Linux RAPL CPUs"
)


class ZeusJetsonInitError(ZeusSoCInitError, UnsupportedError):
    """A Jetson cannot be read (in zeus-nb: never)."""


def jetson_is_available() -> bool:
    """Always False: zeus-nb does not read Jetson power rails."""
    return False


def check_file(path: Path) -> bool:
    """Whether ``path`` exists and is a regular file."""
    return Path(path).is_file()


class Command(enum.Enum):
    """What Zeus's Jetson polling process is told to do."""

    READ = "read"
    STOP = "stop"


class _Placeholder:
    """Constructing any subclass raises :class:`ZeusJetsonInitError` naming it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise ZeusJetsonInitError(_REASON.format(name=type(self).__name__))


class PowerMeasurementStrategy(_Placeholder):
    """Zeus's reader of one Jetson power rail (mW)."""


class DirectPower(PowerMeasurementStrategy):
    """Zeus's rail reader from one sysfs power file."""


class VoltageCurrentProduct(PowerMeasurementStrategy):
    """Zeus's rail reader from a sysfs voltage file and a current file."""


class DeviceMap(TypedDict, total=False):
    """Jetson power rails to their readers."""

    cpu_power_mw: PowerMeasurementStrategy
    gpu_power_mw: PowerMeasurementStrategy
    total_power_mw: PowerMeasurementStrategy


class JetsonMeasurement(_Placeholder):
    """Zeus's Jetson energy record (mJ)."""


class Jetson(_Placeholder):
    """Zeus's Jetson SoC."""
