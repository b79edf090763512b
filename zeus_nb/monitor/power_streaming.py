"""Zeus's power streaming from zeusd instances: names only, because zeus-nb does not use zeusd.

Zeus streams GPU and CPU power from its daemon on one or more nodes. zeus-nb reads power in the
process itself: :class:`zeus_nb.monitor.PowerMonitor` samples the current backend's GPUs (real or
simulated) into a timeline. The reading records below are real; constructing
:class:`PowerStreamingClient` raises :class:`~zeus_nb.utils.zeusd.ZeusdUnsupportedError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from zeus_nb.utils.zeusd import ZeusdConfig, ZeusdUnsupportedError, zeusd_reason

__all__ = ["CpuPowerReading", "PowerReadings", "PowerStreamingClient"]


@dataclass
class CpuPowerReading:
    """One CPU package's power and its DRAM's (None where not metered), in W."""

    cpu_w: float = 0.0
    dram_w: float | None = None


@dataclass
class PowerReadings:
    """The latest readings of one endpoint: Unix time in s, GPU and CPU power in W by index."""

    timestamp_s: float = 0.0
    gpu_power_w: dict[int, float] = field(default_factory=dict)
    cpu_power_w: dict[int, CpuPowerReading] = field(default_factory=dict)


class PowerStreamingClient:
    """Zeus's zeusd power-stream client; constructing it raises ``ZeusdUnsupportedError``.

    Sample power in this process with ``zeus_nb.monitor.PowerMonitor`` instead.
    """

    def __init__(self, servers: Sequence[ZeusdConfig], reconnect_delay_s: float = 1.0) -> None:
        instead = "zeus_nb.monitor.PowerMonitor (power timelines in this process)"
        raise ZeusdUnsupportedError(zeusd_reason("PowerStreamingClient", instead))
