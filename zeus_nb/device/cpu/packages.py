"""CPU package and DRAM energy: Linux powercap RAPL, or a simulated CPU.

RAPL (Intel, and AMD since Zen) exposes one powercap zone per CPU package,
``<root>/intel-rapl:<N>`` (``name`` = ``package-<N>``), with subzones ``intel-rapl:<N>:<M>``
inside it, one of which is named ``dram`` where the platform meters memory. Each zone has a
cumulative ``energy_uj`` counter that wraps at ``max_energy_range_uj``. ``<root>`` is
``/sys/class/powercap``, or ``ZEUS_NB_POWERCAP_ROOT`` (tests use a fake tree in a temporary folder).

This is the only module that reads RAPL files. CPU index ``N`` is package ``intel-rapl:N``, as in
Zeus's ``cpu_indices``.

The simulated CPU uses CodeCarbon's documented fallback model, since the bundled Zeus traces hold
no CPU measurements: the package draws 50 % of its TDP, the TDP of an unknown CPU is taken as
85 W, and DRAM draws 3 W per 8 GB (0.375 W/GB).
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path

from zeus_nb.errors import CpuEnergyError, CpuEnergyPermissionError, InputError
from zeus_nb.inputs.env import env

log = logging.getLogger(__name__)

DEFAULT_POWERCAP_ROOT = "/sys/class/powercap"
_PACKAGE = re.compile(r"^intel-rapl:(\d+)$")

#: CodeCarbon's constant-mode model (its methodology: a CPU without a power reading draws 50 % of
#: its TDP; 85 W is its TDP for an unknown CPU; memory draws 3 W per 8 GB).
TDP_FRACTION = 0.5
DEFAULT_TDP_W = 85.0
DRAM_W_PER_GB = 3.0 / 8.0

PERMISSION_HINT = (
    "RAPL energy counters are readable by root only on Linux kernels patched for the Platypus "
    "side channel (CVE-2020-8694). Either run as root, or allow reading until the next reboot: "
    "`sudo chmod a+r /sys/class/powercap/intel-rapl:*/energy_uj "
    "/sys/class/powercap/intel-rapl:*/intel-rapl:*/energy_uj`; in Docker, run the container "
    "with --privileged. To measure GPUs only, pass cpu_indices=[]"
)


def powercap_root() -> Path:
    return Path(env("ZEUS_NB_POWERCAP_ROOT") or DEFAULT_POWERCAP_ROOT)


class CPU(ABC):
    """One CPU package: its energy counter and, where metered, its DRAM's."""

    index: int

    @property
    @abstractmethod
    def name(self) -> str: ...

    @abstractmethod
    def energy(self) -> float:
        """Package energy in J since an arbitrary origin; differences are what matter."""

    def supports_dram(self) -> bool:
        return False

    def dram_energy(self) -> float | None:
        """DRAM energy in J since an arbitrary origin, or None where DRAM is not metered."""
        return None


class RaplCounter:
    """One powercap zone's ``energy_uj``, accumulated across wrap-arounds.

    A read that comes out below the previous one means the counter wrapped at
    ``max_energy_range_uj``; one wrap is added. A background thread reads every counter every
    :data:`WRAP_CHECK_PERIOD` s so that no two reads are a whole range apart (a package wraps
    after about 262 kJ, i.e. tens of minutes at full power).

    The file stays open: a sysfs attribute read again from offset 0 is produced afresh, and a
    ``pread`` of an open file costs a fraction of an open-read-close, which measurement windows
    pay twice per counter.
    """

    def __init__(self, zone: Path):
        self.zone = zone
        self.path = zone / "energy_uj"
        try:
            self.max_range_uj = int((zone / "max_energy_range_uj").read_text())
        except (OSError, ValueError):
            self.max_range_uj = 0
        self._lock = threading.Lock()
        self._last = self._parse(self._guard(self.path.read_text))
        self._fd = self._guard(os.open, self.path, os.O_RDONLY)
        weakref.finalize(self, os.close, self._fd)
        self._total_uj = 0
        _tracker.add(self)

    def _guard(self, fn, *args):
        """``fn(*args)`` with OS errors turned into CPU energy errors that say what to do."""
        try:
            return fn(*args)
        except PermissionError as e:
            raise CpuEnergyPermissionError(f"cannot read {self.path}: {PERMISSION_HINT}") from e
        except OSError as e:
            raise CpuEnergyError(f"cannot read the RAPL counter {self.path}: {e}") from e

    def _parse(self, text: str | bytes) -> int:
        try:
            return int(text)
        except ValueError as e:
            raise CpuEnergyError(f"cannot read the RAPL counter {self.path}: {e}") from e

    def _raw(self) -> int:
        return self._parse(self._guard(os.pread, self._fd, 32, 0))

    def read(self) -> float:
        """Accumulated energy in J since this counter was opened."""
        with self._lock:  # read under the lock: reads from two threads must not interleave
            try:
                raw = int(os.pread(self._fd, 32, 0))
            except (OSError, ValueError):
                raw = self._raw()  # raises the explained error (or reads on a retry)
            delta = raw - self._last
            if delta < 0:
                delta += self.max_range_uj
            self._total_uj += delta
            self._last = raw
            return self._total_uj / 1e6


