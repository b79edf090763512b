"""The simulated GPU's wall clock: real time, stretched and paced by the trace.

On the wall clock the simulated GPUs follow real time, so code that never calls
``zeus_nb.step()`` (unmodified Zeus code) measures time and energy. A real GPU at a lower power
limit runs the same work more slowly; a CPU running a notebook does not. So every real second
counts as ``slowdown(L)`` simulated seconds, the trace's time per step at the GPU's limit ``L``
over its time at the maximum limit, and the GPU draws the trace's power at ``L`` over them.

Real time is noisy on a busy machine, and a lower limit's few per cent of slowdown would drown
in that noise: the power-limit optimizer would choose by chance. So when the training loop says
where its steps end (the optimizer's ``on_step_end`` calls :meth:`WallPace.mark` through
``GPUSystem.mark_step``), the clock moves in whole steps: each step costs the same real time, the
median of the first :data:`CALIBRATION_STEPS` steps, stretched as above, charged when the step
ends. Between two marks the clock holds still, so a window that opens or closes mid-step (or a
process the machine paused for a moment) measures whole steps only. Windows over steps then
measure exactly the trace's ratios between limits, run after run, while the clock stays close to
real time. Once a step has run :data:`HOLD` times longer than that median, the loop is doing
something else (evaluation, setup, or it stopped marking steps), and real time counts again,
stretched as above.

A busy machine pauses the process at random (at a load of 8 to 12 on two cores the wall clock
once chose 225 W in one run of three where the trace implies 300 W). So a marked step costs the
calibrated length however long it really took: a pause inside a step that ends with a mark
adds nothing. Only a reading of the clock between marks, after the hold (:data:`HOLD` steps and
at least :data:`MIN_HOLD` seconds), counts real time. What this cannot absorb, and is
documented in docs/reliability.md: a machine so busy during the first
:data:`CALIBRATION_STEPS` steps that most of them are paused (the calibrated length is then too
long for every step, which scales times alike and keeps the ratios between limits), and a pause
longer than the hold during which a window is read.

"Real time" here is the monotonic clock less the time the process's main thread waited for a
CPU (Linux's ``/proc/self/schedstat``; plain real time where it is missing): what the process ran
or slept, not how long other processes kept it off a CPU. So unmarked windows (a batch-size
optimizer's epochs) leave out the run-queue waits a busy machine adds. They keep what load does
to the CPU itself: cores shared below a virtual machine, or time its hypervisor stole, ran the
same additions at 1.6x their idle CPU time on a 2-core CI machine beside four busy processes.
Marked steps past calibration (above) cost the same whatever the load does.

Calibration steps cost their real time, so a window over one of them would compare a busy
machine's pauses with the trace: the power-limit optimizer therefore opens no window before
:attr:`WallPace.ready` (``GPUSystem.pace_ready``), and a loop that never calls ``on_step_end``
gets its steps marked where the next one begins. Every window then holds whole paced steps
only, and the limit it chooses is the trace's on any load.
"""

from __future__ import annotations

import os
import statistics
import threading
import time

from zeus_nb.inputs.registry import system_read

try:
    import resource
except ImportError:  # Windows: no schedstat either, so own time is plain real time there
    resource = None  # type: ignore[assignment]

CALIBRATION_STEPS = 5
HOLD = 20  # steps of calibrated length the clock may hold still waiting for the next mark
MIN_HOLD = 1.0  # ... and at least this many seconds: a busy machine's pauses are shorter


SCHEDSTAT = "/proc/self/schedstat"  # the main thread: ns on a CPU, ns waiting for one, runs
#: A wait for a CPU longer than this, on average per run on a CPU, in a stretch of time in which
#: the thread also slept, is taken for that sleep (see :class:`OwnClock`): a thread woken beside
#: four busy processes on two cores waited at most 10.5 ms for a CPU in 400 sleeps measured here.
SLEEP_AS_WAIT_S = 0.05


@system_read("/proc/self/schedstat or /proc/<pid>/schedstat (kernel)")
def _sched_in(path: str) -> tuple[float, int] | None:
    """Seconds of run-queue wait and runs on a CPU a schedstat file gives (its second and
    third fields); None where it cannot be read."""
    try:
        with open(path) as f:
            fields = f.read().split()
        return int(fields[1]) / 1e9, int(fields[2])
    except (OSError, ValueError, IndexError):
        return None


