"""A GPU's energy counter read off the caller's thread, and shared out among windows by power.

On an H100 a read of NVML's energy counter costs 2.8 ms (up to 17 ms) and the counter moves
only every 100 ms, while a power reading costs 1 us (docs/measuring.md). A
:class:`CounterReader` reads the counter on a daemon thread, reading back to back only around the
moment the next step is due, and samples power in between. A window edge is a :class:`Mark`: the
caller's clock and one power reading, a few microseconds. The cumulative energy at a mark is

* *shared out* (final) once counter steps on both sides of it are known: the step's energy is
  split by the power readings, ``E_j + (E_j+1 - E_j) * P(s_j..t) / P(s_j..s_j+1)``, so windows
  that tile a span add up to the counter's own difference over it;
* *estimated* before the next step arrives: the last step's value plus the integrated power since
  it, scaled by the ratio of counter energy to integrated power over the last complete steps
  (power and counter can disagree widely on some GPUs; the counter stays the ground truth).

Every mark resolves to one value, so back-to-back windows add up to the window around them, and
a window during which the GPU drew power never measures 0 J. One reader serves every monitor of
a process that measures the GPU (:func:`acquire`).
"""

from __future__ import annotations

import atexit
import bisect
import collections
import logging
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from zeus_nb.device.base import GPU

log = logging.getLogger(__name__)

#: A counter read slower than this (the least of the first reads) goes to a background reader.
SLOW_READ_S = 1e-3
#: How often the reader samples power between counter reads.
POWER_PERIOD_S = 0.005
#: Counter period assumed until two steps were seen (an H100's is 100 ms).
DEFAULT_PERIOD_S = 0.1
#: Complete steps whose counter/power ratio calibrates estimates.
CALIBRATION_STEPS = 10

# How a window's energy was obtained (Measurement.energy_method values).
COUNTER = "counter"  # synchronous counter reads at both edges (Zeus's way)
SHARED = "counter, shared out by power"  # counter steps on both sides of each edge: final
ESTIMATED = "counter + power estimate"  # an edge after the last counter step: approximate


@dataclass(eq=False)
class Mark:
    """A window edge: the reader's clock and, once known, the cumulative energy there (J)."""

    t: float
    energy: float | None = None
    final: bool = False
    resolved: threading.Event = field(default_factory=threading.Event, repr=False)


