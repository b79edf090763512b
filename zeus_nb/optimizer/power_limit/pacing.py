"""Where training steps end, told to a clock that paces whole steps (the simulated wall clock).

The simulated wall clock (:mod:`zeus_nb.device.sim_wall`) charges each marked step the same
calibrated time, so a profiling window that opens and closes on marks measures the trace's ratios
between limits on any machine load. Two things would let load back in, and :class:`StepPacer`
closes both: a loop that never calls ``on_step_end`` (Zeus's loops need not) gets each step's end
marked where the next step begins (or the epoch ends), and no window opens while the clock still
calibrates on real time (:meth:`StepPacer.ready`).
"""

from __future__ import annotations


class StepPacer:
    """Marks step ends on ``system`` (``mark_step``; nothing where it has none)."""

    def __init__(self, system) -> None:
        self._mark = getattr(system, "mark_step", None)
        self._ready = getattr(system, "pace_ready", None)
        self.step_ends = False  # whether the loop calls on_step_end
        self._begun = 0
        self._marked = False  # the last step's end is marked already

    def ready(self) -> bool:
        """Whether a window opened now holds paced steps only."""
        return self._ready is None or bool(self._ready())

    def _mark_previous(self) -> None:
        if self.step_ends or self._mark is None or not self._begun or self._marked:
            return
        self._mark()
        self._marked = True

    def begin(self) -> None:
        """A step begins: without on_step_end, the previous one ended here."""
        self._mark_previous()
        self._marked = False
        self._begun += 1

    def epoch_end(self) -> None:
        """An epoch ends: without on_step_end, its last step ended here."""
        self._mark_previous()

    def end(self) -> None:
        """The loop says a step ended."""
        self.step_ends = True
        if self._mark is not None:
            self._mark()
