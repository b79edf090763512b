"""Linux RAPL energy counters, with Zeus's classes (``zeus.device.cpu.rapl``): the one RAPL reader.

RAPL (Intel, and AMD since Zen) exposes one powercap zone per CPU package,
``<dir>/intel-rapl:<N>`` (``name`` = ``package-<N>``), with subzones ``intel-rapl:<N>:<M>`` inside
it, one of them named ``dram`` where the platform meters memory. Each zone's ``energy_uj`` counts
up and wraps to 0 at ``max_energy_range_uj`` (a package's range is about 262 kJ: tens of minutes at
full power). ``<dir>`` is ``ZEUS_NB_POWERCAP_ROOT`` when set (tests use a fake tree), else Zeus's
``/sys/class/powercap/intel-rapl`` or the place Zeus's container image mounts it.

:class:`RAPLFile` is one zone's counter: :meth:`RAPLFile.read` gives mJ, the raw value plus the
wrap-arounds counted so far times the range. A :class:`RaplWraparoundTracker` counts them: a
background thread polls the file (every second, ten times a second near the wrap point) so that
no wrap goes unseen between two reads however far apart, and every read is counted too, so a
wrap is added the moment any reader sees it. A thread rather than Zeus's spawned process: the
reads and the polls decide the count together (one lock), and nothing re-imports ``__main__``.
:class:`RAPLCPU` is a package and its DRAM, :class:`RAPLCPUs` every package of the machine.
zeus-nb's own CPU packages (:mod:`zeus_nb.device.cpu.packages`) read through these classes.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
import warnings
import weakref
from collections.abc import Sequence
from glob import glob
from typing import Any

import zeus_nb.device.cpu.common as cpu_common
from zeus_nb.device.cpu.common import CpuDramMeasurement
from zeus_nb.device.exception import ZeusBaseCPUError
from zeus_nb.errors import CpuEnergyError
from zeus_nb.inputs.env import env
from zeus_nb.inputs.registry import system_read
from zeus_nb.utils.zeusd import ZeusdUnsupportedError, zeusd_reason

log = logging.getLogger(__name__)

RAPL_DIR = "/sys/class/powercap/intel-rapl"
CONTAINER_RAPL_DIR = "/zeus_sys/class/powercap/intel-rapl"  # where Zeus's Docker image mounts it
#: The most a counter rises in 0.1 s at 1000 W, in µJ: closer than this to the wrap point, the
#: tracker polls every 0.1 s instead of every second.
RAPL_COUNTER_MAX_INCREASE = 1000 * 1e6 * 0.1
#: Seconds between two polls of a counter far from its wrap point.
WRAP_CHECK_PERIOD = 1.0

PERMISSION_HINT = (
    "RAPL energy counters are readable by root only on Linux kernels patched for the Platypus "
    "side channel (CVE-2020-8694). Either run as root, or allow reading until the next reboot: "
    "`sudo chmod a+r /sys/class/powercap/intel-rapl:*/energy_uj "
    "/sys/class/powercap/intel-rapl:*/intel-rapl:*/energy_uj`; in Docker, run the container "
    "with --privileged. To measure GPUs only, pass cpu_indices=[]"
)
_PACKAGE = re.compile(r"^intel-rapl:(\d+)$")


class ZeusRAPLNotSupportedError(ZeusBaseCPUError, CpuEnergyError):
    """This machine exposes no RAPL counters."""


class ZeusRAPLFileInitError(ZeusBaseCPUError, CpuEnergyError):
    """A RAPL zone's files could not be opened."""


class ZeusRAPLPermissionError(cpu_common.ZeusCPUNoPermissionError):
    """A RAPL counter exists but this process may not read it."""


def rapl_dir() -> str:
    """Where the package zones are: ``ZEUS_NB_POWERCAP_ROOT``, else Zeus's two locations."""
    root = env("ZEUS_NB_POWERCAP_ROOT")
    if root:
        return str(root)
    return RAPL_DIR if os.path.exists(RAPL_DIR) else CONTAINER_RAPL_DIR