class _WrapTracker:
    """Reads every open RAPL counter periodically on one daemon thread."""

    def __init__(self, period: float):
        self.period = period
        self._counters: weakref.WeakSet[RaplCounter] = weakref.WeakSet()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def add(self, counter: RaplCounter) -> None:
        with self._lock:
            self._counters.add(counter)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True, name="zeus-nb-rapl")
                self._thread.start()

    def _run(self) -> None:
        while True:
            time.sleep(self.period)
            for counter in list(self._counters):
                try:
                    counter.read()
                except CpuEnergyError as e:  # e.g. a test's tree was removed
                    log.debug("RAPL wrap tracker: %s", e)
                    self._counters.discard(counter)


WRAP_CHECK_PERIOD = 10.0
_tracker = _WrapTracker(WRAP_CHECK_PERIOD)


class RaplCPU(CPU):
    """One RAPL package zone and its ``dram`` subzone, if any."""

    def __init__(self, index: int, zone: Path):
        self.index = index
        self.zone = zone
        self._name = _read_name(zone) or f"package-{index}"
        self._package = RaplCounter(zone)
        self._dram: RaplCounter | None = None
        for sub in sorted(zone.glob(f"intel-rapl:{index}:*")):
            if _read_name(sub) == "dram":
                self._dram = RaplCounter(sub)
                break

    @property
    def name(self) -> str:
        return f"RAPL {self._name}"

    def energy(self) -> float:
        return self._package.read()

    def supports_dram(self) -> bool:
        return self._dram is not None

    def dram_energy(self) -> float | None:
        return self._dram.read() if self._dram is not None else None


def _read_name(zone: Path) -> str:
    try:
        return (zone / "name").read_text().strip()
    except OSError:
        return ""


def rapl_cpus(root: str | Path | None = None) -> list[RaplCPU]:
    """The RAPL packages under ``root`` (default :func:`powercap_root`), numbered as RAPL does.

    Raises:
        CpuEnergyError: no RAPL zone (not Linux, a VM without RAPL, or an ARM machine).
        CpuEnergyPermissionError: the counters exist but cannot be read (with the fix).
    """
    root = Path(root) if root is not None else powercap_root()
    zones = []
    if root.is_dir():
        for entry in root.iterdir():
            m = _PACKAGE.match(entry.name)
            if m and entry.is_dir():
                zones.append((int(m.group(1)), entry))
    if not zones:
        raise CpuEnergyError(
            f"no RAPL package zone (intel-rapl:N) under {root}: this machine exposes no CPU "
            "energy counters (not Linux, a virtual machine, or a CPU without RAPL); measure GPUs "
            "only with cpu_indices=[]"
        )
    return [RaplCPU(i, zone) for i, zone in sorted(zones)]


def host_memory_gb() -> float:
    """This machine's physical memory in GB (what CodeCarbon's DRAM model is applied to)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    except (ValueError, OSError, AttributeError):
        return 8.0  # CodeCarbon's unit of 3 W per 8 GB, where the size cannot be read


class SimulatedCPU(CPU):
    """A CPU package drawing constant power over a simulated system's clock.

    Package power is :data:`TDP_FRACTION` x ``tdp_w``; DRAM power is :data:`DRAM_W_PER_GB` x
    ``dram_gb``, both CodeCarbon's model (see the module docstring). Energy is that power times
    the time the clock has moved, so it follows the simulated GPU's virtual or wall clock.
    """

    def __init__(
        self,
        clock: Callable[[], float],
        index: int = 0,
        tdp_w: float | None = None,
        dram_gb: float | None = None,
    ):
        self.index = index
        self._clock = clock
        self._t0 = clock()
        self.tdp_w = float(tdp_w if tdp_w is not None else DEFAULT_TDP_W)
        self.dram_gb = float(dram_gb if dram_gb is not None else host_memory_gb())
        if self.tdp_w <= 0 or self.dram_gb < 0:
            raise InputError(f"tdp_w must be > 0 and dram_gb >= 0, got {tdp_w}, {dram_gb}")
        self.package_power = TDP_FRACTION * self.tdp_w
        self.dram_power = DRAM_W_PER_GB * self.dram_gb

    @property
    def name(self) -> str:
        return f"simulated CPU ({self.tdp_w:g} W TDP, {self.dram_gb:.0f} GB DRAM)"

    def _elapsed(self) -> float:
        return self._clock() - self._t0

    def energy(self) -> float:
        return self.package_power * self._elapsed()

    def supports_dram(self) -> bool:
        return True

    def dram_energy(self) -> float | None:
        return self.dram_power * self._elapsed()
