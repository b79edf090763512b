"""Zeus's RAPL classes (``zeus.device.cpu.rapl``) over zeus-nb's RAPL counters.

zeus-nb reads RAPL in :mod:`zeus_nb.device.cpu.packages` (``RaplCounter``: the file kept open,
wrap-arounds added as they are seen, every counter read on one background thread often enough
that no wrap is missed). The names here give that reader Zeus's shapes and units (mJ):
:class:`RAPLFile` is one zone's counter, :class:`RAPLCPU` one package, :class:`RAPLCPUs` every
package of the machine. The powercap root is ``ZEUS_NB_POWERCAP_ROOT`` when set (tests use a fake
tree), else Zeus's locations.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path

import zeus_nb.device.cpu.common as cpu_common
from zeus_nb.device.cpu.packages import (
    DEFAULT_POWERCAP_ROOT,
    WRAP_CHECK_PERIOD,
    RaplCounter,
    RaplCPU,
    rapl_cpus,
)
from zeus_nb.device.exception import ZeusBaseCPUError
from zeus_nb.inputs.env import env
from zeus_nb.utils.zeusd import ZeusdUnsupportedError, zeusd_reason

RAPL_DIR = "/sys/class/powercap/intel-rapl"
CONTAINER_RAPL_DIR = "/zeus_sys/class/powercap/intel-rapl"  # where Zeus's Docker image mounts it
# The most a counter can rise in 0.1 s at 1000 W, in µJ (Zeus polls faster near the wrap point).
RAPL_COUNTER_MAX_INCREASE = 1000 * 1e6 * 0.1


class ZeusRAPLNotSupportedError(ZeusBaseCPUError):
    """This machine exposes no RAPL counters."""


class ZeusRAPLFileInitError(ZeusBaseCPUError):
    """A RAPL zone's files could not be opened."""


class ZeusRAPLPermissionError(ZeusBaseCPUError):
    """A RAPL counter exists but this process may not read it."""


def _root() -> Path:
    root = env("ZEUS_NB_POWERCAP_ROOT")
    if root:
        return Path(root)
    if os.path.exists(RAPL_DIR):
        return Path(DEFAULT_POWERCAP_ROOT)
    return Path(CONTAINER_RAPL_DIR).parent


def rapl_is_available() -> bool:
    """Whether a RAPL package zone exists (in the zeus-nb root, Zeus's, or Zeus's container's)."""
    root = _root()
    return root.is_dir() and any(p.name.startswith("intel-rapl:") for p in root.iterdir())


class RaplWraparoundTracker:
    """Counts the wrap-arounds of one RAPL file, polled on a background thread.

    zeus-nb's own counters need no tracker of this kind (they add each wrap as they see it); this
    class keeps Zeus's call shape for code that builds one: a thread, not a spawned process, so it
    is safe to create anywhere. It polls every second, every 0.1 s near the wrap point.
    """

    def __init__(self, rapl_file_path: str, max_energy_uj: float) -> None:
        if not os.path.exists(rapl_file_path):
            raise ZeusRAPLFileInitError(f"{rapl_file_path} does not exist: no RAPL file to track")
        self.rapl_file_path = rapl_file_path
        self.max_energy_uj = float(max_energy_uj)
        self._wraps = 0
        self._last = self._read()
        self._stop = threading.Event()
        threading.Thread(target=self._run, daemon=True, name="zeus-nb-rapl-wrap").start()

    def _read(self) -> float:
        with open(self.rapl_file_path) as f:
            return float(f.read().strip())

    def _run(self) -> None:
        period = 1.0
        while not self._stop.wait(period):
            try:
                now = self._read()
            except (OSError, ValueError):
                return
            if now < self._last:
                self._wraps += 1
            self._last = now
            near = self.max_energy_uj - now < RAPL_COUNTER_MAX_INCREASE
            period = 0.1 if near else 1.0

    def get_num_wraparounds(self) -> int:
        """How many times the counter wrapped since the tracker started."""
        return self._wraps


