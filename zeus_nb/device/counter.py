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
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from zeus_nb.device.base import GPU

log = logging.getLogger(__name__)

#: A counter read slower than this (the least of the first reads) goes to a background reader.
SLOW_READ_S = 1e-3
#: The reader reads power beside its counter reads, at most this often (window edges add their
#: own readings): NVML's power reading changed about every 50-100 ms on an H100
#: (docs/measuring.md), and each wake of the reader costs the caller's thread a turn of the GIL,
#: so it wakes for counter steps only.
POWER_PERIOD_S = 0.05
#: How long before the next counter step is due, besides half a read, the reader starts reading
#: the counter (back to back until it moves): none, so that most steps take one read. A step
#: seen only after a pause is placed where the period puts it, within the pause (an H100's steps
#: came 97-102 ms apart).
LEAD_S = 0.0
#: Counter period assumed until two steps were seen (an H100's is 100 ms).
DEFAULT_PERIOD_S = 0.1
#: Complete steps whose counter/power ratio calibrates estimates.
CALIBRATION_STEPS = 10

# How a window's energy was obtained (Measurement.energy_method values).
COUNTER = "counter"  # synchronous counter reads at both edges (Zeus's way)
SHARED = "counter, shared out by power"  # counter steps on both sides of each edge: final
ESTIMATED = "counter + power estimate"  # an edge after the last counter step: approximate


class Mark:
    """A window edge: the reader's clock and, once known, the cumulative energy there (J)."""

    __slots__ = ("energy", "final", "t")

    def __init__(self, t: float):
        self.t = t
        self.energy: float | None = None  # set when the counter step after it arrived
        self.final = False  # whether that energy is shared out between two known steps


class PowerTrack:
    """Power readings (time, W), sorted, with the running integral of them (J) at each.

    Between readings power is linear; before the first and after the last it is held flat.
    Adding a reading at the end is O(1) and the integral up to any time O(log n), so a window
    edge costs the same however many edges a counter step holds.
    """

    def __init__(self) -> None:
        self.t: list[float] = []
        self.p: list[float] = []
        self.cum: list[float] = []

    def add(self, t: float, watts: float) -> None:
        ts = self.t
        if not ts or t >= ts[-1]:
            self.cum.append(self.cum[-1] + (t - ts[-1]) * (watts + self.p[-1]) / 2 if ts else 0.0)
            ts.append(t)
            self.p.append(watts)
            return
        k = bisect.bisect_right(ts, t)  # late: insert, then redo the running integral after it
        ts.insert(k, t)
        self.p.insert(k, watts)
        self.cum.insert(k, 0.0)
        for i in range(max(k, 1), len(ts)):
            self.cum[i] = self.cum[i - 1] + (ts[i] - ts[i - 1]) * (self.p[i] + self.p[i - 1]) / 2

    def at(self, t: float) -> float:
        """The running integral (J) at time ``t``."""
        ts, ps, cum = self.t, self.p, self.cum
        k = bisect.bisect_right(ts, t) - 1
        if k < 0:
            return -(ts[0] - t) * ps[0]
        if k == len(ts) - 1:
            return cum[k] + (t - ts[k]) * ps[k]
        t0, t1, p0 = ts[k], ts[k + 1], ps[k]
        p = p0 + (ps[k + 1] - p0) * (t - t0) / (t1 - t0) if t1 > t0 else p0
        return cum[k] + (t - t0) * (p0 + p) / 2

    def integral(self, a: float, b: float) -> float:
        """J of power readings between times ``a`` and ``b`` (0 before any reading)."""
        return self.at(b) - self.at(a) if self.t and b > a else 0.0

    def forget_before(self, t: float) -> None:
        """Drop readings before ``t`` but the last one, which still bounds ``t``."""
        cut = max(0, bisect.bisect_left(self.t, t) - 1)
        del self.t[:cut], self.p[:cut], self.cum[:cut]


