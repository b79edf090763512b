"""Zeus's base errors of the device layer, one per kind of device (Zeus's names)."""

from __future__ import annotations

from zeus_nb.exception import ZeusBaseError

__all__ = ["ZeusBaseCPUError", "ZeusBaseGPUError", "ZeusBaseSoCError", "ZeusdError"]


class ZeusBaseGPUError(ZeusBaseError):
    """Base of the GPU errors raised through Zeus's device API (:mod:`zeus_nb.device.gpu`)."""


class ZeusBaseCPUError(ZeusBaseError):
    """Base of the CPU errors raised through Zeus's device API."""


class ZeusBaseSoCError(ZeusBaseError):
    """Base of the SoC (Apple silicon, Jetson) errors raised through Zeus's device API."""


class ZeusdError(ZeusBaseGPUError):
    """Zeus's daemon zeusd refused a call of ``ZeusdClient``, or could not be reached."""