class RAPLFile:
    """One RAPL zone's energy counter (a package or its DRAM); :meth:`read` gives mJ."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.energy_uj_path = os.path.join(path, "energy_uj")
        try:
            self._counter = RaplCounter(Path(path))
            with open(os.path.join(path, "name")) as f:
                self.name = f.read().strip()
        except PermissionError as e:
            raise ZeusRAPLPermissionError(str(e)) from e
        except Exception as e:  # noqa: BLE001 (any failure to open the zone is Zeus's init error)
            raise ZeusRAPLFileInitError(f"cannot open the RAPL zone {path}: {e}") from e
        self.max_energy_range_uj = float(self._counter.max_range_uj)
        self._tracker: RaplWraparoundTracker | None = None

    def read(self) -> float:
        """Energy in mJ since the counter was opened (wrap-arounds added)."""
        return self._counter.read() * 1000.0

    def wraparound_tracker(self) -> RaplWraparoundTracker:
        """A tracker of this file's wrap-arounds (zeus-nb's reader already adds them)."""
        if self._tracker is None:
            self._tracker = RaplWraparoundTracker(self.energy_uj_path, self.max_energy_range_uj)
        return self._tracker


class RAPLCPU(cpu_common.CPU):
    """One RAPL package (``intel-rapl:<cpu_index>`` under ``rapl_dir``) and its DRAM."""

    def __init__(self, cpu_index: int, rapl_dir: str) -> None:
        super().__init__(cpu_index)
        self.rapl_dir = rapl_dir
        zone = Path(rapl_dir) / f"intel-rapl:{cpu_index}"
        if not zone.is_dir():
            raise cpu_common.ZeusCPUNotFoundError(f"no RAPL package zone {zone}")
        self._package = cpu_common.wrap_errors(lambda: RaplCPU(cpu_index, zone))
        self._view = cpu_common.SystemCPU(self._package)

    def get_total_energy_consumption(self) -> cpu_common.CpuDramMeasurement:
        return cpu_common.wrap_errors(self._view.get_total_energy_consumption)

    def supports_get_dram_energy_consumption(self) -> bool:
        return self._view.supports_get_dram_energy_consumption()


class ZeusdRAPLCPU(RAPLCPU):
    """Zeus reads RAPL through its daemon here; zeus-nb reads the files directly."""

    def __init__(self, cpu_index: int, client: object) -> None:
        raise ZeusdUnsupportedError(zeusd_reason("ZeusdRAPLCPU", "use RAPLCPUs() or get_cpus()"))


class RAPLCPUs(cpu_common.CPUs):
    """Every RAPL package of this machine (Zeus's manager when RAPL is there)."""

    def __init__(self) -> None:
        if not rapl_is_available():
            raise ZeusRAPLNotSupportedError(
                f"no RAPL package zone under {_root()}: this machine exposes no CPU energy "
                "counters; measure GPUs only (cpu_indices=[])"
            )
        self.rapl_dir = str(_root())
        packages = cpu_common.wrap_errors(lambda: rapl_cpus(self.rapl_dir))
        self._cpus = [cpu_common.SystemCPU(p) for p in packages]

    @property
    def cpus(self) -> Sequence[cpu_common.CPU]:
        return self._cpus


__all__ = [
    "CONTAINER_RAPL_DIR",
    "RAPLCPU",
    "RAPLCPUs",
    "RAPLFile",
    "RAPL_COUNTER_MAX_INCREASE",
    "RAPL_DIR",
    "RaplWraparoundTracker",
    "WRAP_CHECK_PERIOD",
    "ZeusRAPLFileInitError",
    "ZeusRAPLNotSupportedError",
    "ZeusRAPLPermissionError",
    "ZeusdRAPLCPU",
    "rapl_is_available",
]
