"""Find the best GPU power limit while training: profile each limit, then keep the optimum.

:class:`GlobalPowerLimitOptimizer` is Zeus's, states (:class:`Ready`, :class:`Warmup`,
:class:`Profiling`, :class:`Done`; limits in mW), transitions and sequence of limit changes
included: driven by ``on_step_begin`` and ``on_epoch_end``, it sets the maximum limit at once,
lets ``wait_steps`` steps pass, then from the maximum limit down in ``pl_step`` W strides runs
``warmup_steps`` steps unmeasured and ``profile_steps`` steps inside a monitor window per limit,
and applies the limit its :class:`OptimumSelector` picks. An epoch that ends during warm-up or
profiling cancels the window, sets the maximum and starts that limit again.

zeus-nb's improvements are off by default and zeus-nb's entry points (CLI, notebooks,
``zeus_nb.train``, widgets) turn them on: ``adaptive=True`` stops a window or the descent early
once a limit cannot win (:class:`~zeus_nb.optimizer.power_limit.policy.AdaptivePolicy`; about
40 % less profiling on the shipped real logs, ``benchmarks/bench_plo.py``);
``resume_across_epochs=True`` pauses an open window over an epoch's end instead of starting over.
Under ``torch.distributed`` windows are reduced across ranks (time max, energy sum), so all ranks
choose alike. Limits are put back to their originals on :meth:`~GlobalPowerLimitOptimizer.close`,
at exit (through this package's ``atexit``, where Zeus registers its hook; Zeus sets the maximum
instead) and on SIGTERM (:mod:`zeus_nb.device.guard`).
"""

from __future__ import annotations

import logging
import warnings
import weakref
from pathlib import Path

import zeus_nb.optimizer.power_limit as package
from zeus_nb.callback import Callback
from zeus_nb.device.gpu import get_gpus
from zeus_nb.device.guard import PowerLimitGuard
from zeus_nb.errors import CallbackOrderError, InputError, PowerLimitPermissionError
from zeus_nb.inputs.validate import Quantity, integer, number
from zeus_nb.optimizer.power_limit.pacing import StepPacer
from zeus_nb.optimizer.power_limit.policy import AdaptivePolicy
from zeus_nb.optimizer.power_limit.profile_file import ProfileKey, load_for, save_profile_or_warn
from zeus_nb.optimizer.power_limit.selectors import OptimumSelector, PowerLimitMeasurement, ZeusCost
from zeus_nb.optimizer.power_limit.states import (
    Done,
    Phase,
    Profiling,
    Ready,
    State,
    Waiting,
    WarmingUp,
    Warmup,
    mw,
)
from zeus_nb.utils.framework import initialized_dist, reduce_time_energy

__all__ = ["Done", "GlobalPowerLimitOptimizer", "Phase", "Profiling", "Ready", "Waiting", "Warmup"]
__all__ += ["WarmingUp"]

PL_STEP = Quantity("power-limit step", "W", 0.0, 2000.0, open_low=True)
NOISE_MARGIN = Quantity("noise margin", "", 0.0, 0.999)

logger = logging.getLogger(__name__)

WINDOW_PREFIX = "__GlobalPowerLimitOptimizer_"


def _atexit():
    """The ``atexit`` module as this package holds it (Zeus's tests replace it there)."""
    return package.atexit