def package_indices(directory: str) -> list[int]:
    """Indices ``N`` of the ``intel-rapl:N`` package zones in ``directory``, sorted."""
    found = (_PACKAGE.match(os.path.basename(p)) for p in glob(f"{directory}/intel-rapl:*"))
    return sorted(int(m.group(1)) for m in found if m)


def rapl_is_available() -> bool:
    """Whether a RAPL package zone exists (in the zeus-nb root, Zeus's, or Zeus's container's)."""
    return bool(package_indices(rapl_dir()))


@system_read("a powercap sysfs counter (kernel), not user input")
def _read_uj(path: str) -> float:
    """A counter file's value; errors are zeus-nb's CPU errors that say what to do."""
    try:
        with open(path) as f:
            return float(f.read().strip())
    except PermissionError as e:
        raise ZeusRAPLPermissionError(f"cannot read {path}: {PERMISSION_HINT}") from e
    except FileNotFoundError as e:
        raise ZeusRAPLFileInitError(f"no RAPL counter at {path} (the zone is gone)") from e
    except (OSError, ValueError) as e:
        raise CpuEnergyError(f"cannot read the RAPL counter {path}: {e}") from e


class _Count:
    """An integer with ``get_lock()``, as ``multiprocessing.Value('i')`` has, for threads."""

    def __init__(self) -> None:
        self.value = 0
        self._lock = threading.RLock()

    def get_lock(self) -> threading.RLock:
        return self._lock


class _WrapTally:
    """The wrap-arounds of one counter, as the readings of a poller and of readers show them.

    The poller's readings are taken under the lock, one after another: any fall is a wrap.
    A reader's reading was taken outside the lock and may be older than the last poll, so it is
    judged against half the range: more than half below the last reading is a wrap not yet
    counted, more than half above is a reading from before the last counted wrap. (Between two
    polls, a second apart, a counter rises by far less than half its range.)
    """

    def __init__(self, max_uj: float, first_uj: float, count: Any) -> None:
        self.max_uj = float(max_uj)
        self.last = first_uj
        self.count = count

    def poll(self, path: str) -> None:
        with self.count.get_lock():
            now = _read_uj(path)
            if now < self.last:
                self.count.value += 1
                log.debug("RAPL wrap-around of %s; %d so far", path, self.count.value)
            self.last = now

    def wraps_for(self, reading: float) -> int:
        half = self.max_uj / 2 if self.max_uj > 0 else float("inf")
        with self.count.get_lock():
            if reading < self.last - half:
                self.count.value += 1
                self.last = reading
            elif reading > self.last + half:
                return self.count.value - 1
            elif reading > self.last:
                self.last = reading
            return self.count.value


def _polling_process(
    rapl_file_path: str,
    max_energy_uj: float,
    wraparound_counter: Any,
    stop: threading.Event | None = None,
) -> None:
    """Count the wrap-arounds of one counter file into ``wraparound_counter`` until ``stop``.

    ``wraparound_counter`` is a synchronized integer (``multiprocessing.Value('i')`` in a child
    process) or a tracker's own tally. Polls every second, every 0.1 s near the wrap point. A
    read that fails once does not end it (beside busy processes one that caught a test's file
    mid-write ended the thread, and the wrap after it was never counted).
    """
    if isinstance(wraparound_counter, _WrapTally):
        tally = wraparound_counter
    else:
        tally = _WrapTally(max_energy_uj, _read_uj(rapl_file_path), wraparound_counter)
    while stop is None or not stop.is_set():
        near = max_energy_uj - tally.last < RAPL_COUNTER_MAX_INCREASE
        period = 0.1 if near else WRAP_CHECK_PERIOD
        if stop is None:
            time.sleep(period)
        elif stop.wait(period):
            return
        try:
            tally.poll(rapl_file_path)
        except (ZeusRAPLFileInitError, ZeusRAPLPermissionError):
            raise  # the zone is gone, or closed to this process: nothing is left to poll
        except CpuEnergyError as e:  # one failed read: a later poll still sees a wrap
            log.debug("RAPL wrap-around poll of %s failed, polling on: %s", rapl_file_path, e)


