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
#: Closely bracketed steps the grid is fitted to, and how many it needs first.
GRID_POINTS, GRID_MIN_POINTS = 32, 3
#: Once the grid is known to GRID_TRUST x the tight bracket, the reader reads once just after
#: each step, and brackets a step tightly again after REBRACKET_STEPS such steps (the grid's
#: points come from tight brackets; a clock drifting from the GPU's would leave it behind).
GRID_TRUST, REBRACKET_STEPS = 0.5, 4
#: A try that came out loose (a caller's thread holding the GIL delays each read's return by
#: up to its switch interval, 5 ms, so no two reads bracket tightly) is made again after twice
#: as many steps, up to MAX_REBRACKET_STEPS: trying at every step read back to back across a
#: span that widened with the grid's error (measured: 12 reads a step beside a caller running
#: Python). A try reads back to back from ATTEMPT_SPAN periods (at most) before the grid's
#: point to as far after; past that, once a quarter period.
MAX_REBRACKET_STEPS, ATTEMPT_SPAN = 64, 0.25
#: Spans of complete steps whose counter/power ratios (their median) calibrate estimates, and
#: the most steps a span holds (:class:`Spans`).
CALIBRATION_STEPS = 10
#: A span calibrates only where its ends are placed to within this fraction of its length (a
#: wide bracket's step gives a ratio off by as much), and its power readings and the next step's
#: held within STEADY (they lag a change of load: ratios 1.5-3.4 across one, beside busy CPUs).
CALIBRATION_SPREAD, STEADY = 0.1, 0.2  # STEADY None: any span placed calibrates, at once
#: A bracket of two back-to-back reads is "tight" up to TIGHT_READS least read costs plus
#: TIGHT_SLACK_S (an H100's reads took 2.6-3.0 ms, 1 in 200 more: two and the Python between).
TIGHT_READS, TIGHT_SLACK_S = 3, 1e-3

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

    def bounds(self, a: float, b: float) -> tuple[float, float, bool] | None:
        """(least, most) of the readings from ``a`` to ``b`` and the one before ``a``, and
        whether one was taken from ``a`` on; None where there is none."""
        lo, hi = bisect.bisect_left(self.t, a), bisect.bisect_right(self.t, b)
        ps = self.p[max(0, lo - 1) : hi]
        return (min(ps), max(ps), hi > lo) if ps else None

    def forget_before(self, t: float) -> None:
        """Drop readings before ``t`` but the last one, which still bounds ``t``."""
        cut = max(0, bisect.bisect_left(self.t, t) - 1)
        del self.t[:cut], self.p[:cut], self.cum[:cut]


class Done(NamedTuple):
    """A complete counter step, kept for calibration (:class:`Spans`)."""

    t: float  # when it was placed
    joules: float  # the counter there (J)
    spread: float  # how far from ``t`` it may lie (s)
    cum: float | None  # the power integral at ``t`` (J), settled once readings after it came
    power: tuple[float, float, bool] | None  # least, most reading across it (W); one inside?


class Spans:
    """Recent complete steps, whose counter J over power J calibrate estimates.

    A span's ratio is off by as much as its ends' placement, relative to its length: a caller's
    thread running Python holds the GIL for up to 5 ms at each of the reader's reads, so no
    single step of an H100's 100 ms is placed to within 10 % of itself (ends about 8 ms wide
    each, measured), while two or three steps together are, and a longer span, where power held
    steady, closer still. Power readings lag a change of load (100 ms averages on an H100), so
    a span calibrates only where they held steady across it and across the step after it, which
    must hold a reading (judged one step late).
    """

    def __init__(self, keep: int) -> None:
        self.done: collections.deque[Done] = collections.deque(maxlen=keep)

    def step(
        self,
        power: PowerTrack,
        s0: float,
        s: float,
        joules: float,
        spread: float,
        first: bool,
        ats: list[float] | None,
    ) -> None:
        """The step at ``s`` after the one (or the first read) at ``s0``; ``ats``: the power
        integral at ``s0`` and ``s`` first (None: no reading yet)."""
        if first:
            self.done.clear()
        if self.done and ats:  # the last step's integral, with the readings since
            self.done[-1] = self.done[-1]._replace(cum=ats[0])
        bounds = None if first else power.bounds(s0, s)
        self.done.append(Done(s, joules, spread, ats[1] if ats else None, bounds))

    def ratio(self, within: float, steady: float | None) -> float | None:
        """Counter J / power J over the span of steps placed most closely for its length
        (to ``within`` of it at most), ending at the one before the last step, where power
        readings held within ``steady`` across it and the last step (``steady`` None: the
        shortest span ending at the last step, whatever the power did); else None."""
        done = list(self.done)
        end = len(done) - (1 if steady is None else 2)
        if end < 1:
            return None
        last, lo, hi = done[end], math.inf, 0.0
        if steady is not None:  # the step after: readings lag a change of load
            after = done[-1].power
            if after is None or not after[2]:  # a reader starved through it took none in it
                return None
            lo, hi = after[0], after[1]
        best, least = None, within
        for k in range(end - 1, -1, -1):
            first = done[k]
            if steady is not None:  # longer spans hold the shorter ones' readings
                inside = done[k + 1].power
                if inside is None:
                    break
                lo, hi = min(lo, inside[0]), max(hi, inside[1])
                if lo <= 0 or hi > (1 + steady) * lo:
                    break
            if last.t <= first.t:  # a step placed on or before an earlier one: no span
                continue
            off = (first.spread + last.spread) / (last.t - first.t)
            if off <= least and first.cum is not None and last.cum is not None:
                best, least = first, off
                if steady is None:
                    break
        if best is None or last.cum <= best.cum:  # type: ignore[operator]
            return None
        return (last.joules - best.joules) / (last.cum - best.cum)  # type: ignore[operator]