class GlobalPowerLimitOptimizer(Callback):
    """Profile power limits during training and apply the optimum to every monitored GPU.

    A :class:`~zeus_nb.callback.Callback` (``on_train_end`` calls :meth:`close`).

    Args:
        monitor: a :class:`~zeus_nb.monitor.ZeusMonitor` (or a replay monitor); its GPUs all
            get the same limit.
        optimum_selector: how to choose; default ``ZeusCost(eta_knob=0.5)``.
        wait_steps: steps to let pass before profiling (e.g. cudnn autotuning).
        warmup_steps: unmeasured steps after each limit change (0 is fine).
        profile_steps: measured steps per limit.
        pl_step: stride in W from the maximum limit down; never outside the GPU's range.
        profile_path: JSON file; if it exists its optimum is applied without profiling, else the
            profile is saved there.
        adaptive: skip limits (and abandon windows) that cannot win for this selector (off:
            Zeus profiles every limit).
        noise_margin: relative measurement noise adaptive decisions allow for.
        verbose: log one INFO line when profiling starts and when the optimum is applied
            (False logs them at DEBUG).
        resume_across_epochs: an epoch's end pauses the open window (and warm-up) and the next
            epoch resumes it (off: Zeus restarts the limit, after setting the maximum).
    """

    # Adaptive descent stops after this many limits in a row lost by more than the noise margin.
    patience = 3

    def __init__(
        self,
        monitor,
        optimum_selector: OptimumSelector | None = None,
        wait_steps: int = 1,
        warmup_steps: int = 10,
        profile_steps: int = 40,
        pl_step: int = 25,
        profile_path: str | Path | None = None,
        adaptive: bool = False,
        noise_margin: float = 0.05,
        verbose: bool = True,
        resume_across_epochs: bool = False,
    ):
        # every knob checked first (a NaN or a fraction would otherwise reach int() raw)
        wait_steps, warmup_steps, profile_steps = (
            integer(v, f"GlobalPowerLimitOptimizer {n}", least, 10**9, text_ok=False)
            for n, v, least in (
                ("wait_steps", wait_steps, 0),
                ("warmup_steps", warmup_steps, 0),
                ("profile_steps", profile_steps, 1),
            )
        )
        pl_step = number(pl_step, "GlobalPowerLimitOptimizer pl_step", PL_STEP, text_ok=False)
        noise_margin = number(
            noise_margin, "GlobalPowerLimitOptimizer noise_margin", NOISE_MARGIN, text_ok=False
        )
        if optimum_selector is None:
            optimum_selector = ZeusCost(eta_knob=0.5)
        if not isinstance(optimum_selector, OptimumSelector):
            raise TypeError(
                "optimum_selector must be an OptimumSelector (Energy(), Time(), ZeusCost(...), "
                f"MaxSlowdownConstraint(...) or your subclass), got {optimum_selector!r}"
            )
        self.monitor = monitor
        self.optimum_selector = optimum_selector
        self.wait_steps = int(wait_steps)
        self.warmup_steps = int(warmup_steps)
        self.profile_steps = int(profile_steps)
        self.pl_step = pl_step
        self.profile_path = Path(profile_path) if profile_path is not None else None
        self.adaptive = bool(adaptive)
        self.resume_across_epochs = bool(resume_across_epochs)
        self.noise_margin = float(noise_margin)
        self.verbose = verbose

        self.gpus = _monitored_gpus(monitor)
        if not self.gpus:
            raise InputError("the monitor measures no GPU")
        for g in self.gpus:
            ok, why = g.can_set_power_limit()
            if not ok:
                raise PowerLimitPermissionError(
                    f"GPU {g.index}: cannot change its power limit: {why}"
                )
        lows, highs = zip(*(g.power_limit_constraints() for g in self.gpus), strict=True)
        self.min_limit, self.max_limit = float(max(lows)), float(min(highs))
        if self.min_limit > self.max_limit:
            raise InputError("the monitored GPUs share no power-limit range; monitor alike GPUs")
        self.power_limits = self._limits()
        self.gpu_model = self.gpus[0].name

        system = getattr(monitor, "system", None)
        self._clock = system.clock if system is not None else None
        self._pacer = StepPacer(system)  # step ends for the simulated wall clock
        self._guard = PowerLimitGuard(
            self.gpus,
            backend=getattr(system, "backend", None) or self.gpus[0].backend,
            persist=getattr(monitor, "persist_power_limits", None),
        )
        self.policy = AdaptivePolicy(optimum_selector, self.noise_margin, self.patience)
        self._order = self.policy.order(self.power_limits) if adaptive else self.power_limits
        self.state: State = Ready(mw(self._order[0]), self.wait_steps + 1)
        self.current_power_limit = 0  # mW, as Zeus keeps it: the limit this optimizer last set
        self.measurements: list[PowerLimitMeasurement] = []
        self.local_measurements: list[PowerLimitMeasurement] = []
        self.abandoned: dict[float, str] = {}  # limit -> why adaptive profiling skipped it
        self.optimal_power_limit: float | None = None
        self.profiling_time = 0.0  # s from the first profiled step to the optimum (this rank)
        self.profiling_energy = 0.0  # J on this rank's GPUs over the same span
        self._start: tuple[float, float] | None = None
        self._in_step = False  # between on_step_begin and on_step_end

        if self.profile_path is not None and self.profile_path.exists():
            self._load_profile(self.profile_path)
            self._apply()
        else:
            self._set_limit(self.max_limit)  # as Zeus: the maximum until profiling starts
        _atexit().register(_close_at_exit, weakref.ref(self))  # a weak one: no leak per instance

    # --- setup ----------------------------------------------------------------------------------
    def _limits(self) -> list[float]:
        out = []
        w = self.max_limit
        while w >= self.min_limit - 1e-9:
            out.append(float(round(w, 6)))
            w -= self.pl_step
        return out

    # --- profile file ---------------------------------------------------------------------------
    @property
    def _profile_key(self) -> ProfileKey:
        return ProfileKey(self.gpu_model, self.min_limit, self.max_limit, self.pl_step)

    def _load_profile(self, path: Path) -> None:
        self.measurements, self.optimal_power_limit, note = load_for(
            path, self._profile_key, self.optimum_selector
        )
        self.state = Done(mw(self.optimal_power_limit))
        if note:
            self._log(note)

    # --- device ---------------------------------------------------------------------------------
    def _set_limit(self, watts: float) -> None:
        """Every GPU to ``watts`` (nothing when this optimizer set it last, as in Zeus)."""
        if self.current_power_limit == mw(watts):
            return
        self._guard.record()
        for g in self.gpus:
            g.set_power_limit(watts)
        self.current_power_limit = mw(watts)

    def _read(self) -> tuple[float, float]:
        """(clock s, summed energy J) from the GPUs, for partial windows. No CUDA sync: queued
        work only makes them smaller, lower bounds that keep adaptive decisions on the safe side."""
        now = self._clock() if self._clock is not None else 0.0
        return now, sum(g.energy() for g in self.gpus)

    def close(self) -> None:
        """Put every GPU back at the limit it had before this optimizer changed it."""
        self._guard.restore()

    def on_train_end(self) -> None:
        """Training is over: put every GPU back at its original limit."""
        self.close()

    def __enter__(self) -> GlobalPowerLimitOptimizer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def phase(self) -> Phase:
        """The state's name: WAIT, WARMUP, PROFILE or DONE."""
        return self.state.phase

    @property
    def done(self) -> bool:
        """Whether the optimum is known."""
        return isinstance(self.state, Done)

    # --- training-loop hooks: the transitions ----------------------------------------------------
    def _check_order(self, hook: str, begin: bool = False) -> None:
        """Refuse a hook out of order, where the loop calls on_step_end at all (Zeus's need not)."""
        if self._in_step and self._pacer.step_ends:  # Zeus's loops need not call on_step_end
            what = "twice without" if begin else "after on_step_begin() and before"
            raise CallbackOrderError(
                f"{hook}() was called {what} on_step_end(); the power-limit optimizer's hooks go: "
                "on_epoch_begin(), then per training step on_step_begin() ... on_step_end(), then "
                "on_epoch_end(). (If a step raised an error midway, call on_step_end() once.)"
            )

    def on_epoch_begin(self) -> None:
        """Call at the start of each epoch."""
        self._check_order("on_epoch_begin")

    def on_epoch_end(self) -> None:
        """Call at the end of each epoch: an open limit restarts (Zeus) or pauses."""
        self._check_order("on_epoch_end")
        self._pacer.epoch_end()
        s = self.state
        if self.resume_across_epochs:
            if isinstance(s, Profiling) and s.window is not None:
                m = self.monitor.end_window(s.window)
                s.time, s.energy, s.window = s.time + m.time, s.energy + m.total_energy, None
        elif isinstance(s, Warmup | Profiling):
            if isinstance(s, Profiling) and s.window is not None:
                self.monitor.end_window(s.window, cancel=True)
            self.state = Ready(s.current_power_limit, 1, s.index)
            self._set_limit(self.max_limit)

    def on_step_begin(self) -> None:
        """Call before each training step."""
        self._check_order("on_step_begin", begin=True)
        self._pacer.begin()
        self._in_step = True
        s = self.state
        if isinstance(s, Ready):
            # no window before the wall clock calibrates (which the unmeasured warm-up overlaps)
            opens = self.warmup_steps == 0 and s.steps <= 1
            s.steps -= 0 if opens and not self._pacer.ready() else 1
            if s.steps <= 0:
                if self._start is None:
                    self._start = self._read()
                    self._tell_log("_log_run")  # a profiling run starts (a new run in the log)
                    self._log(
                        f"profiling {len(self.power_limits)} power limits "
                        f"({self.power_limits[0]:g} W down to {self.power_limits[-1]:g} W)"
                    )
                self._enter(s.index)
        elif isinstance(s, Warmup):
            s.steps -= 0 if s.steps <= 1 and not self._pacer.ready() else 1
            if s.steps <= 0:
                self._profile(s.index)
        elif isinstance(s, Profiling):
            s.steps -= 1
            if s.steps <= 0:
                if s.window is not None:
                    m = self.monitor.end_window(s.window)
                    s.time, s.energy, s.window = s.time + m.time, s.energy + m.total_energy, None
                self._finish(s, s.time, s.energy)
            elif s.window is None:  # resumed after an epoch's end
                self._begin(s)

    def on_step_end(self) -> None:
        """Call after each training step (Zeus's loops may leave it out)."""
        if not self._in_step:
            raise CallbackOrderError(
                "on_step_end() was called without on_step_begin() before it; call "
                "on_step_begin() before each training step and on_step_end() after it"
            )
        self._in_step = False
        self._pacer.end()
        s = self.state
        if isinstance(s, Profiling) and s.window is not None:
            s.taken += 1
            if self.adaptive and s.steps > 1:
                self._check_partial(s)

    def _enter(self, index: int) -> None:
        """Set ``order[index]`` and warm up there (or profile at once without warm-up)."""
        self._set_limit(self._order[index])
        if self.warmup_steps > 0:
            self.state = Warmup(mw(self._order[index]), self.warmup_steps, index)
        else:
            self._profile(index)

    def _profile(self, index: int) -> None:
        s = self.state = Profiling(mw(self._order[index]), self.profile_steps, index)
        self._begin(s)

    def _begin(self, s: Profiling) -> None:
        s.window = f"{WINDOW_PREFIX}{self._order[s.index]:g}"
        if s.taken == 0:  # its pieces (paused at epoch ends) are logged as one record
            self._tell_log("_log_pieces", s.window)
        self.monitor.begin_window(s.window)
        s.segment_start = self._read() if self.adaptive else (0.0, 0.0)
        if self.adaptive and s.taken == 0:
            self.policy.start_window(self._order[s.index])

    def _check_partial(self, s: Profiling) -> None:
        now, energy = self._read()
        t0, e0 = s.segment_start
        local_time, local_energy = s.time + now - t0, s.energy + energy - e0
        time, energy, n = reduce_time_energy(local_time, local_energy, len(self.gpus))
        verdict = self.policy.observe(self.measurements, time, energy, s.taken, self.profile_steps)
        if verdict is None:
            return
        self.monitor.end_window(s.window)  # logged as what it is: a part of the window
        self._tell_log("_log_whole", s.window, s.taken, self.profile_steps)
        s.window = None
        limit = self._order[s.index]
        if verdict.estimate is None:
            self.abandoned[limit] = verdict.why
        else:  # it won early: its readings, extrapolated to the full window, stand for it
            scale = self.profile_steps / s.taken
            self.local_measurements.append(
                PowerLimitMeasurement(
                    limit, local_energy * scale, local_time * scale, len(self.gpus)
                )
            )
            self.measurements.append(PowerLimitMeasurement(limit, *verdict.estimate, n))
        self._next(s.index, verdict.time, lost=verdict.lost, at_step_begin=False)

    def _finish(self, s: Profiling, time: float, energy: float) -> None:
        """A full window at ``order[s.index]``: record it (reduced across ranks), then move on."""
        limit = self._order[s.index]
        self._tell_log("_log_whole", f"{WINDOW_PREFIX}{limit:g}")  # its pieces as one record
        self.local_measurements.append(PowerLimitMeasurement(limit, energy, time, len(self.gpus)))
        t, e, n = reduce_time_energy(time, energy, len(self.gpus))
        lost = self.adaptive and self.policy.finish(self.measurements, limit, t, e)
        self.measurements.append(PowerLimitMeasurement(limit, e, t, n))
        self._next(s.index, t, lost, at_step_begin=True)

    def _tell_log(self, hook: str, *args) -> None:
        """Tell the monitor's log of a limit's pieces, a run's start or end (monitor.log_file)."""
        (tell := getattr(self.monitor, hook, None)) is not None and tell(*args)

    def _next(self, index: int, time: float, lost: bool, at_step_begin: bool) -> None:
        """After ``order[index]``: the next limit (set now at a step's beginning, as Zeus does,
        else at the next one's), or the optimum."""
        if self.adaptive and index == 0:
            self._order[1:] = self.policy.reorder(self.measurements, self._order[1:])
        remaining = self._order[index + 1 :]
        if self.adaptive:
            why = self.policy.after_limit(
                self.measurements, self._order[index], time, lost, remaining
            )
            if why is not None:
                self.abandoned.update(dict.fromkeys(remaining, why))
                remaining = []
        if not remaining:
            self._conclude()
        elif at_step_begin:
            self._enter(index + 1)
        else:
            self.state = Ready(mw(self._order[index + 1]), 1, index + 1)

    def _conclude(self) -> None:
        self.optimal_power_limit = float(self.optimum_selector.select(self.measurements))
        self.state = Done(mw(self.optimal_power_limit))
        self._tell_log("_log_run", self.optimal_power_limit)  # the run's end, in the log
        if all(m.time == 0 for m in self.measurements):
            warnings.warn(
                "every profiling window measured 0 s: on the simulated GPU, call "
                "zeus_nb.step() once per training step",
                stacklevel=4,
            )
        self._apply()
        if self._start is not None:
            now, energy = self._read()
            self.profiling_time = now - self._start[0]
            self.profiling_energy = energy - self._start[1]
        dist = initialized_dist()
        if self.profile_path is not None and (dist is None or dist.get_rank() == 0):
            self._save_profile()

    def _save_profile(self) -> None:
        """Save the profile for later runs; a failure is a warning, never the end of training."""
        key, selector = self._profile_key, self.optimum_selector
        args = (self.optimal_power_limit, self.measurements, self.abandoned)
        save_profile_or_warn(self.profile_path, key, selector, *args)

    def _apply(self) -> None:
        self._set_limit(self.optimal_power_limit)
        self.state = Done(mw(self.optimal_power_limit), applied=True)
        self._log(f"power limit {self.optimal_power_limit:g} W chosen by {self.optimum_selector!r}")

    def _log(self, message: str) -> None:
        logger.log(logging.INFO if self.verbose else logging.DEBUG, message)


def _close_at_exit(ref: weakref.ref) -> None:
    (plo := ref()) is not None and plo.close()


def _monitored_gpus(monitor) -> list:
    """The monitor's GPUs; a monitor without them (Zeus's replay monitor) names indices of
    ``get_gpus()``, as Zeus's optimizer finds its GPUs."""
    gpus = getattr(monitor, "gpus", None)
    if gpus is not None:
        return list(gpus)
    system = get_gpus(ensure_homogeneous=True)
    return [system.gpu(i) for i in monitor.gpu_indices]