class CounterReader:
    """Reads one GPU's energy counter (J) on a daemon thread; see the module docstring."""

    def __init__(self, gpu: GPU, clock=time.perf_counter):
        self.gpu = gpu
        self.clock = clock
        self.period = DEFAULT_PERIOD_S
        self.read_cost = 0.0  # the latest counter read's duration
        self.error: Exception | None = None
        self._lock = threading.Lock()
        self._stepped_cond = threading.Condition(self._lock)  # notified at each counter step
        self._anchor: tuple[float, float] | None = None  # (time, J) of the last step (or 1st read)
        self._stepped = False  # whether the anchor is a counter step (not just the first read)
        self._power = PowerTrack()  # readings since the anchor (and the one before it)
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
            self._power.add(m.t, watts)
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
        with self._stepped_cond:
            return self._stepped_cond.wait_for(lambda: mark.energy is not None, limit)

    @property
    def ready(self) -> bool:
        """Whether the counter has been read at least once."""
        return self._anchor is not None

    # --- energy at a mark (lock held) -------------------------------------------------------
    def _ratio(self) -> float:
        joules = sum(e for e, _ in self._ratios)
        powered = sum(p for _, p in self._ratios)
        return joules / powered if joules > 0 and powered > 0 else 1.0

    def _energy_at(self, m: Mark) -> tuple[float, bool]:
        if m.energy is not None:
            return m.energy, m.final
        power = self._power
        if self._anchor is None:  # not read yet: power alone, from the first reading on
            return self._ratio() * power.integral(power.t[0], m.t), False
        s, e = self._anchor
        if m.t >= s:
            return e + self._ratio() * power.integral(s, m.t), False
        return e - self._ratio() * power.integral(m.t, s), False

    # --- the reader's side ------------------------------------------------------------------
    def _step(self, s: float, joules: float) -> None:
        """A counter step at time ``s`` to ``joules``: resolve the marks before it (lock held)."""
        s0, e0 = self._anchor  # type: ignore[misc]
        power, ratio = self._power, self._ratio()
        whole = power.integral(s0, s)
        if self._stepped:
            self._gaps.append(s - s0)
            self.period = sorted(self._gaps)[len(self._gaps) // 2]
            if whole > 0:
                self._ratios.append((joules - e0, whole))
        keep = []
        for m in self._pending:
            if m.t > s:
                keep.append(m)
            elif self._stepped and m.t >= s0:  # inside a complete step: shared out, final
                part = power.integral(s0, m.t)
                share = part / whole if whole > 0 else (m.t - s0) / max(s - s0, 1e-9)
                m.energy, m.final = e0 + (joules - e0) * share, True
            else:  # before the first step seen: back from it by power
                m.energy = joules - ratio * power.integral(m.t, s)
        self._pending = keep
        power.forget_before(s)
        self._anchor, self._stepped = (s, joules), True
        self._stepped_cond.notify_all()

    def _run(self) -> None:
        last: float | None = None  # counter value of the previous read (J)
        prev: tuple[float, float] | None = None  # (start, end) of the previous read
        failures = 0
        while not self._stop.is_set():
            now = self.clock()
            lead = LEAD_S + 0.5 * self.read_cost
            due = self._anchor is None or not self._stepped or now >= self._due() - lead
            if not due:  # sleep until the next step is due (each wake costs the caller the GIL)
                self._stop.wait(max(0.0005, self._due() - lead - now))
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
            self.read_cost = b - a
            if b - self._power_seen() >= POWER_PERIOD_S:
                self._sample_power()
            with self._lock:
                if self._anchor is None:
                    self._anchor = ((a + b) / 2, joules)
                elif joules != last and prev is not None:
                    self._step(self._step_time(prev, (a, b)), joules)
            last, prev = joules, (a, b)
            if self._stepped and self.clock() > self._due() + 3 * self.period:
                self._stop.wait(self.period / 4)  # a counter that stopped moving: read less

    def _step_time(self, before: tuple[float, float], after: tuple[float, float]) -> float:
        """When the counter moved, between a read of its old value and one of its new value.

        Back-to-back reads pin it to the middle of the two; after a pause (the reader waits for
        the next step), the step is where the period says, within the pause (lock held).
        """
        lo, hi = (before[0] + before[1]) / 2, (after[0] + after[1]) / 2
        if after[0] - before[1] <= self.read_cost + 1e-3 or not self._stepped:
            return (lo + hi) / 2
        return min(max(self._due(), lo), hi)

    def _power_seen(self) -> float:
        """When power was last read (by the reader or at a window edge)."""
        ts = self._power.t
        return ts[-1] if ts else float("-inf")

    def _due(self) -> float:
        return self._anchor[0] + self.period if self._anchor is not None else 0.0

    def _sample_power(self) -> None:
        try:
            watts = self.gpu.power()
        except Exception:  # the counter read reports errors; a missed sample is harmless
            return
        t = self.clock()
        with self._lock:
            self._power.add(t, watts)

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
