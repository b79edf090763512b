"""Zeus's SoC interface (a processor whose CPU, GPU and memory share one package's counters).

zeus-nb reads Apple silicon through its binding (:mod:`zeus_nb.device.soc.apple`), not Jetson
power rails. On a machine without a readable SoC :func:`zeus_nb.device.soc.get_soc` raises
:class:`ZeusSoCInitError`, as Zeus's does, and Zeus code moves on (``EmptySoC``).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass

from zeus_nb.device.common import DeprecatedAliasABCMeta, deprecated_alias
from zeus_nb.device.exception import ZeusBaseSoCError

__all__ = ["EmptySoC", "SoC", "SoCMeasurement", "ZeusSoCInitError"]


class ZeusSoCInitError(ZeusBaseSoCError):
    """No SoC energy counters can be read on this machine."""


@dataclass
class SoCMeasurement(abc.ABC, metaclass=DeprecatedAliasABCMeta):
    """Energy of a SoC's parts in mJ; the fields belong to each kind of SoC."""

    @abc.abstractmethod
    def __sub__(self, other) -> SoCMeasurement:
        """Field by field difference."""

    @deprecated_alias("zeroAllFields")
    @abc.abstractmethod
    def zero_all_fields(self) -> None:
        """Set every field to zero."""


class SoC(abc.ABC, metaclass=DeprecatedAliasABCMeta):
    """Energy counters of one SoC, read by windows as ZeusMonitor reads GPUs."""

    @deprecated_alias("getAvailableMetrics")
    @abc.abstractmethod
    def get_available_metrics(self) -> set[str]:
        """Names of the parts whose energy this SoC reports."""

    @deprecated_alias("getTotalEnergyConsumption")
    @abc.abstractmethod
    def get_total_energy_consumption(self) -> SoCMeasurement:
        """Cumulative energy in mJ since an arbitrary origin."""

    @deprecated_alias("beginWindow")
    @abc.abstractmethod
    def begin_window(self, key: str, restart: bool = False) -> None:
        """Start window ``key`` (``restart``: replace a window of that name)."""

    @deprecated_alias("endWindow")
    @abc.abstractmethod
    def end_window(self, key: str) -> SoCMeasurement:
        """End window ``key``; its energy in mJ."""


class EmptySoC(SoC):
    """No SoC: no metrics, and every reading raises ValueError (as Zeus's does)."""

    def __init__(self) -> None:
        pass

    def get_available_metrics(self) -> set[str]:
        return set()

    def get_total_energy_consumption(self) -> SoCMeasurement:
        raise ValueError("no SoC on this machine: nothing to read")

    def begin_window(self, key: str, restart: bool = False) -> None:
        raise ValueError(f"no SoC on this machine: window {key!r} cannot measure one")

    def end_window(self, key: str) -> SoCMeasurement:
        raise ValueError(f"no SoC on this machine: window {key!r} cannot measure one")
