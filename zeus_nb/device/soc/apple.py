"""Zeus's Apple silicon SoC: CPU cores, GPU, DRAM and Neural Engine energy on a Mac.

The counters are read through the ``zeus-apple-silicon`` binding (module ``zeus_apple_silicon``,
``pip install zeus-apple-silicon``, macOS on Apple silicon only). The binding is looked up each
time it is needed, not when this module is imported, so a later install (or a test's stand-in
in ``sys.modules``) takes effect at once. Where it is missing, or the machine is not an Apple
silicon Mac, :func:`apple_silicon_is_available` is False and constructing :class:`AppleSilicon`
raises :class:`ZeusAppleInitError` saying why.
"""

from __future__ import annotations

import importlib
import logging
import platform
import sys
from dataclasses import asdict, dataclass, fields
from typing import Any

from zeus_nb.device.soc.common import SoC, SoCMeasurement, ZeusSoCInitError
from zeus_nb.errors import UnsupportedError

__all__ = [
    "AppleSilicon",
    "AppleSiliconMeasurement",
    "ZeusAppleInitError",
    "apple_silicon_is_available",
]

log = logging.getLogger(__name__)

BINDING = "zeus_apple_silicon"
INSTALL = (
    "pip install zeus-apple-silicon (macOS on Apple silicon only); elsewhere zeus-nb measures "
    "NVIDIA GPUs (NVML, or simulated: ZEUS_NB_BACKEND=sim) and Linux RAPL CPUs"
)


class ZeusAppleInitError(ZeusSoCInitError, UnsupportedError):
    """Apple silicon's energy counters cannot be read on this machine."""


def _binding() -> Any:
    """The ``zeus_apple_silicon`` module as it is now, or None when it cannot be imported."""
    try:
        return importlib.import_module(BINDING)
    except Exception as e:  # an ImportError, or a binding built for another macOS
        log.debug("%s cannot be imported: %s", BINDING, e)
        return None


def __getattr__(name: str) -> Any:
    """``zeus_apple_silicon`` (the binding or None) and ``zeus_apple_available``, as of now."""
    if name == "zeus_apple_silicon":
        return _binding()
    if name == "zeus_apple_available":
        return _binding() is not None
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _why_unavailable() -> str | None:
    if sys.platform != "darwin" or platform.processor() != "arm":
        return f"this is not an Apple silicon Mac ({sys.platform}, {platform.processor()!r})"
    if _binding() is None:
        return f"the {BINDING} binding is not installed"
    return None


def apple_silicon_is_available() -> bool:
    """Whether this is an Apple silicon Mac with the binding installed (not cached)."""
    return _why_unavailable() is None


def _difference(name: str, a: Any, b: Any) -> Any:
    if a is None and b is None:
        return None
    if type(a) is not type(b):
        raise ValueError(
            f"{name}: cannot subtract a {type(b).__name__} from a {type(a).__name__}; both "
            "measurements must come from the same Mac"
        )
    if isinstance(a, list):
        if len(a) != len(b):
            raise ValueError(f"{name}: {len(a)} values minus {len(b)}; the core counts differ")
        return [x - y for x, y in zip(a, b, strict=True)]
    return a - b


@dataclass
class AppleSiliconMeasurement(SoCMeasurement):
    """Energy of an Apple SoC's parts in mJ; None where this chip does not report the part.

    The ``*_cores_mj`` fields hold one value per core, the ``*_cluster_mj`` fields one per
    cluster (its cores plus shared parts such as the L2 cache, the closer to a cluster's whole
    energy); the ``*_core_manager_mj`` fields are the clusters' management logic.
    """

    cpu_total_mj: int | None = None
    efficiency_cores_mj: list[int] | None = None
    performance_cores_mj: list[int] | None = None
    efficiency_cluster_mj: list[int] | None = None
    performance_cluster_mj: list[int] | None = None
    efficiency_core_manager_mj: int | None = None
    performance_core_manager_mj: int | None = None
    dram_mj: int | None = None
    gpu_mj: int | None = None
    gpu_sram_mj: int | None = None
    ane_mj: int | None = None

    def __sub__(self, other: AppleSiliconMeasurement) -> AppleSiliconMeasurement:
        """Field by field difference (ValueError where the two disagree in shape)."""
        if not isinstance(other, AppleSiliconMeasurement):
            raise TypeError(
                f"an AppleSiliconMeasurement minus a {type(other).__name__}: subtract two "
                "AppleSiliconMeasurements"
            )
        return AppleSiliconMeasurement(
            **{
                f.name: _difference(f.name, getattr(self, f.name), getattr(other, f.name))
                for f in fields(self)
            }
        )

    def zero_all_fields(self) -> None:
        """Numbers become 0, lists become empty, absent parts stay None."""
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, list):
                setattr(self, f.name, [])
            elif value is not None:
                setattr(self, f.name, 0)

    @classmethod
    def from_metrics(cls, metrics: Any) -> AppleSiliconMeasurement:
        """From the binding's ``AppleEnergyMetrics`` (same field names)."""
        return cls(**{f.name: getattr(metrics, f.name) for f in fields(cls)})


class AppleSilicon(SoC):
    """The energy counters of this Mac's Apple SoC, measured by named windows."""

    def __init__(self) -> None:
        self.available_metrics: set[str] | None = None
        why = _why_unavailable()
        if why is not None:
            raise ZeusAppleInitError(f"Apple silicon energy cannot be read: {why}; {INSTALL}")
        try:
            self._monitor = _binding().AppleEnergyMonitor()
        except RuntimeError as e:
            raise ZeusAppleInitError(
                f"the {BINDING} binding could not start its energy monitor: {e}"
            ) from None

    def get_available_metrics(self) -> set[str]:
        """Names of the fields this chip reports (not None), found from one reading."""
        if self.available_metrics is None:
            reading = asdict(self.get_total_energy_consumption())
            self.available_metrics = {name for name, value in reading.items() if value is not None}
        return self.available_metrics

    def get_total_energy_consumption(self) -> AppleSiliconMeasurement:
        """Cumulative energy in mJ since a fixed point of this object's life."""
        return AppleSiliconMeasurement.from_metrics(self._monitor.get_cumulative_energy())

    def begin_window(self, key: str, restart: bool = False) -> None:
        self._monitor.begin_window(key, restart=restart)

    def end_window(self, key: str) -> AppleSiliconMeasurement:
        return AppleSiliconMeasurement.from_metrics(self._monitor.end_window(key))
