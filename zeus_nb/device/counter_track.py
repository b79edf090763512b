"""Timelines a background counter reader keeps: window edges, power readings, the step grid.

:class:`Mark` is a window edge and :class:`Read` one counter read; the labels say how an edge's
energy was obtained (``Measurement.energy_method``). :class:`PowerTrack` integrates power
readings so that a counter step can be shared out among the window edges inside it;
:class:`StepGrid` learns where a counter steps (a regular clock, an H100's every 100 ms) from
steps seen between back-to-back reads, so that a step seen late is placed where it happened
(:mod:`zeus_nb.device.counter`)."""

from __future__ import annotations

import bisect
import collections
import math
from collections.abc import Iterable
from typing import NamedTuple

#: A step larger than this x the GPU's highest power limit x the time it can span is no
#: energy the GPU drew (power briefly above the limit is allowed for).
JUMP_MARGIN = 1.5
#: Tightly bracketed steps the grid is fitted to, and how many it needs first.
GRID_POINTS, GRID_MIN_POINTS = 32, 3

# How a window's energy was obtained (Measurement.energy_method values).
COUNTER = "counter"  # synchronous counter reads at both edges (Zeus's way)
SHARED = "counter, shared out by power"  # steps placed within a tight bracket: final
ESTIMATED = "counter + power estimate"  # an edge after the last step, or a step placed loosely
STALLED = "counter + power estimate (a counter read stalled)"
REJECTED = "power estimate (a counter reading was rejected)"
#: The labels of exact measurements; every other label is an estimate.
EXACT = (COUNTER, SHARED)
RANK = {SHARED: 0, ESTIMATED: 1, STALLED: 2, REJECTED: 3}  # a window takes its worst edge's


class Mark:
    """A window edge: the reader's clock and, once known, the cumulative energy there (J)."""

    __slots__ = ("energy", "how", "t")

    def __init__(self, t: float):
        self.t = t
        self.energy: float | None = None  # set when the counter step after it arrived
        self.how = ESTIMATED  # how that energy was obtained (SHARED: final)

    @property
    def final(self) -> bool:
        return self.how == SHARED


class Read(NamedTuple):
    """One counter read: it began at ``a``, returned at ``b``; the value is from in between."""

    a: float
    b: float
    joules: float


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
        return self.at_each((t,))[0]

    def at_each(self, times: Iterable[float]) -> list[float]:
        """The running integral (J) at each of ``times``, in one call: a counter step shares
        itself out among every edge it spans at once (each call is a Python frame the GIL's
        other holder waits for)."""
        ts, ps, cum = self.t, self.p, self.cum
        last = len(ts) - 1
        out = []
        for t in times:
            k = bisect.bisect_right(ts, t) - 1
            if k < 0:
                out.append(-(ts[0] - t) * ps[0])
            elif k == last:
                out.append(cum[k] + (t - ts[k]) * ps[k])
            else:
                t0, t1, p0 = ts[k], ts[k + 1], ps[k]
                p = p0 + (ps[k + 1] - p0) * (t - t0) / (t1 - t0) if t1 > t0 else p0
                out.append(cum[k] + (t - t0) * (p0 + p) / 2)
        return out

    def integral(self, a: float, b: float) -> float:
        """J of power readings between times ``a`` and ``b`` (0 before any reading)."""
        if not self.t or b <= a:
            return 0.0
        at_a, at_b = self.at_each((a, b))
        return at_b - at_a

    def forget_before(self, t: float) -> None:
        """Drop readings before ``t`` but the last one, which still bounds ``t``."""
        cut = max(0, bisect.bisect_left(self.t, t) - 1)
        del self.t[:cut], self.p[:cut], self.cum[:cut]


