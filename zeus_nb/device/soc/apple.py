"""Zeus's Apple silicon SoC: names only, because zeus-nb does not read Apple's counters.

``apple_silicon_is_available()`` answers False; constructing :class:`AppleSilicon` or
:class:`AppleSiliconMeasurement` raises :class:`ZeusAppleInitError` (also an
``UnsupportedError``) with the reason and what to use instead.
"""

from __future__ import annotations

from typing import Any

from zeus_nb.device.soc.common import ZeusSoCInitError
from zeus_nb.errors import UnsupportedError

__all__ = [
    "AppleSilicon",
    "AppleSiliconMeasurement",
    "ZeusAppleInitError",
    "apple_silicon_is_available",
    "zeus_apple_available",
    "zeus_apple_silicon",
]

#: Zeus's optional binding to Apple's energy counters; zeus-nb never loads it.
zeus_apple_silicon: Any = None
zeus_apple_available: bool = False

_REASON = (
    "{name}: zeus-nb does not read Apple silicon energy counters; it measures NVIDIA GPUs "
    "(NVML, or the simulated GPU: ZEUS_NB_BACKEND=sim) and Linux RAPL CPUs"
)


class ZeusAppleInitError(ZeusSoCInitError, UnsupportedError):
    """Apple silicon cannot be read (in zeus-nb: never)."""


def apple_silicon_is_available() -> bool:
    """Always False: zeus-nb does not read Apple silicon."""
    return False


class AppleSilicon:
    """Zeus's Apple silicon SoC; constructing it raises :class:`ZeusAppleInitError`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise ZeusAppleInitError(_REASON.format(name="AppleSilicon"))


class AppleSiliconMeasurement:
    """Zeus's Apple silicon energy record; constructing it raises :class:`ZeusAppleInitError`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise ZeusAppleInitError(_REASON.format(name="AppleSiliconMeasurement"))
