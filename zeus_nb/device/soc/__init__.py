"""Zeus's SoC API (``zeus.device.soc``): there is never a SoC to read in zeus-nb.

:func:`get_soc` raises :class:`ZeusSoCInitError`, which is what Zeus's does on a machine without
Apple silicon or a Jetson; Zeus code falls back to ``EmptySoC`` on it.
"""

from __future__ import annotations

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


def get_soc() -> SoC:
    """Raises :class:`ZeusSoCInitError`: zeus-nb reads no SoC energy counters."""
    raise ZeusSoCInitError(
        "no SoC energy counters to read: zeus-nb measures NVIDIA GPUs (NVML or simulated) and "
        "Linux RAPL CPUs, not Apple silicon or Jetson; use zeus_nb.device.get_gpus() and "
        "ZeusMonitor's GPU and CPU energy"
    )