class CounterReader:
    """Reads one GPU's energy counter (J) on a daemon thread; see the module docstring."""

    def __init__(self, gpu: GPU, clock=time.perf_counter):
        self.gpu = gpu
        self.clock = clock
        self.period = DEFAULT_PERIOD_S
        self.read_cost = 0.0  # the latest counter read's duration
        self.error: Exception | None = None
        self._lock = threading.Lock()
        self._anchor: tuple[float, float] | None = None  # (time, J) of the last step (or 1st read)
        self._stepped = False  # whether the anchor is a counter step (not just the first read)
        self._samples: list[tuple[float, float]] = []  # (time, W) since the anchor, sorted
        self._pending: list[Mark] = []
        self._gaps: collections.deque[float] = collections.deque(maxlen=9)
        self._ratios: collections.deque[tuple[float, float]] = collections.deque(
            maxlen=CALIBRATION_STEPS
        )
        self._users = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- the caller's side ------------------------------------------------------------------
    def mark(self) -> Mark:
        """A window edge now: the clock and one power reading, no counter read."""
        watts = self.gpu.power()
        m = Mark(self.clock())
        with self._lock:
            bisect.insort(self._samples, (m.t, watts))
            self._pending.append(m)
        return m

    def energy_between(self, a: Mark, b: Mark) -> tuple[float, bool]:
        """(J between marks ``a`` and ``b``, whether final); never negative."""
        with self._lock:
            ea, fa = self._energy_at(a)
            eb, fb = self._energy_at(b)
        return max(0.0, eb - ea), fa and fb

    def estimate(self, mark: Mark) -> float:
        """The cumulative energy (J) at ``mark`` as known now."""
        with self._lock:
            return self._energy_at(mark)[0]

    def wait(self, mark: Mark, timeout: float | None = None) -> bool:
        """Wait until the counter step after ``mark`` arrived (it is then shared out)."""
        limit = 3 * self.period + 4 * self.read_cost + 0.05 if timeout is None else timeout
        return mark.resolved.wait(limit)

    @property
    def ready(self) -> bool:
        """Whether the counter has been read at least once."""
        return self._anchor is not None

    # --- energy at a mark (lock held) -------------------------------------------------------
    def _ratio(self) -> float:
        joules = sum(e for e, _ in self._ratios)
        powered = sum(p for _, p in self._ratios)
        return joules / powered if joules > 0 and powered > 0 else 1.0

    def _power_integral(self, a: float, b: float) -> float:
        """J of power readings between times ``a`` < ``b``: linear between samples, held flat
        beyond the first and last."""
        pts = self._samples
        if not pts or b <= a:
            return 0.0

        def at(t: float) -> float:
            k = bisect.bisect_left(pts, (t, float("-inf")))
            if k == 0:
                return pts[0][1]
            if k == len(pts):
                return pts[-1][1]
            (t0, p0), (t1, p1) = pts[k - 1], pts[k]
            return p0 if t1 == t0 else p0 + (p1 - p0) * (t - t0) / (t1 - t0)

        lo = bisect.bisect_right(pts, (a, float("inf")))
        hi = bisect.bisect_left(pts, (b, float("-inf")))
        xs = [(a, at(a))] + pts[lo:hi] + [(b, at(b))]
        return sum(
            (t1 - t0) * (p0 + p1) / 2 for (t0, p0), (t1, p1) in zip(xs, xs[1:], strict=False)
        )

    def _energy_at(self, m: Mark) -> tuple[float, bool]:
        if m.energy is not None:
            return m.energy, m.final
        if self._anchor is None:  # not read yet: power alone, from the mark's own reading
            return self._ratio() * self._power_integral(self._samples[0][0], m.t), False
        s, e = self._anchor
        if m.t >= s:
            return e + self._ratio() * self._power_integral(s, m.t), False
        return e - self._ratio() * self._power_integral(m.t, s), False

    # --- the reader's side ------------------------------------------------------------------
    def _step(self, s: float, joules: float) -> None:
        """A counter step at time ``s`` to ``joules``: resolve the marks before it (lock held)."""
        s0, e0 = self._anchor  # type: ignore[misc]
        whole = self._power_integral(s0, s)
        if self._stepped:
            self._gaps.append(s - s0)
            self.period = sorted(self._gaps)[len(self._gaps) // 2]
            if whole > 0:
                self._ratios.append((joules - e0, whole))
        keep = []
        for m in self._pending:
            if m.t > s:
                keep.append(m)
                continue
            if self._stepped and m.t >= s0:  # inside a complete step: shared out, final
                part = self._power_integral(s0, m.t)
                share = part / whole if whole > 0 else (m.t - s0) / max(s - s0, 1e-9)
                m.energy, m.final = e0 + (joules - e0) * share, True
            else:  # before the first step seen: back from it by power
                m.energy = joules - self._ratio() * self._power_integral(m.t, s)
            m.resolved.set()
        self._pending = keep
        cut = max(0, bisect.bisect_left(self._samples, (s, float("-inf"))) - 1)
        del self._samples[:cut]
        self._anchor, self._stepped = (s, joules), True

    def _run(self) -> None:
        last: float | None = None  # counter value of the previous read (J)
        prev_mid: float | None = None
        failures = 0
        while not self._stop.is_set():
            now = self.clock()
            lead = 0.01 + 2 * self.read_cost
            due = self._anchor is None or not self._stepped or now >= self._due() - lead
            if not due:
                self._sample_power()
                self._stop.wait(min(POWER_PERIOD_S, max(0.0, self._due() - lead - now)))
                continue
            try:
                a = self.clock()
                joules = self.gpu.get_total_energy_consumption() / 1000.0
                b = self.clock()
                failures = 0
            except Exception as e:  # keep estimating from power; say why once
                failures += 1
                if self.error is None:
                    log.warning("GPU %d: background counter read failed: %s", self.gpu.index, e)
                self.error = e
                self._stop.wait(min(1.0, 0.01 * 2**failures))
                continue
            self.read_cost, mid = b - a, (a + b) / 2
            self._sample_power()
            with self._lock:
                if self._anchor is None:
                    self._anchor = (mid, joules)
                elif joules != last and prev_mid is not None:
                    self._step((prev_mid + mid) / 2, joules)
            last, prev_mid = joules, mid
            if self._stepped and self.clock() > self._due() + 3 * self.period:
                self._stop.wait(self.period / 4)  # a counter that stopped moving: read less

    def _due(self) -> float:
        return self._anchor[0] + self.period if self._anchor is not None else 0.0

    def _sample_power(self) -> None:
        try:
            watts = self.gpu.power()
        except Exception:  # the counter read reports errors; a missed sample is harmless
            return
        t = self.clock()
        with self._lock:
            if not self._samples or t >= self._samples[-1][0]:
                self._samples.append((t, watts))
            else:
                bisect.insort(self._samples, (t, watts))

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, daemon=True, name=f"zeus-nb-counter-{self.gpu.index}"
            )
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=1.0)


_readers: weakref.WeakKeyDictionary[GPU, CounterReader] = weakref.WeakKeyDictionary()
_registry_lock = threading.Lock()


def acquire(gpu: GPU) -> CounterReader:
    """The process's running reader of ``gpu``'s counter (started on first use)."""
    with _registry_lock:
        reader = _readers.get(gpu)
        if reader is None or reader._stop.is_set():
            reader = _readers[gpu] = CounterReader(gpu)
        reader._users += 1
        reader.start()
        return reader


def release(reader: CounterReader) -> None:
    """One user less; the reader stops when no monitor uses it any more."""
    with _registry_lock:
        reader._users -= 1
        if reader._users <= 0:
            reader._stop.set()
            if _readers.get(reader.gpu) is reader:
                del _readers[reader.gpu]


def known_slow(gpu: GPU) -> bool:
    """Whether a reader of ``gpu`` already runs (another monitor found its counter slow)."""
    with _registry_lock:
        reader = _readers.get(gpu)
        return reader is not None and not reader._stop.is_set()


@atexit.register
def _stop_all() -> None:
    with _registry_lock:
        readers = list(_readers.values())
    for reader in readers:
        reader._stop.set()