def _poll_until_stopped(path: str, max_uj: float, tally: _WrapTally, stop: threading.Event):
    try:
        _polling_process(path, max_uj, tally, stop)
    except CpuEnergyError as e:  # e.g. a test's fake tree was removed
        log.debug("RAPL wrap-around tracker of %s stops: %s", path, e)


class RaplWraparoundTracker:
    """Counts the wrap-arounds of one RAPL counter file, polled on a daemon thread.

    The thread stops with :meth:`stop` or when the tracker is garbage-collected.
    """

    def __init__(self, rapl_file_path: str, max_energy_uj: float) -> None:
        if not os.path.exists(rapl_file_path):
            raise ZeusRAPLFileInitError(f"{rapl_file_path} does not exist: no RAPL file to track")
        self.rapl_file_path = rapl_file_path
        self.max_energy_uj = float(max_energy_uj)
        self.wraparound_counter = _Count()
        self._tally = _WrapTally(max_energy_uj, _read_uj(rapl_file_path), self.wraparound_counter)
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=_poll_until_stopped,
            args=(rapl_file_path, self.max_energy_uj, self._tally, self._stop),
            daemon=True,
            name="zeus-nb-rapl-wrap",
        )
        self._thread.start()
        weakref.finalize(self, self._stop.set)

    def stop(self) -> None:
        """Stop polling (the count stays as it is)."""
        self._stop.set()

    def get_num_wraparounds(self, reading_uj: float | None = None) -> int:
        """Wrap-arounds counted so far; given ``reading_uj`` (a value just read from the file),
        those that happened before that reading, counting one the poll has not seen yet."""
        if reading_uj is None:
            with self.wraparound_counter.get_lock():
                return self.wraparound_counter.value
        return self._tally.wraps_for(reading_uj)


