"""Find the best GPU power limit while training: profile each limit, then keep the optimum.

:class:`GlobalPowerLimitOptimizer` is driven by four calls in the training loop
(``on_epoch_begin``, ``on_step_begin``, ``on_step_end``, ``on_epoch_end``). It waits
``wait_steps`` steps, then for each power limit from the maximum down in ``pl_step`` W strides it
runs ``warmup_steps`` steps unmeasured and ``profile_steps`` steps inside a monitor window, and
finally applies the limit its :class:`OptimumSelector` picks. Progress carries across epochs: an
epoch boundary pauses the open window (validation is not measured) and the next epoch resumes it.

The optimizer is a state machine whose state is one of four small objects, Zeus's
(:class:`Ready`, :class:`Warmup`, :class:`Profiling`, :class:`Done`, limits in mW;
:attr:`GlobalPowerLimitOptimizer.phase` names it as a :class:`Phase`). With ``adaptive=True``
(the default) an :class:`~zeus_nb.optimizer.power_limit.policy.AdaptivePolicy` decides when a
window or the whole descent may stop early because a limit cannot win.

Under ``torch.distributed`` every window's time is max-reduced and its energy sum-reduced across
ranks, so all ranks choose the same limit, and :class:`ZeusCost` counts every GPU in MaxPower.
GPU limits are restored to their original values when the optimizer is closed, at exit and on
SIGTERM (see :mod:`zeus_nb.device.guard`).
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

from zeus_nb.callback import Callback
from zeus_nb.device.guard import PowerLimitGuard
from zeus_nb.errors import CallbackOrderError, InputError, PowerLimitPermissionError
from zeus_nb.optimizer.power_limit.policy import AdaptivePolicy
from zeus_nb.optimizer.power_limit.profile_file import (
    ProfileKey,
    is_zeus_profile,
    load_profile,
    save_profile_or_warn,
    upgrade_zeus_profile,
)
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
from zeus_nb.utils.validate import Quantity, integer, number

__all__ = ["Done", "GlobalPowerLimitOptimizer", "Phase", "Profiling", "Ready", "Waiting"]
__all__ += ["Warmup", "WarmingUp"]

PL_STEP = Quantity("power-limit step", "W", 0.0, 2000.0, open_low=True)
NOISE_MARGIN = Quantity("noise margin", "", 0.0, 0.999)

logger = logging.getLogger(__name__)

WINDOW_PREFIX = "__GlobalPowerLimitOptimizer_"


class GlobalPowerLimitOptimizer(Callback):
    """Profile power limits during training and apply the optimum to every monitored GPU.

    A :class:`~zeus_nb.callback.Callback`, as in Zeus, so it joins a ``CallbackSet``;
    ``on_train_end`` puts the original limits back (as :meth:`close` does).

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
        adaptive: skip limits (and abandon windows) that cannot win for this selector; on the
            shipped real profiling logs it chose as exhaustive profiling did while spending about
            40% less profiling time (``benchmarks/bench_plo.py``). False profiles every limit.
        noise_margin: relative measurement noise adaptive decisions allow for.
        verbose: log one INFO line when profiling starts and when the optimum is applied
            (False logs them at DEBUG).
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
        adaptive: bool = True,
        noise_margin: float = 0.05,
        verbose: bool = True,
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
        self.noise_margin = float(noise_margin)
        self.verbose = verbose

        self.gpus = list(monitor.gpus)
        if not self.gpus:
            raise InputError("the monitor measures no GPU")
        self._check_permission()
        lows, highs = zip(*(g.power_limit_constraints() for g in self.gpus), strict=True)
        self.min_limit, self.max_limit = float(max(lows)), float(min(highs))
        if self.min_limit > self.max_limit:
            raise InputError("the monitored GPUs share no power-limit range; monitor alike GPUs")
        self.power_limits = self._limits()
        self.gpu_model = self.gpus[0].name

        system = getattr(monitor, "system", None)
        self._clock = system.clock if system is not None else None
        self._mark_step = getattr(system, "mark_step", None)
        self._guard = PowerLimitGuard(
            self.gpus,
            backend=getattr(system, "backend", "auto"),
            persist=getattr(monitor, "persist_power_limits", True),
        )
        self.policy = AdaptivePolicy(optimum_selector, self.noise_margin, self.patience)
        self._order = self.policy.order(self.power_limits) if adaptive else self.power_limits
        self.state: State = Ready(next_power_limit=mw(self._order[0]), steps=self.wait_steps)
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

    # --- setup ----------------------------------------------------------------------------------
    def _check_permission(self) -> None:
        for g in self.gpus:
            ok, why = g.can_set_power_limit()
            if not ok:
                raise PowerLimitPermissionError(
                    f"GPU {g.index}: cannot change its power limit: {why}"
                )
        for g in self.gpus:  # setting the current value changes nothing but proves the right
            lo, hi = g.power_limit_constraints()
            current = g.get_power_limit()
            if lo <= current <= hi:
                g.set_power_limit(current)

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
        measurements, pruned = load_profile(path, self._profile_key)
        if pruned and pruned != repr(self.optimum_selector):
            warnings.warn(
                f"{path} was profiled adaptively for {pruned}; {self.optimum_selector!r} "
                "chooses among the limits it kept only",
                stacklevel=3,
            )
        self.measurements = measurements
        self.optimal_power_limit = float(self.optimum_selector.select(measurements))
        self.state = Done(mw(self.optimal_power_limit))
        if is_zeus_profile(path):  # Zeus's format: write it back in ours (model and limits)
            try:
                kept = upgrade_zeus_profile(
                    path,
                    self._profile_key,
                    self.optimum_selector,
                    self.optimal_power_limit,
                    measurements,
                )
            except OSError as e:
                logger.warning("could not rewrite %s in zeus-nb's format (%s)", path, e)
                return
            self._log(
                f"read Zeus's profile {path}; rewrote it with the GPU model, kept {kept.name}"
            )

    # --- device ---------------------------------------------------------------------------------
    def _set_limit(self, watts: float) -> None:
        self._guard.record()
        for g in self.gpus:
            g.set_power_limit(watts)
        self.current_power_limit = mw(watts)

    def _read(self) -> tuple[float, float]:
        """(clock s, summed energy J) straight from the GPUs, for partial windows.

        No CUDA sync here: work still queued only makes the partial readings smaller, so they
        stay lower bounds of the full window and adaptive decisions stay on the safe side.
        """
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
    def _check_order(self, hook: str, in_step: bool) -> None:
        """Refuse a hook called out of order: it would silently change the measurements."""
        if self._in_step == in_step:
            return
        if in_step:
            problem = f"{hook}() was called without on_step_begin() before it"
        else:
            problem = f"{hook}() was called after on_step_begin() and before on_step_end()"
        raise CallbackOrderError(
            f"{problem}; the power-limit optimizer's hooks go: on_epoch_begin(), then per "
            "training step on_step_begin() ... on_step_end(), then on_epoch_end(). (If a step "
            "raised an error midway, call on_step_end() once before going on.)"
        )

    def on_epoch_begin(self) -> None:
        """Call at the start of each epoch."""
        self._check_order("on_epoch_begin", in_step=False)
        if isinstance(self.state, Done) and not self.state.applied:
            self._apply()

    def on_epoch_end(self) -> None:
        """Call at the end of each epoch: pauses an open profiling window until the next step."""
        self._check_order("on_epoch_end", in_step=False)
        s = self.state
        if isinstance(s, Profiling) and s.window is not None:
            m = self.monitor.end_window(s.window)
            s.time += m.time
            s.energy += m.total_energy
            s.window = None

    def on_step_begin(self) -> None:
        """Call before each training step."""
        self._check_order("on_step_begin", in_step=False)
        self._in_step = True
        s = self.state
        if isinstance(s, Done):
            if not s.applied:
                self._apply()
            return
        if isinstance(s, Ready):
            if s.steps > 0:
                return
            self._start = self._read()
            self._log(
                f"profiling {len(self.power_limits)} power limits "
                f"({self.power_limits[0]:g} W down to {self.power_limits[-1]:g} W)"
            )
            s = self.state = self._enter(0)
        if isinstance(s, Profiling) and s.window is None:
            s.window = f"{WINDOW_PREFIX}{self._order[s.index]:g}"
            if s.taken == 0:  # its pieces (paused at epoch ends) are logged as one record
                getattr(self.monitor, "_log_pieces", lambda name: None)(s.window)
            self.monitor.begin_window(s.window)
            s.segment_start = self._read() if self.adaptive else (0.0, 0.0)
            if self.adaptive and s.taken == 0:
                self.policy.start_window(self._order[s.index])

    def on_step_end(self) -> None:
        """Call after each training step."""
        self._check_order("on_step_end", in_step=True)
        self._in_step = False
        if self._mark_step is not None:
            self._mark_step()
        s = self.state
        if isinstance(s, Ready):
            s.steps = max(0, s.steps - 1)
        elif isinstance(s, Warmup):
            s.steps -= 1
            if s.steps <= 0:
                self.state = self._profiling(s.index)
        elif isinstance(s, Profiling) and s.window is not None:
            s.taken += 1
            s.steps -= 1
            if s.steps <= 0:
                m = self.monitor.end_window(s.window)
                s.window = None
                self._finish(s, s.time + m.time, s.energy + m.total_energy)
            elif self.adaptive:
                self._check_partial(s)

    def _enter(self, index: int) -> Warmup | Profiling:
        limit = self._order[index]
        self._set_limit(limit)
        if self.warmup_steps > 0:
            return Warmup(mw(limit), self.warmup_steps, index)
        return self._profiling(index)

    def _profiling(self, index: int) -> Profiling:
        return Profiling(mw(self._order[index]), self.profile_steps, index)

    def _check_partial(self, s: Profiling) -> None:
        now, energy = self._read()
        t0, e0 = s.segment_start
        local_time, local_energy = s.time + now - t0, s.energy + energy - e0
        time, energy, n = reduce_time_energy(local_time, local_energy, len(self.gpus))
        verdict = self.policy.observe(self.measurements, time, energy, s.taken, self.profile_steps)
        if verdict is None:
            return
        self.monitor.end_window(s.window)  # logged as what it is: a part of the window
        self._log_whole(s, s.taken)
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
        self._next(s.index, verdict.time, lost=verdict.lost)

    def _finish(self, s: Profiling, time: float, energy: float) -> None:
        """A full window at ``order[s.index]``: record it (reduced across ranks), then move on."""
        limit = self._order[s.index]
        self._log_whole(s)
        self.local_measurements.append(PowerLimitMeasurement(limit, energy, time, len(self.gpus)))
        t, e, n = reduce_time_energy(time, energy, len(self.gpus))
        lost = self.adaptive and self.policy.finish(self.measurements, limit, t, e)
        self.measurements.append(PowerLimitMeasurement(limit, e, t, n))
        self._next(s.index, t, lost)

    def _log_whole(self, s: Profiling, taken: int | None = None) -> None:
        """Log a limit's pieces as one record: whole, or a part (zeus_nb.monitor.log_file)."""
        whole = getattr(self.monitor, "_log_whole", None)
        if whole is not None:
            whole(f"{WINDOW_PREFIX}{self._order[s.index]:g}", taken, self.profile_steps)

    def _next(self, index: int, time: float, lost: bool) -> None:
        """After the limit ``order[index]``: the next limit, or the optimum."""
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
        if remaining:
            self.state = self._enter(index + 1)
        else:
            self._conclude()

    def _conclude(self) -> None:
        self.optimal_power_limit = float(self.optimum_selector.select(self.measurements))
        self.state = Done(mw(self.optimal_power_limit))
        if all(m.time == 0 for m in self.measurements):
            warnings.warn(
                "every profiling window measured 0 s: on the simulated GPU, call "
                "zeus_nb.step() once per training step",
                stacklevel=3,
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
        save_profile_or_warn(
            self.profile_path,
            self._profile_key,
            self.optimum_selector,
            self.optimal_power_limit,
            self.measurements,
            self.abandoned,
        )

    def _apply(self) -> None:
        self._set_limit(self.optimal_power_limit)
        self.state = Done(mw(self.optimal_power_limit), applied=True)
        self._log(f"power limit {self.optimal_power_limit:g} W chosen by {self.optimum_selector!r}")

    def _log(self, message: str) -> None:
        logger.log(logging.INFO if self.verbose else logging.DEBUG, message)