class StepGrid:
    """Where the counter steps: ``phase + k * period``, fitted to steps bracketed tightly.

    A step seen between two back-to-back reads is known to within their span (a few ms); one
    seen after a long gap (a starved or late reader) is only known to lie in the gap. Counters
    step on a regular clock (an H100's every 100 ms), so the tight brackets give the grid, and
    a step seen late goes to the grid point the gap holds.
    """

    def __init__(self) -> None:
        self.points: collections.deque[tuple[float, float]] = collections.deque(maxlen=GRID_POINTS)
        self.phase = 0.0
        self.period = 0.0  # 0: not fitted yet
        self.resid = 0.0  # the largest residual of the fit (s)
        self.k_span = 0
        #: Whether the grid is fitted (to GRID_MIN_POINTS points or more): a plain attribute,
        #: set where points and period change, as the reader asks it several times a read.
        self.ready = False

    def index(self, t: float) -> float:
        return (t - self.phase) / self.period

    def at(self, k: int) -> float:
        return self.phase + k * self.period

    def error(self, k: int) -> float:
        """How far grid point ``k`` may lie from the truth (s): residuals plus extrapolation."""
        last = (self.points[-1][0] - self.phase) / self.period  # the latest point's index
        slope = 2 * self.resid / max(self.k_span, 1)
        return self.resid + abs(k - last) * slope

    def candidates(self, lo: float, hi: float, begun: float) -> tuple[range, int, float]:
        """(The points a step seen between ``lo`` and ``hi`` by a read ``begun`` then can be,
        the last point before ``hi``, the grid's error there (s)): those within the gap,
        widened by the error, and not passed before the read began."""
        phase, period = self.phase, self.period
        k_hi = math.floor((hi - phase) / period)
        eps = self.error(k_hi)
        first = max(math.ceil((lo - phase) / period), math.floor((begun - eps - phase) / period))
        return range(first, math.floor((hi + eps - phase) / period) + 1), k_hi, eps

    def add(self, t: float, half: float, guess: float) -> None:
        """A step bracketed within ``t`` +- ``half``; a point off the grid restarts it.
        ``guess``: the period as the gaps between steps say, until the grid is fitted."""
        if self.ready:
            k = round(self.index(t))
            if abs(self.at(k) - t) > half + self.error(k) + half:
                self.points.clear()
                self.period = 0.0
        self.points.append((t, half))
        self._fit(self.period or guess)
        self.ready = self.period > 0 and len(self.points) >= GRID_MIN_POINTS

    def _fit(self, guess: float) -> None:
        pts = [t for t, _ in self.points]
        if len(pts) < 2 or guess <= 0:
            return
        ks = [round((t - pts[0]) / guess) for t in pts]
        n = len(ks)
        mk, mt = sum(ks) / n, sum(pts) / n
        var = sum((k - mk) ** 2 for k in ks)
        if var == 0:
            return
        period = sum((k - mk) * (t - mt) for k, t in zip(ks, pts, strict=True)) / var
        if period <= 0:
            return
        phase = mt - period * mk
        self.resid = max(abs(phase + period * k - t) for k, t in zip(ks, pts, strict=True))
        self.k_span = max(ks) - min(ks)
        # the phase at the latest point, so that indices near now stay small
        self.phase, self.period = phase + period * ks[-1], period


def max_watts(gpu) -> float | None:
    """The GPU's highest power limit (W), which bounds a counter step; None where unknown."""
    try:
        return gpu.get_power_management_limit_constraints()[1] / 1000.0
    except Exception:
        return None


def implausible(last: Read, read: Read, earliest: float, watts: float | None) -> str | None:
    """Why ``read`` cannot follow ``last`` on a counter whose step before ``last`` came no
    earlier than ``earliest``, on a GPU whose highest power limit is ``watts``; or None."""
    delta = read.joules - last.joules
    if delta < 0:
        return f"the counter went back by {-delta:.3f} J"
    span = read.b - min(earliest, last.a)
    if watts is not None and delta > JUMP_MARGIN * watts * span + 1:
        return (
            f"the counter jumped by {delta:.3f} J in at most {span:.3f} s (over "
            f"{watts:g} W x {JUMP_MARGIN:g})"
        )
    return None