@system_read("Linux powercap sysfs (kernel), not user input")
def _read_zone_file(path: str, what: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except PermissionError as e:
        raise ZeusRAPLPermissionError(f"cannot read {path}: {PERMISSION_HINT}") from e
    except OSError as e:
        raise ZeusRAPLFileInitError(f"cannot read the RAPL zone's {what} ({path}): {e}") from e


class RAPLFile:
    """One RAPL zone's energy counter (a package or its DRAM); :meth:`read` gives mJ.

    The counter's file stays open: a sysfs attribute read again from offset 0 is produced
    afresh, and a ``pread`` of an open descriptor costs a fraction of an open-read-close, which
    measurement windows pay twice per counter. (A file object without an OS descriptor, such as
    a test's stand-in for ``open``, is opened again for each read instead.)
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.energy_uj_path = os.path.join(path, "energy_uj")
        self.name: str = _read_zone_file(os.path.join(path, "name"), "name")
        self._fd: int | None = None
        try:
            self.last_energy = float(self._open_counter())
            max_path = os.path.join(path, "max_energy_range_uj")
            self.max_energy_range_uj = float(_read_zone_file(max_path, "counter range"))
        except ValueError as e:
            raise ZeusRAPLFileInitError(f"the RAPL zone {path} holds no number: {e}") from e
        self._wraparound_tracker: RaplWraparoundTracker | None = None
        self._wraparound_tracker_init_lock = threading.Lock()

    @system_read("a powercap sysfs counter (kernel)")
    def _open_counter(self) -> str | bytes:
        """The counter's first value; keeps a descriptor of the file for later reads."""
        path = self.energy_uj_path
        try:
            f = open(path, "rb", buffering=0)  # noqa: SIM115 (read and closed just below)
        except PermissionError as e:
            raise ZeusRAPLPermissionError(f"cannot read {path}: {PERMISSION_HINT}") from e
        except OSError as e:
            raise ZeusRAPLFileInitError(f"cannot open the RAPL counter {path}: {e}") from e
        with f:
            try:
                self._fd = os.dup(f.fileno())
                weakref.finalize(self, os.close, self._fd)
            except (AttributeError, TypeError, ValueError, OSError):  # no OS descriptor
                self._fd = None
            try:
                return f.read()
            except OSError as e:
                raise ZeusRAPLFileInitError(f"cannot read {path}: {e}") from e

    @property
    def wraparound_tracker(self) -> RaplWraparoundTracker:
        """The tracker of this file's wrap-arounds, started on first use."""
        if self._wraparound_tracker is None:
            with self._wraparound_tracker_init_lock:
                if self._wraparound_tracker is None:
                    self._wraparound_tracker = RaplWraparoundTracker(
                        self.energy_uj_path, self.max_energy_range_uj
                    )
        return self._wraparound_tracker

    def __str__(self) -> str:
        return f"RAPLFile({self.name!r} at {self.path}, range {self.max_energy_range_uj:.0f} uJ)"

    def read(self) -> float:
        """Energy in mJ since an arbitrary origin (wrap-arounds added)."""
        tracker = self.wraparound_tracker
        fd = self._fd
        if fd is None:
            reading = _read_uj(self.energy_uj_path)
        else:
            try:
                reading = float(os.pread(fd, 32, 0))
            except (OSError, ValueError):
                reading = _read_uj(self.energy_uj_path)  # raises the explained error
        wraps = tracker.get_num_wraparounds(reading)
        return (reading + wraps * self.max_energy_range_uj) / 1000.0


class RAPLCPU(cpu_common.CPU):
    """One RAPL package (``intel-rapl:<cpu_index>`` under ``rapl_dir``) and its DRAM."""

    def __init__(self, cpu_index: int, rapl_dir: str) -> None:
        super().__init__(cpu_index)
        self.rapl_dir = rapl_dir
        self._get_powerzone()

    def _get_powerzone(self) -> None:
        self.path = os.path.join(self.rapl_dir, f"intel-rapl:{self.cpu_index}")
        self.rapl_file = RAPLFile(self.path)
        self.dram: RAPLFile | None = None
        prefix = f"intel-rapl:{self.cpu_index}:"
        for entry in sorted(os.listdir(self.path)):
            if not entry.startswith(prefix):
                continue
            try:
                zone = RAPLFile(os.path.join(self.path, entry))
            except ZeusRAPLFileInitError as e:
                warnings.warn(f"Failed to initialize subpackage {entry}: {e}", stacklevel=2)
                continue
            if zone.name == "dram":
                self.dram = zone
                break

    def get_total_energy_consumption(self) -> CpuDramMeasurement:
        dram = self.dram.read() if self.dram is not None else None
        return CpuDramMeasurement(cpu_mj=self.rapl_file.read(), dram_mj=dram)

    def supports_get_dram_energy_consumption(self) -> bool:
        return self.dram is not None


class ZeusdRAPLCPU(RAPLCPU):
    """Zeus reads RAPL through its daemon here; zeus-nb reads the files directly."""

    def __init__(self, cpu_index: int, client: object) -> None:
        raise ZeusdUnsupportedError(zeusd_reason("ZeusdRAPLCPU", "use RAPLCPUs() or get_cpus()"))


class RAPLCPUs(cpu_common.CPUs):
    """Every RAPL package of this machine (Zeus's manager when RAPL is there)."""

    def __init__(self) -> None:
        if not rapl_is_available():
            raise ZeusRAPLNotSupportedError(
                f"RAPL is not supported on this CPU: no RAPL package zone under {rapl_dir()} "
                "(not Linux, a virtual machine, or a CPU without RAPL); measure GPUs only "
                "(cpu_indices=[])"
            )
        self.rapl_dir = rapl_dir()
        self._init_cpus()

    def _init_cpus(self) -> None:
        self._cpus = [RAPLCPU(i, self.rapl_dir) for i in package_indices(self.rapl_dir)]

    @property
    def cpus(self) -> Sequence[RAPLCPU]:
        return self._cpus


__all__ = [
    "CONTAINER_RAPL_DIR",
    "PERMISSION_HINT",
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
    "package_indices",
    "rapl_dir",
    "rapl_is_available",
]