class StepGrid:
    """Where the counter steps: ``phase + k * period``, fitted to steps bracketed closely.

    A step seen between two back-to-back reads is known to within their span (a few ms, or
    about 15 ms where a thread running Python delays each read's return); one seen after a
    long gap (a starved or late reader) is only known to lie in the gap. Counters step on a
    regular clock (an H100's every 100 ms), so the brackets give the grid (each weighted by
    how tight it is), and a step seen late goes to the grid point the gap holds.

    Each point keeps the grid index it was given when it came: a later fit never renumbers
    it, and a point whose index the grid cannot tell for sure (its error there reaches a
    third of a period, e.g. after a long spell without brackets) starts the grid afresh
    instead of being counted a step off, which would skew the period and every point after.
    """

    def __init__(self) -> None:
        self.points: collections.deque[tuple[float, float, int]] = collections.deque(
            maxlen=GRID_POINTS
        )  # (time, half-width, index)
        self.phase = 0.0
        self.period = 0.0  # 0: not fitted yet
        self.resid = 0.0  # the largest residual of the fit among its closest brackets (s)
        self.k_span = 0
        self.slope = 0.0  # how much the grid's error grows a step away from its latest point (s)
        #: Whether the grid is fitted (to GRID_MIN_POINTS points or more): a plain attribute,
        #: set where points and period change, as the reader asks it several times a read.
        self.ready = False

    def index(self, t: float) -> float:
        return (t - self.phase) / self.period

    def at(self, k: int) -> float:
        return self.phase + k * self.period

    def error(self, k: int) -> float:
        """How far grid point ``k`` may lie from the truth (s): residuals plus extrapolation
        (see :meth:`_fit` for the period's error)."""
        return self.resid + abs(k - self.points[-1][2]) * self.slope

    def candidates(self, lo: float, hi: float, begun: float) -> tuple[range, int, float]:
        """(The points a step seen between ``lo`` and ``hi`` by a read ``begun`` then can be,
        the last point before ``hi``, the grid's error there (s)): those within the gap,
        widened by the error, and not passed before the read began."""
        phase, period = self.phase, self.period
        k_hi = math.floor((hi - phase) / period)
        eps = self.error(k_hi)
        first = max(math.ceil((lo - phase) / period), math.floor((begun - eps - phase) / period))
        return range(first, math.floor((hi + eps - phase) / period) + 1), k_hi, eps

    def add(self, t: float, half: float, guess: float, counted: int | None = None) -> int | None:
        """A step bracketed within ``t`` +- ``half``; its index (None where not fitted).
        ``guess``: the period as the gaps between steps say, until the grid is fitted.
        ``counted``: its index as the reader counted steps (the one after a step placed at a
        known index), sure however far the fit's error has grown since its last point. A point
        off the grid, or one whose index is not sure, restarts it."""
        if self.ready:  # indices from the fit, which knows the period best
            if counted is None:
                k = round((t - self.phase) / self.period)
                sure = self.error(k) + 2 * half < self.period / 3
            else:
                k, sure = counted, True
            if not sure or abs(self.at(k) - t) > 2 * half + self.error(k):
                self.restart()
        if self.points and not self.ready:  # from the last point, by the guessed period
            lt, lh, lk = self.points[-1]
            gap = (t - lt) / guess if guess > 0 else 0.0
            # a guess may be off by a few % (loosely placed steps): more steps than 3 apart
            # can be miscounted, so the grid starts again from here
            if guess <= 0 or gap > 3.5 or gap < 0.5:
                self.restart()
            else:
                k = lk + round(gap)
        if not self.points:
            k = 0
        self.points.append((t, half, k))
        self._fit()
        self.ready = self.period > 0 and len(self.points) >= GRID_MIN_POINTS
        return self.points[-1][2] if self.ready else None

    def restart(self) -> None:
        """Forget the points: the grid is fitted again from the next brackets."""
        self.points.clear()
        self.period, self.resid, self.slope, self.k_span, self.ready = 0.0, 0.0, 0.0, 0, False

    def _fit(self) -> None:
        """Weighted least squares of time on index (a point's weight: 1 / its half-width
        squared), with the phase at the latest point so that indices near now stay small."""
        pts = self.points
        if len(pts) < 2:
            return
        ws = [1.0 / max(h, 1e-4) ** 2 for _, h, _ in pts]
        sw = sum(ws)
        mk = sum(w * k for w, (_, _, k) in zip(ws, pts, strict=True)) / sw
        mt = sum(w * t for w, (t, _, _) in zip(ws, pts, strict=True)) / sw
        var = sum(w * (k - mk) ** 2 for w, (_, _, k) in zip(ws, pts, strict=True))
        if var == 0:
            return
        cov = sum(w * (k - mk) * (t - mt) for w, (t, _, k) in zip(ws, pts, strict=True))
        period = cov / var
        if period <= 0:
            return
        phase = mt - period * mk
        last = pts[-1][2]
        # re-index so that the latest point is 0: the stored indices shift with the phase
        self.points = collections.deque(((t, h, k - last) for t, h, k in pts), maxlen=GRID_POINTS)
        ks = [k for _, _, k in pts]
        self.k_span = max(ks) - min(ks)
        # the residuals of the closest brackets (within 2x the closest): wide ones, which weigh
        # little in the fit, would otherwise hide how well the tight ones place the grid
        close = 2 * min(h for _, h, _ in pts)
        self.resid = max(abs(phase + period * k - t) for t, h, k in pts if h <= close)
        # The period's error a step (two standard errors), from the brackets' widths (a point
        # lies anywhere in its bracket: a standard deviation of half-width / sqrt 3), or from
        # the residuals where they say more (a clock drifting from the counter's). Residuals
        # alone can be near 0 by chance: three points 1 % off the period fitted to within a
        # millisecond, and the grid drifted 1 ms a step while claiming 0.15.
        self.slope = max(2 / math.sqrt(3 * var), 2 * self.resid / max(self.k_span, 1))
        self.phase, self.period = phase + period * last, period


