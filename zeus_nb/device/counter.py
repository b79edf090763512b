"""A GPU's energy counter read off the caller's thread, and shared out among windows by power.

On an H100 a read of NVML's energy counter costs 2.8 ms (up to 17 ms) and the counter moves
only every 100 ms, while a power reading costs 1 us (docs/measuring.md). A
:class:`CounterReader` reads the counter on a daemon thread: back to back around a step until
the steps' grid is known, then once just after each step (back to back again every few steps),
sampling the GPU's instant power beside. A window edge (:class:`Mark`) is the caller's clock
and one power reading. The cumulative energy at a mark is *shared out* (final) once counter
steps on both sides of it are known, ``E_j + (E_j+1 - E_j) * P(s_j..t) / P(s_j..s_j+1)``, so
windows that tile a span add up to the counter's own difference over it; before the next step
it is *estimated*: the last step's value plus the integrated power since, times the median
counter/power ratio of recent spans of steps placed closely under steady power (the two disagree
widely on some GPUs). Every mark resolves to one value, so back-to-back windows add up to the
window around them, and a window during which the GPU drew power never measures 0 J. One reader
serves every monitor of a process that measures the GPU (:mod:`.counter_registry` decides).

A starved or late reader (a busy machine, threads holding the GIL) must not move energy between
windows: each read is timed before and after, and a step is placed in its tight bracket or on the
counter's grid (:meth:`CounterReader._place`). A reading the counter's physics rule out is
rejected and a stalled read flagged: windows over either, or over a loosely placed step, are
labelled estimates (``Measurement.energy_method``), and each cause is logged once as a warning.
"""

from __future__ import annotations

import collections
import logging
import math
import statistics
import threading
import time
from typing import TYPE_CHECKING

from zeus_nb.device.counter_track import (
    CALIBRATION_SPREAD,
    CALIBRATION_STEPS,
    ESTIMATED,
    RANK,
    REJECTED,
    SHARED,
    STALLED,
    STEADY,
    TIGHT_READS,
    TIGHT_SLACK_S,
    Mark,
    PowerTrack,
    Read,
    Spans,
    StepGrid,
    Tries,
    break_between,
    implausible,
    max_watts,
)
from zeus_nb.device.sampling import Stop

if TYPE_CHECKING:
    from zeus_nb.device.base import GPU

log = logging.getLogger(__name__)

#: A counter read slower than this (the least of the first reads) goes to a background reader.
SLOW_READ_S = 1e-3
#: The reader reads power beside its counter reads, at most this often (edges add their own):
#: an H100's reading changed every 50-100 ms (docs/measuring.md), and each wake of the reader
#: costs the caller a turn of the GIL, so it wakes for counter steps only.
POWER_PERIOD_S = 0.05
#: Counter period assumed until two steps were seen (an H100's is 100 ms).
DEFAULT_PERIOD_S = 0.1
#: The longest counter period believed (s): bounds how early a first reading's step can be.
MAX_PERIOD_S = 1.0
#: A bracket up to GRID_READS x the tight width still gives the grid a point (weighted by its
#: width): two H100 reads beside a caller running Python bracket 15 ms; without such points
#: the grid drifts from the counter's clock.
GRID_READS = 2
STALL_S = 0.05  # a longer read (or half a period) is a stall: placed by power (H100: 16.8 ms)
#: A power reading whose call took longer than this has no known time and is left out.
POWER_WIDTH_S = 5e-3
#: wait_for_counter waits this many periods (plus reads and slack) for the next step.
WAIT_PERIODS, WAIT_SLACK_S = 5, 0.5
#: A bracket shorter than this x the period holds one step (a fitted period is off < 1 %).
COUNT_SPAN = 0.9
#: Spans of rejected or stalled readings remembered (windows over them are estimates).
MAX_BREAKS = 64

_noted: set[tuple[int, str]] = set()  # (GPU index, cause) already logged as a warning
_new_mark = object.__new__  # a Mark without a Python frame for __init__ (one per window edge)


