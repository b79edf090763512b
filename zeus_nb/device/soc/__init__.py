"""Zeus's SoC API (``zeus.device.soc``): the energy counters of a processor whose CPU, GPU and
memory share one package.

:func:`get_soc` returns the Apple silicon SoC on an Apple silicon Mac with the
``zeus-apple-silicon`` binding installed, and raises :class:`ZeusSoCInitError` everywhere else
(as Zeus's does on a machine without a SoC; Zeus code falls back to ``EmptySoC`` on it). Jetson
power rails are not read by zeus-nb.
"""

from __future__ import annotations

import contextlib

from zeus_nb.device.soc.apple import AppleSilicon, ZeusAppleInitError, apple_silicon_is_available
from zeus_nb.device.soc.common import EmptySoC, SoC, ZeusSoCInitError
from zeus_nb.device.soc.jetson import Jetson, ZeusJetsonInitError, jetson_is_available

__all__ = [
    "AppleSilicon",
    "EmptySoC",
    "Jetson",
    "SoC",
    "ZeusAppleInitError",
    "ZeusJetsonInitError",
    "ZeusSoCInitError",
    "apple_silicon_is_available",
    "get_soc",
    "jetson_is_available",
]


_soc: SoC | None = None


def get_soc() -> SoC:
    """This machine's SoC, one object per process; :class:`ZeusSoCInitError` when there is none."""
    global _soc
    if _soc is None and apple_silicon_is_available():
        with contextlib.suppress(ZeusAppleInitError):
            _soc = AppleSilicon()
    if _soc is None:
        raise ZeusSoCInitError(
            "no SoC energy counters to read: zeus-nb reads Apple silicon (with the "
            "zeus-apple-silicon binding, on a Mac) but not Jetson, and this machine is neither; "
            "use zeus_nb.device.get_gpus() and ZeusMonitor's GPU and CPU energy"
        )
    return _soc