class Tries:
    """When the reader tries to bracket a step tightly (reading back to back across it)."""

    def __init__(self) -> None:
        self.loose_steps = 0  # steps placed since the last tight bracket
        self.backoff = REBRACKET_STEPS  # loose steps between tries
        self.next_at = REBRACKET_STEPS  # the count of loose steps at which the next is made
        self.trying = False  # whether the reads now are a try
        self.failed = False  # whether the last try gave the grid no point

    def wake(
        self, now: float, s: float, spread: float, grid: StepGrid, period: float, least: float,
        last_b: float | None,
    ) -> float:  # fmt: skip
        """When to begin the next read, the last step placed at ``s`` (give or take
        ``spread``), reads costing ``least`` at least: just after the next step where the grid
        places it; where the grid is not fitted, and when a try is due, early enough to end
        before it, so that the read after brackets it tightly, and back to back until the step
        (or, on a fitted grid, the end of the try's span). Past that span, and past a read
        just after that found no step, once a quarter period until the step comes."""
        lead, slack = 2 * least, TIGHT_SLACK_S  # two reads before it
        if not grid.ready:  # back to back from just before the step, until it comes (a loosely
            # placed last step may have come earlier than placed: so may this one)
            return s + period - lead - min(spread, period / 2)
        k = math.floor((s - grid.phase) / grid.period + 0.5) + 1
        due, err = grid.phase + k * grid.period, grid.error(k)
        if self.due(err, TIGHT_READS * least + slack, period):
            span = min(err, ATTEMPT_SPAN * period)
            if now <= due + span + lead + slack:
                self.trying = True
                return due - span - lead
            if self.trying:  # no step in the try's span: try again later
                self.give_up(failed=True)
        once = due + min(err, period / 2) + slack
        if now <= once or last_b is None:
            return once
        return last_b + ATTEMPT_SPAN * period

    def due(self, err: float, tight: float, period: float) -> bool:
        """Whether to try at the next step, the grid's error there being ``err``. A grid kept
        by tight brackets is trusted to a fraction of one; one kept by close brackets only
        while it tells its indices apart. After a try that gave no point, only on schedule:
        a reader that cannot bracket would otherwise read back to back."""
        trust = GRID_TRUST * tight if self.backoff == REBRACKET_STEPS else period / 8
        return self.loose_steps >= self.next_at or (err > trust and not self.failed)

    def tight(self) -> None:
        self.loose_steps, self.trying, self.failed = 0, False, False
        self.backoff = self.next_at = REBRACKET_STEPS

    def loose(self, close: bool) -> None:
        """A step placed loosely; ``close``: its bracket still gave the grid a point."""
        self.loose_steps += 1
        if self.trying:
            self.give_up(failed=not close)

    def give_up(self, failed: bool) -> None:
        """A try came out loose: the next comes after twice as many steps."""
        self.trying, self.failed = False, failed
        self.backoff = min(2 * self.backoff, MAX_REBRACKET_STEPS)
        self.next_at = self.loose_steps + self.backoff


def break_between(breaks: list[tuple[float, float, str]], a: float, b: float) -> str | None:
    """The label of the latest of ``breaks`` (spans a window cannot be exact over) that meets
    the span from ``a`` to ``b``; None where none does."""
    for t0, t1, how in reversed(breaks):
        if t1 >= a and t0 <= b:
            return how
        if t1 < a:
            return None
    return None


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