@system_read("/proc/self/status or /proc/<pid>/status (kernel)")
def _slept_in(path: str) -> int | None:
    """How often the thread a status file describes went to sleep (voluntary switches)."""
    try:
        with open(path) as f:
            return int(f.read().split("\nvoluntary_ctxt_switches:")[1].split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _slept_here() -> int | None:
    """The main thread's sleeps: a system call where the main thread asks, its file otherwise."""
    if threading.get_native_id() == os.getpid() and hasattr(resource, "RUSAGE_THREAD"):
        return resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw
    return _slept_in("/proc/self/status")


class OwnClock:
    """Real time less the time one process's main thread waited for a CPU: its own time.

    Linux's schedstat gives the wait. Linux 6.18 has counted a whole sleep as a wait (a
    ``time.sleep(0.2)`` after a little work, beside four busy processes, waited 0.2 s by its
    count in 5 of 100 tries; never when idle), which would drop the sleep from own time. So
    each stretch between two reads is checked: where the thread slept and waited more than
    :data:`SLEEP_AS_WAIT_S` per run on a CPU, its wait counts as own time. What this misses,
    documented in docs/reliability.md: a sleep so counted that is shorter than that, or hidden
    among many real waits in one stretch."""

    def __init__(self, pid: int | None = None) -> None:
        self.pid = pid
        self._sched = SCHEDSTAT if pid is None else f"/proc/{pid}/schedstat"
        self._lock = threading.Lock()
        self._last: tuple[float, int, int | None] | None = None  # wait, runs, sleeps
        self._excused = 0.0  # seconds of counted wait taken for sleeps
        self._waited = 0.0  # waits counted so far (kept where the file cannot be read)

    def _sleeps(self) -> int | None:
        return _slept_here() if self.pid is None else _slept_in(f"/proc/{self.pid}/status")

    def read(self) -> tuple[float, float]:
        """(monotonic seconds, seconds of them the thread waited for a CPU).

        The clock is read between two reads of the wait, and kept only where they agree: a wait
        for a CPU between the clock and the wait's read (the file read is where a busy machine
        often preempts) would count in one and not the other (16 ms seen beside four busy
        processes)."""
        sched = _sched_in(self._sched)
        for _ in range(5):
            now = time.monotonic()
            after = _sched_in(self._sched)
            if after == sched:
                break
            sched = after
        with self._lock:
            if sched is None:
                return now, self._waited
            sleeps = self._sleeps()
            if self._last is not None:
                wait = sched[0] - self._last[0]
                runs, slept = sched[1] - self._last[1], self._last[2]
                if (slept is None or sleeps is None or sleeps > slept) and (
                    wait > SLEEP_AS_WAIT_S * max(runs, 1)
                ):
                    self._excused += wait
            self._last = (sched[0], sched[1], sleeps)
            self._waited = max(self._waited, sched[0] - self._excused)
            return now, self._waited


_CLOCK = OwnClock()
_HAS_SCHEDSTAT = _sched_in(SCHEDSTAT) is not None


def own_time() -> float:
    """Monotonic seconds less those the main thread waited for a CPU: the process's own time
    (plain monotonic time where Linux does not say)."""
    if not _HAS_SCHEDSTAT:
        return time.monotonic()
    now, waited = _CLOCK.read()
    return now - waited


class WallPace:
    """Turns real time into chargeable real seconds: stretched time, or whole paced steps."""

    def __init__(self) -> None:
        self._last = own_time()  # real time already accounted for (uncalibrated)
        self._step_start = self._last  # real time of the last mark
        self._samples: list[float] = []
        self.base: float | None = None  # real seconds one step costs, once calibrated
        self._over = 0.0  # real seconds of this step beyond the hold, already charged

    @property
    def ready(self) -> bool:
        """Whether calibration is over: from now on every marked step costs :attr:`base`."""
        return self.base is not None

    def elapsed(self) -> float:
        """Real seconds to charge since the previous call."""
        now = own_time()
        if self.base is None:
            real, self._last = max(0.0, now - self._last), now
            return real
        over = max(0.0, now - self._step_start - max(HOLD * self.base, MIN_HOLD))
        charge, self._over = over - self._over, over
        return max(0.0, charge)

    def mark(self) -> float:
        """A step ended (call after :meth:`elapsed`): real seconds to charge for it."""
        now = own_time()
        if self.base is None:
            self._samples.append(now - self._step_start)
            self._step_start = self._last = now
            if len(self._samples) >= CALIBRATION_STEPS:
                self.base = statistics.median(self._samples)
            return 0.0  # calibration steps were charged their real time as it passed
        self._step_start, self._over = now, 0.0
        return self.base
