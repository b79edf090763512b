"""The simulated GPU's wall clock: real time, stretched and paced by the trace.

On the wall clock the simulated GPUs follow real time, so code that never calls
``zeus_nb.step()`` (unmodified Zeus code) measures time and energy. A real GPU at a lower power
limit runs the same work more slowly; a CPU running a notebook does not. So every real second
counts as ``slowdown(L)`` simulated seconds, the trace's time per step at the GPU's limit ``L``
over its time at the maximum limit, and the GPU draws the trace's power at ``L`` over them.

Real time is noisy on a busy machine, and a lower limit's few per cent of slowdown would drown
in that noise: the power-limit optimizer would choose by chance. So when the training loop says
where its steps end (the optimizer's ``on_step_end`` calls :meth:`WallPace.mark` through
``GPUSystem.mark_step``), every step costs the same real time, the median of the first
:data:`CALIBRATION_STEPS` steps, stretched as above: within a step the clock follows real time up
to that budget, and a step that ends early is charged the rest. Windows over whole steps then
measure exactly the trace's ratios between limits, run after run, while the clock stays close to
real time. Time outside steps (evaluation, setup) is real time, stretched.
"""

from __future__ import annotations

import statistics
import time

CALIBRATION_STEPS = 5


class WallPace:
    """Turns real time into chargeable real seconds, with per-step budgets once calibrated."""

    def __init__(self) -> None:
        self._last = time.monotonic()  # real time already accounted for
        self._step_start = self._last
        self._samples: list[float] = []
        self.base: float | None = None  # real seconds one step costs, once calibrated
        self._budget: float | None = None  # real seconds the current step may still charge

    def elapsed(self) -> float:
        """Real seconds to charge since the previous call (within the step's budget)."""
        now = time.monotonic()
        real, self._last = max(0.0, now - self._last), now
        if self._budget is None:
            return real
        real = min(real, self._budget)
        self._budget -= real
        return real

    def mark(self) -> float:
        """A step ended (call after :meth:`elapsed`): real seconds still to charge for it."""
        now = time.monotonic()
        if self.base is None:
            self._samples.append(now - self._step_start)
            self._step_start = now
            if len(self._samples) >= CALIBRATION_STEPS:
                self.base = statistics.median(self._samples)
                self._budget = self.base
            return 0.0
        rest, self._budget = self._budget or 0.0, self.base
        self._step_start = now
        return rest
