"""Power read over time: timelines of any backend, energy of GPUs without a counter.

:class:`PowerSampler` collects a :class:`PowerTimeline`; :class:`ThreadSampler` reads each GPU's
power every ``period`` seconds on the system's clock (real GPUs, and the simulated GPU on the wall
clock). :class:`PowerIntegrator` gives GPUs without an energy counter (pre-Volta) an energy
reading by integrating sampled power. :class:`Stop` is the stop flag of the background counter
reader (:mod:`zeus_nb.device.counter`), whose sleep is one C call.
"""

from __future__ import annotations

import contextlib
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from zeus_nb.inputs.validate import DURATION, number

if TYPE_CHECKING:
    from zeus_nb.device.base import GPUSystem


class Stop:
    """The reader's stop flag, whose wait is one C call.

    :class:`threading.Event`'s ``wait`` runs about ten Python frames, and the reader waits
    once a counter step while the caller's thread waits for the GIL; on a shared machine each
    frame run after a pause costs microseconds (docs/performance.md). ``nap(timeout)`` (the
    held lock's acquire) returns True once :meth:`set`.
    """

    __slots__ = ("_lock", "flag", "nap")

    def __init__(self) -> None:
        self.flag = False
        self._lock = threading.Lock()
        self._lock.acquire()
        self.nap = self._lock.acquire

    def is_set(self) -> bool:
        return self.flag

    def set(self) -> None:
        if not self.flag:
            self.flag = True
            with contextlib.suppress(RuntimeError):  # another thread set it meanwhile
                self._lock.release()


class PowerIntegrator:
    """Energy for GPUs without an energy counter (pre-Volta): integrates sampled power.

    A background thread samples every ``period`` s; every :meth:`energy` call also samples, so the
    edges of a measurement window are included (trapezoidal rule between samples).
    """

    def __init__(self, read_power: Callable[[], float], period: float = 0.1):
        self._read_power = read_power
        self._period = period
        self._lock = threading.Lock()
        self._t = time.monotonic()
        self._p = read_power()
        self._joules = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="zeus-nb-power")
        self._thread.start()

    def _sample(self) -> float:
        p, t = self._read_power(), time.monotonic()
        with self._lock:
            self._joules += 0.5 * (p + self._p) * (t - self._t)
            self._t, self._p = t, p
            return self._joules

    def _run(self) -> None:
        while not self._stop.wait(self._period):
            self._sample()

    def energy(self) -> float:
        return self._sample()

    def close(self) -> None:
        self._stop.set()


@dataclass
class PowerTimeline:
    """Power samples of some GPUs: ``samples[gpu_index]`` is a list of (time s, power W)."""

    period: float
    samples: dict[int, list[tuple[float, float]]] = field(default_factory=dict)

    def to_frame(self):
        """Tidy DataFrame with columns time, gpu, power."""
        import pandas as pd

        rows = [(t, i, p) for i, pts in self.samples.items() for t, p in pts]
        return pd.DataFrame(rows, columns=["time", "gpu", "power"])


class PowerSampler(ABC):
    """Collects a power timeline while running; a context manager."""

    def __init__(self, indices: list[int], period: float):
        # NaN once passed "period <= 0" and sampled without end
        period = number(period, "sampling period", DURATION, "give seconds, e.g. 0.1", False)
        self.timeline = PowerTimeline(period, {i: [] for i in indices})
        self._lock = threading.Lock()

    @abstractmethod
    def start(self) -> PowerSampler: ...

    @abstractmethod
    def stop(self) -> PowerTimeline: ...

    def __enter__(self) -> PowerSampler:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class ThreadSampler(PowerSampler):
    """Reads each GPU's power every ``period`` seconds on a background thread."""

    def __init__(self, system: GPUSystem, indices: list[int], period: float):
        super().__init__(indices, period)
        self._gpus = [system.gpu(i) for i in indices]
        self._clock = system.clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        t = self._clock()
        for g in self._gpus:
            self.timeline.samples[g.index].append((t, g.power()))

    def _run(self) -> None:
        self._sample()
        while not self._stop.wait(self.timeline.period):
            self._sample()

    def start(self) -> ThreadSampler:
        self._thread = threading.Thread(target=self._run, daemon=True, name="zeus-nb-sampler")
        self._thread.start()
        return self

    def stop(self) -> PowerTimeline:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()
        return self.timeline