class CounterReader:
    """Reads one GPU's energy counter (J) on a daemon thread (the module docstring says how).
    :meth:`observe` takes each read (the thread's, or a test's with a clock it controls): it
    checks it against the counter's physics (never back; a step at most the GPU's max power
    limit x the time it can span, with margin), places the step, and shares it out."""

    def __init__(self, gpu: GPU, clock=time.perf_counter):
        self.gpu = gpu
        self.clock = clock
        self.period = DEFAULT_PERIOD_S
        self.read_cost = 0.0  # the latest counter read's duration
        self.least_cost = float("inf")  # the least read duration seen
        self.error: Exception | None = None
        self.max_watts = max_watts(gpu)
        self._power_w = gpu.power_reader()  # W, at each window edge
        self.grid = StepGrid()
        self._lock = threading.Lock()
        self._stepped_cond = threading.Condition(self._lock)  # notified at each counter step
        self._waiting = 0  # threads in wait(): a step notifies only where one waits
        self._anchor: tuple[float, float] | None = None  # (time, J) of the last step (or 1st read)
        self._anchor_lo = 0.0  # the earliest the anchor's step can have been
        self._anchor_how = SHARED  # how the anchor was placed (SHARED: within a tight bracket)
        self._anchor_spread = 0.0  # how far the anchor's step may lie from where it was placed (s)
        self._anchor_k: int | None = None  # the anchor's index on the grid as it stands, if known
        self._stepped = False  # whether the anchor is a counter step (not just the first read)
        self._last: Read | None = None  # the latest good read (raw counter J)
        self._suspect: Read | None = None  # a rejected read: a new base if the next agrees
        self._offset = 0.0  # added to raw readings after a rejected one (J)
        self._breaks: list[tuple[float, float, str]] = []  # spans windows cannot be exact over
        self._power = PowerTrack()  # readings since the step before the anchor (and one before)
        self._pending: list[Mark] = []
        self._gaps: collections.deque[float] = collections.deque(maxlen=9)
        self.tries = Tries()  # when to try a tight bracket
        self._ratios: collections.deque[float] = collections.deque(maxlen=CALIBRATION_STEPS)
        self._ratio = 1.0  # counter J / integrated power J: the median of recent spans' (_step)
        self._spans = Spans(CALIBRATION_STEPS)  # recent complete steps, spans of which calibrate
        self._users = 0
        self._stop = Stop()
        self._thread: threading.Thread | None = None

    # --- the caller's side ------------------------------------------------------------------
    def mark(self) -> Mark:
        """A window edge now: the clock (taken first) and one power reading, no counter read."""
        t = self.clock()
        try:
            watts = self._power_w()
        except Exception:  # the slow way: its error names the GPU and the fix
            watts = self.gpu.power()
        t1 = self.clock()
        with self._lock:
            if t1 - t <= POWER_WIDTH_S:  # a reading whose time is known; else only the edge
                self._power.add((t + t1) / 2, watts)
            return self._pend(t)

    def mark_at(self, t: float) -> Mark | None:
        """An edge at an earlier ``t`` (a window begun on the timed first reads), resolved as
        any before the first step seen; None once the reader saw one (no step would resolve it)."""
        with self._lock:
            return None if self._stepped else self._pend(t)

    def _pend(self, t: float) -> Mark:
        """A new edge at ``t``, resolved at the next counter step (lock held)."""
        m = _new_mark(Mark)
        m.t, m.energy, m.how = t, None, ESTIMATED
        self._pending.append(m)
        return m

    def energy_between(self, a: Mark, b: Mark) -> tuple[float, str]:
        """(J between marks ``a`` and ``b``, never negative; how it was obtained)."""
        with self._lock:
            power = self._power
            if a.energy is None and b.energy is None and self._anchor is not None and power.t:
                # both estimated from the same anchor: its energy cancels (the usual short window)
                at_a, at_b = power.at_each((a.t, b.t))
                joules, how = self._ratio * (at_b - at_a), ESTIMATED
            else:
                ea, ha = self._energy_at(a)
                eb, hb = self._energy_at(b)
                joules, how = eb - ea, max(ha, hb, key=RANK.__getitem__)
            if self._breaks and (brk := break_between(self._breaks, a.t, b.t)):
                how = max(how, brk, key=RANK.__getitem__)
        return max(0.0, joules), how

    def estimate(self, mark: Mark) -> float:
        """The cumulative energy (J) at ``mark`` as known now."""
        with self._lock:
            return self._energy_at(mark)[0]

    def wait(self, mark: Mark, timeout: float | None = None) -> bool:
        """Wait until the counter step after ``mark`` arrived (it is then shared out)."""
        if timeout is None:
            timeout = WAIT_PERIODS * self.period + 4 * self.read_cost + WAIT_SLACK_S
        with self._stepped_cond:
            self._waiting += 1
            try:
                return self._stepped_cond.wait_for(lambda: mark.energy is not None, timeout)
            finally:
                self._waiting -= 1

    # --- energy at a mark (lock held) -------------------------------------------------------
    def _energy_at(self, m: Mark) -> tuple[float, str]:
        if m.energy is not None:
            return m.energy, m.how
        power = self._power
        if not power.t:  # no power reading yet (each edge takes one unless it was slow)
            return (0.0 if self._anchor is None else self._anchor[1]), ESTIMATED
        if self._anchor is None:  # not read yet: power alone, from the first reading on
            return self._ratio * power.integral(power.t[0], m.t), ESTIMATED
        s, e = self._anchor  # on either side of the anchor: the power integral's difference
        at_m, at_s = power.at_each((m.t, s))
        return e + self._ratio * (at_m - at_s), ESTIMATED

    def _note(self, cause: str, message: str, *args, exc_info=None) -> None:
        """Log a cause of estimates once per GPU and process as a warning, then as debug."""
        key = (self.gpu.index, cause)
        level = logging.DEBUG if key in _noted else logging.WARNING
        _noted.add(key)
        log.log(level, "GPU %d: " + message, self.gpu.index, *args, exc_info=exc_info)

    # --- readings ---------------------------------------------------------------------------
    def observe(self, a: float, b: float, raw_joules: float) -> None:
        """A counter read that began at ``a`` and returned ``raw_joules`` at ``b``."""
        cost = b - a
        self.read_cost = cost
        with self._lock:
            if cost < self.least_cost:
                self.least_cost = cost
            read = Read(a, b, raw_joules)
            last = self._last
            stalled = cost > max(STALL_S, self.period / 2)
            if stalled:
                self._note("stall", "counter read took %.3f s; windows over it are estimates", cost)
                self._breaks.append((a, b, STALLED))
            if last is None or self._anchor is None:
                self._last = read
                self._anchor = ((a + b) / 2, raw_joules)
                self._anchor_lo = a - MAX_PERIOD_S
                return
            earliest, most = self._anchor_lo, self.max_watts
            why = implausible(last, read, earliest, most)
            suspect, self._suspect = self._suspect, None
            if why and suspect is not None and implausible(suspect, read, earliest, most) is None:
                self._rebase(suspect)  # the counter moved to a new base and stays there
                last, why = self._last, None
            if why is not None:  # keep the last good reading: a single bad read is dropped
                self._note("rejected", "%s; windows over it are power estimates", why)
                self._breaks.append((self._anchor[0], b, REJECTED))
                self._suspect = read
                return
            self._last = read
            if raw_joules == last.joules:
                return
            s, spread, how, k = self._place(last, read, raw_joules - last.joules)
            if stalled:
                how, spread = STALLED, max(spread, cost / 2)
            self._step(s, raw_joules + self._offset, how, last.a, spread)  # after ``last`` began
            self._anchor_k = k

    def _rebase(self, read: Read) -> None:
        """The counter restarted from ``read``'s value, its last step's: continue from power
        (lock held). The new base goes at that step (the grid's point, else half a period
        back), not at the read: windows over it would count the time between them twice."""
        (s0, e0), ratio = self._anchor, self._ratio  # type: ignore[misc]
        mid, grid = (read.a + read.b) / 2, self.grid
        at = grid.at(math.floor(grid.index(mid))) if grid.ready else mid - self.period / 2
        at = min(max(at, s0), mid)
        est = e0 + ratio * self._power.integral(s0, at)
        self._offset = est - read.joules
        keep = []
        for m in self._pending:
            if m.t > mid:
                keep.append(m)
            else:
                m.energy, m.how = e0 + ratio * self._power.integral(s0, m.t), REJECTED
        self._pending = keep
        self._last = read
        self._anchor, self._anchor_lo, self._stepped = (at, est), read.a - MAX_PERIOD_S, False
        self._anchor_k = None
        self._stepped_cond.notify_all()

    def _place(self, last: Read, cur: Read, delta: float) -> tuple[float, float, str, int | None]:
        """(time of the step after ``last`` began and before ``cur`` returned, how far from it
        the step may lie, how exact, its grid index or None) (lock held). A tight bracket places
        it at its middle; a wider one at the last grid point it holds (the last step the value
        can count); where which is unclear, power decides (estimates). ``last`` saw the anchor's
        value, so a bracket too short for two steps holds the next: counted, where the anchor
        has an index (a fit grown unsure far from its last point need not number it)."""
        lo, hi = last.a, cur.b
        counted = None
        if self._anchor_k is not None and self.grid.ready and hi - lo < COUNT_SPAN * self.period:
            counted = self._anchor_k + 1
        # no step within half a period of the last, unless this read saw one there (no bracket
        # of negative width)
        floor = self._anchor[0] + 0.5 * self.grid.period if self.grid.ready else lo
        if self._stepped and floor < hi:
            lo = max(lo, floor)
        width = hi - lo
        tight = self._tight()
        if width <= tight:
            mid = (lo + hi) / 2
            k = self.grid.add(mid, width / 2, self.period, counted)
            self.tries.tight()
            return mid, width / 2, SHARED, k
        close = width <= GRID_READS * tight  # a close bracket (a caller's thread held the GIL)
        if close:
            self.grid.add((lo + hi) / 2, width / 2, self.period, counted)
        self.tries.loose(close)
        grid = self.grid
        if not grid.ready:  # the value is the last step's before ``hi``: one period apart
            if self._stepped:
                s0, period = self._anchor[0], self.period
                due = s0 + max(1, math.floor((hi - s0) / period)) * period
            else:
                due = max((lo + hi) / 2, hi - self.period / 2)
            s = min(max(due, lo), hi)
            return s, max(s - lo, hi - s), ESTIMATED, None
        cands, k_hi, eps = grid.candidates(lo, hi, cur.a)
        how = ESTIMATED if eps > tight else SHARED  # final: grid known to a tight width
        if not cands:  # the grid's point lies just outside the gap: the nearest, clamped in
            near = min((k_hi, k_hi + 1), key=lambda k: max(lo - grid.at(k), grid.at(k) - hi))
            s = min(max(grid.at(near), lo), hi)
            if abs(grid.at(near) - s) > grid.error(near) + tight:  # not just outside: off
                grid.restart()  # fitted afresh from the next brackets
                return s, max(s - lo, hi - s), ESTIMATED, None
            return s, max(s - lo, hi - s), ESTIMATED, near
        if len(cands) == 1:
            s = min(max(grid.at(cands[0]), lo), hi)
            return s, eps, how, cands[0]
        s0 = self._anchor[0]
        ratio = self._ratio

        def miss(k: int) -> float:
            return abs(ratio * self._power.integral(s0, grid.at(k)) - delta)

        best = min(cands, key=miss)
        s = min(max(grid.at(best), lo), hi)
        return s, max(s - lo, hi - s), ESTIMATED, None  # power chose: not counted from

    def _tight(self) -> float:
        """The widest bracket that still places a step tightly (s)."""
        least = self.least_cost if self.least_cost < float("inf") else 0.0
        return TIGHT_READS * least + TIGHT_SLACK_S

    def _step(
        self, s: float, joules: float, how: str = SHARED, lo: float | None = None, spread=0.0
    ) -> None:
        """A counter step at time ``s`` (give or take ``spread``) to ``joules``: resolve the
        marks before it (lock held)."""
        s0, e0 = self._anchor  # type: ignore[misc]
        power, ratio = self._power, self._ratio
        pending = self._pending
        # the power integral at s0, s and every edge, in one call
        times = [s0, s]
        for m in pending:
            times.append(m.t)
        ats = power.at_each(times) if power.t else None
        base = ats[0] if ats else 0.0
        whole = ats[1] - base if ats and s > s0 else 0.0
        self._spans.step(power, s0, s, joules, spread, not self._stepped, ats)
        if self._stepped:
            self._gaps.append(s - s0)
            self.period = self.grid.period if self.grid.ready else statistics.median(self._gaps)
            judged = self._spans.ratio(CALIBRATION_SPREAD, STEADY)
            if judged is not None:
                self._ratios.append(judged)  # kept here, not summed per edge
                self._ratio = statistics.median(self._ratios)
        exact = how if self._anchor_how == SHARED else self._anchor_how
        keep = []
        for j, m in enumerate(pending, 2):
            if m.t > s:
                keep.append(m)
            elif self._stepped and m.t >= s0:  # inside a complete step: shared out
                part = ats[j] - base if ats else 0.0
                share = part / whole if whole > 0 else (m.t - s0) / max(s - s0, 1e-9)
                m.energy, m.how = e0 + (joules - e0) * share, exact
            else:  # before the first step seen: back from it by power
                m.energy, m.how = joules - ratio * power.integral(m.t, s), ESTIMATED
        self._pending = keep
        power.forget_before(s0)  # the candidate's readings are judged at the next step
        self._anchor, self._anchor_how, self._stepped = (s, joules), how, True
        self._anchor_spread = spread
        self._anchor_lo = s if lo is None else lo
        if len(self._breaks) > MAX_BREAKS:
            del self._breaks[: len(self._breaks) - MAX_BREAKS]
        if self._waiting:
            self._stepped_cond.notify_all()

    # --- the thread -------------------------------------------------------------------------
    def _run(self) -> None:
        failures = 0
        read = self.gpu.counter_reader()
        clock, stop = self.clock, self._stop
        nap = stop.nap  # sleeps up to its timeout; True once stopped
        while not stop.flag:
            if self._stepped:  # sleep until the read is due, in one call (a wait, then the read)
                now = clock()
                delay = self._wake(now) - now
                if (delay > 0 and nap(timeout=max(0.0005, delay))) or stop.flag:
                    break  # stopped while asleep, or while this thread waited for the GIL
            try:
                a = clock()
                joules = read() / 1000.0
                b = clock()
                failures = 0
            except Exception as e:  # keep estimating from power; say why once
                failures += 1
                if self.error is None:
                    log.warning("GPU %d: background counter read failed: %s", self.gpu.index, e)
                self.error = e
                if nap(timeout=min(1.0, 0.01 * 2**failures)):
                    break
                continue
            try:
                self.observe(a, b, joules)
            except Exception as e:  # a fault placing it: the thread goes on (and says so once)
                self._recover(Read(a, b, joules), e)
            ts = self._power.t
            if not ts or b - ts[-1] >= POWER_PERIOD_S:
                self._sample_power()
            stalled = self._stepped and b > self._anchor[0] + 4 * self.period
            if stalled and nap(timeout=self.period / 4):  # a counter that stopped: read less
                break

    def _recover(self, read: Read, error: Exception) -> None:
        """Go on from ``read`` as from a counter that restarted: windows over it are power
        estimates. A fault placing a read (a ZeroDivisionError did) once stopped the thread."""
        self._note("fault", "placing a read failed; windows over it are estimates", exc_info=error)
        with self._lock:
            self._breaks.append((read.a, read.b, REJECTED))
            if self._anchor is not None:
                self._rebase(read)

    def _wake(self, now: float) -> float:
        """When to begin the next read (:meth:`Tries.wake`)."""
        least = self.least_cost if self.least_cost < 1.0 else 0.0
        last_b = None if self._last is None else self._last.b
        s, spread = self._anchor[0], self._anchor_spread  # type: ignore[index]
        return self.tries.wake(now, s, spread, self.grid, self.period, least, last_b)

    def _sample_power(self) -> None:
        try:
            t0 = self.clock()
            watts = self._power_w()
            t1 = self.clock()
        except Exception:  # the counter read reports errors; a missed sample is harmless
            return
        if t1 - t0 <= POWER_WIDTH_S:  # a reading whose time is not known is left out
            with self._lock:
                self._power.add((t0 + t1) / 2, watts)

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
