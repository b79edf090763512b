"""When a background counter reader reads (:mod:`zeus_nb.device.counter`).

Once the step grid (:class:`~zeus_nb.device.counter_track.StepGrid`) is fitted, the reader
reads once just after each counter step where the grid places it, and now and then reads back
to back across a step (a try) to bracket it tightly and keep the grid true. Beside a caller
whose thread runs Python each read costs that thread a turn of the GIL, so there it reads after
every other step (:meth:`Tries.read`); a read spanning two steps still places the later one on
the grid, and windows within are shared out by power as within one.
"""

from __future__ import annotations

import math

from zeus_nb.device.counter_track import TIGHT_READS, TIGHT_SLACK_S, StepGrid

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

#: A read is late (its thread waited for the GIL) past LATE_READS least read costs plus
#: TIGHT_SLACK_S: an H100's reads took 2.6-3.0 ms, 7.9-8.5 ms beside a caller running Python.
LATE_READS = 2


class Tries:
    """When the reader tries to bracket a step tightly (reading back to back across it)."""

    def __init__(self) -> None:
        self.loose_steps = 0  # steps placed since the last tight bracket
        self.backoff = REBRACKET_STEPS  # loose steps between tries
        self.next_at = REBRACKET_STEPS  # the count of loose steps at which the next is made
        self.trying = False  # whether the reads now are a try
        self.failed = False  # whether the last try gave the grid no point
        self.skip = False  # whether to read after the step after next (:meth:`read`)
        self.skipped = False  # whether the read now due skipped a step (two steps placed)

    def read(self, cost: float, least: float, dense: bool, waiting: bool) -> None:
        """A read took ``cost`` s (reads take ``least`` at least): whether the next skips a
        step. A late read returned when a caller's thread running Python let go of the GIL,
        and each read costs that thread a turn of it (+0.8 to +1.1 % of a 29 ms step where
        the reader read once a step, docs/performance.md). Skipped only while the caller's
        window edges keep power read (``dense``: a step is shared out over two as well as one)
        and no caller waits for the next step (``waiting``)."""
        self.skip = dense and not waiting and cost > LATE_READS * least + TIGHT_SLACK_S

    def wake(
        self, now: float, s: float, spread: float, grid: StepGrid, period: float, least: float,
        last_b: float | None,
    ) -> float:  # fmt: skip
        """When to begin the next read, the last step placed at ``s`` (give or take
        ``spread``), reads costing ``least`` at least: just after the next step where the grid
        places it; where the grid is not fitted, and when a try is due, early enough to end
        before it, so that the read after brackets it tightly, and back to back until the step
        (or, on a fitted grid, the end of the try's span). Past that span, and past a read
        just after that found no step, once a quarter period until the step comes. Where
        :meth:`read` said to skip, just after the step after the next."""
        lead, slack = 2 * least, TIGHT_SLACK_S  # two reads before it
        self.skipped = False
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
        if self.skip:  # the step after: each read costs a busy caller a turn of the GIL
            k, self.skipped = k + 1, True
            due, err = due + grid.period, grid.error(k)
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
        self.loose_steps += 1 + self.skipped  # counter steps, not reads: tries keep their pace
        if self.trying:
            self.give_up(failed=not close)

    def give_up(self, failed: bool) -> None:
        """A try came out loose: the next comes after twice as many steps."""
        self.trying, self.failed = False, failed
        self.backoff = min(2 * self.backoff, MAX_REBRACKET_STEPS)
        self.next_at = self.loose_steps + self.backoff
