"""Thermally stable energy profiling (Zeus's ``zeus.profile``) over zeus-nb's monitor.

A GPU draws more power for the same work when it is hot (a warm chip leaks more current, and may
lower its clocks), so repeated measurements of one function drift with whatever ran before them.
Every trial here keeps one rhythm: idle for ``cooldown_duration`` seconds, run a few warm-up
iterations, then measure whole iterations of ``target_function`` for about
``measurement_duration`` seconds. The sweeps repeat such trials to find durations short enough to
be cheap yet long enough that trials agree: a setting is valid when the sample standard deviation
of the energy per iteration over its trials is below ``trial_stddev_threshold`` joules.

- :func:`measure`: one trial with durations you chose.
- :func:`profile_measurement_duration`: sweep the measurement window, cooldown fixed.
- :func:`profile_cooldown_duration`: sweep the cooldown, measurement window fixed.
- :func:`profile_parameters`: both sweeps, each with the other duration at its range's maximum.

Where backends differ:

- **Time.** The iteration duration is timed on the monitor's own clock (``system.clock()``),
  the clock its windows use, so the iteration count fits the window it is measured in. On real
  GPUs that is monotonic real time. On the simulated GPU's virtual clock time passes only on
  ``zeus_nb.step()``: a ``target_function`` that calls it once measures exactly the trace's time
  and energy per step at the current power limit, and one that never calls it is refused (it
  would measure 0 s and 0 J). On the simulated wall clock (``ZEUS_NB_SIM_CLOCK=wall``) it is real
  time stretched by the trace's slowdown at the limit, with the trace's power over it.
- **Cooldown** is ``time.sleep`` on every backend, as in Zeus. The simulated GPU has no thermal
  state, so there the sleep only keeps the rhythm; keep durations small in tests.
- **Temperature** comes from each monitored GPU's ``temperature()``. Where a GPU reports none
  (the simulated GPU: Zeus's traces hold no temperatures; a replayed log), the temperatures are
  NaN, never an invented value, and each profiling call says so once in the log (a warning).
- **Several ranks.** Every rank runs ``target_function`` and measures its own monitor's GPUs;
  calibration keeps the slowest rank's iteration time, and each trial sums energy over ranks,
  keeps the longest time and averages the temperatures
  (:func:`~zeus_nb.utils.framework.all_reduce`). Only rank 0 logs.

Bad arguments raise :class:`~zeus_nb.errors.InputError` before anything runs. A
``target_function`` that raises stops the profile with
:class:`~zeus_nb.errors.TargetFunctionError` (its exception chained); an open measurement window
is cancelled first, so the monitor stays usable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from zeus_nb.errors import InputError
from zeus_nb.inputs.validate import DURATION, ENERGY, Quantity, integer, number
from zeus_nb.monitor.energy import ZeusMonitor
from zeus_nb.profile.results import SweepReport, SweepResult, TrialResult
from zeus_nb.profile.trials import Profiler

__all__ = [
    "SweepReport",
    "SweepResult",
    "TrialResult",
    "measure",
    "profile_cooldown_duration",
    "profile_measurement_duration",
    "profile_parameters",
]

# Swept when no search range is given: 1, 2, ..., 10 seconds, as in Zeus.
_DEFAULT_RANGE = tuple(float(s) for s in range(1, 11))
_MEASUREMENT = Quantity("measurement duration", "s", 0.0, DURATION.high, open_low=True)
_COOLDOWN = Quantity("cooldown duration", "s", 0.0, DURATION.high)
_THRESHOLD = Quantity("standard deviation threshold", "J", 0.0, ENERGY.high)


# --- argument checks: all of them before anything runs ----------------------------------------
def _duration(value: object, name: str, quantity: Quantity) -> float:
    return number(value, f"parameter {name}", quantity, "give seconds", text_ok=False)


def _durations(values: object, name: str, quantity: Quantity) -> list[float]:
    if values is None:
        return list(_DEFAULT_RANGE)
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise InputError(
            f"parameter {name}: {values!r} is not a list of durations; pass seconds such as "
            "[1.0, 2.0, 5.0], or None for 1, 2, ..., 10 s"
        )
    out = [_duration(v, f"{name}[{i}]", quantity) for i, v in enumerate(values)]
    if not out:
        raise InputError(
            f"parameter {name} is empty; pass at least one duration in seconds, or None for "
            "1, 2, ..., 10 s"
        )
    return out


def _sweep_settings(trials: object, warmup_trials: object, threshold: object) -> tuple:
    return (
        integer(trials, "parameter num_trials", 1, None, "give a whole number", text_ok=False),
        integer(
            warmup_trials, "parameter num_warmup_trials", 0, None, "give 0 or more", text_ok=False
        ),
        number(threshold, "parameter trial_stddev_threshold", _THRESHOLD, "give J", text_ok=False),
    )


def _start(
    target: Callable[[], Any],
    monitor: ZeusMonitor,
    warmup: object,
    calibration: object,
    iteration_duration: object = None,
) -> Profiler:
    """Check the arguments every function shares, then calibrate (unless the time is given)."""
    if not callable(target):
        raise InputError(
            f"parameter target_function: {target!r} is not callable; pass a function that runs "
            "one iteration of the work when called with no arguments"
        )
    for attribute in ("begin_window", "end_window", "gpu_indices", "gpus"):
        if not hasattr(monitor, attribute):
            raise InputError(
                f"parameter zeus_monitor: {type(monitor).__name__} has no {attribute}; pass a "
                "zeus_nb.monitor.ZeusMonitor"
            )
    w = integer(warmup, "parameter num_warmup_iterations", 0, None, "give 0 or more", False)
    c = integer(
        calibration, "parameter num_calibration_iterations", 1, None, "give 1 or more", False
    )
    profiler = Profiler(target, monitor, w)
    if iteration_duration is None:
        profiler.calibrate(c)
    else:
        profiler.iteration_duration = _duration(iteration_duration, "iteration_duration", DURATION)
    return profiler


# --- Zeus's public functions ------------------------------------------------------------------
def profile_measurement_duration(
    target_function: Callable[[], Any],
    zeus_monitor: ZeusMonitor,
    measurement_duration_search_range: list[float] | None = None,
    cooldown_duration: float = 10.0,
    num_trials: int = 10,
    num_warmup_trials: int = 2,
    trial_stddev_threshold: float = 0.01,
    num_warmup_iterations: int = 10,
    num_calibration_iterations: int = 100,
    iteration_duration: float | None = None,
) -> SweepReport:
    """Sweep the measurement window (s) with the cooldown held at ``cooldown_duration``.

    ``measurement_duration_search_range`` defaults to 1, 2, ..., 10 s (an empty list is an
    error). ``iteration_duration`` (s) skips calibration when given. Other arguments: see
    :func:`profile_parameters`.
    """
    values = _durations(
        measurement_duration_search_range, "measurement_duration_search_range", _MEASUREMENT
    )
    cooldown = _duration(cooldown_duration, "cooldown_duration", _COOLDOWN)
    settings = _sweep_settings(num_trials, num_warmup_trials, trial_stddev_threshold)
    profiler = _start(
        target_function,
        zeus_monitor,
        num_warmup_iterations,
        num_calibration_iterations,
        iteration_duration,
    )
    return profiler.sweep("measurement_duration", values, cooldown, *settings)


def profile_cooldown_duration(
    target_function: Callable[[], Any],
    zeus_monitor: ZeusMonitor,
    cooldown_duration_search_range: list[float] | None = None,
    measurement_duration: float = 10.0,
    num_trials: int = 10,
    num_warmup_trials: int = 2,
    trial_stddev_threshold: float = 0.01,
    num_warmup_iterations: int = 10,
    num_calibration_iterations: int = 100,
    iteration_duration: float | None = None,
) -> SweepReport:
    """Sweep the cooldown (s) with the measurement window held at ``measurement_duration``.

    ``cooldown_duration_search_range`` defaults to 1, 2, ..., 10 s (an empty list is an error;
    0 s means no cooldown). ``iteration_duration`` (s) skips calibration when given. Other
    arguments: see :func:`profile_parameters`.
    """
    values = _durations(cooldown_duration_search_range, "cooldown_duration_search_range", _COOLDOWN)
    window = _duration(measurement_duration, "measurement_duration", _MEASUREMENT)
    settings = _sweep_settings(num_trials, num_warmup_trials, trial_stddev_threshold)
    profiler = _start(
        target_function,
        zeus_monitor,
        num_warmup_iterations,
        num_calibration_iterations,
        iteration_duration,
    )
    return profiler.sweep("cooldown_duration", values, window, *settings)


def profile_parameters(
    target_function: Callable[[], Any],
    zeus_monitor: ZeusMonitor,
    measurement_duration_search_range: list[float] | None = None,
    cooldown_duration_search_range: list[float] | None = None,
    num_trials: int = 10,
    num_warmup_trials: int = 2,
    trial_stddev_threshold: float = 0.01,
    num_warmup_iterations: int = 10,
    num_calibration_iterations: int = 100,
) -> tuple[SweepReport, SweepReport]:
    """Sweep both durations: returns ``(measurement_report, cooldown_report)``.

    Calibrates once, runs the warm-up trials once, then sweeps the measurement window with the
    cooldown at the maximum of its range, then the cooldown with the window at the maximum of
    its range. Both ranges default to 1, 2, ..., 10 s; an empty one is an error.

    Args:
        target_function: runs one iteration of the work; called with no arguments.
        zeus_monitor: the :class:`~zeus_nb.monitor.ZeusMonitor` whose GPUs are measured.
        measurement_duration_search_range: measurement windows to try (s, each > 0).
        cooldown_duration_search_range: cooldowns to try (s, each >= 0).
        num_trials: trials per swept value (one trial has standard deviation 0).
        num_warmup_trials: trials run and discarded before the first sweep, with no cooldown,
            to bring the GPU to its working temperature.
        trial_stddev_threshold: a value is VALID when the sample standard deviation of the
            energy per iteration over its trials is below this many joules.
        num_warmup_iterations: iterations run before calibration and before each window.
        num_calibration_iterations: iterations timed to size the measurement windows.
    """
    windows = _durations(
        measurement_duration_search_range, "measurement_duration_search_range", _MEASUREMENT
    )
    cooldowns = _durations(
        cooldown_duration_search_range, "cooldown_duration_search_range", _COOLDOWN
    )
    trials, warmup_trials, threshold = _sweep_settings(
        num_trials, num_warmup_trials, trial_stddev_threshold
    )
    profiler = _start(
        target_function, zeus_monitor, num_warmup_iterations, num_calibration_iterations
    )
    by_window = profiler.sweep(
        "measurement_duration", windows, max(cooldowns), trials, warmup_trials, threshold
    )
    by_cooldown = profiler.sweep("cooldown_duration", cooldowns, max(windows), trials, 0, threshold)
    return by_window, by_cooldown


def measure(
    target_function: Callable[[], Any],
    zeus_monitor: ZeusMonitor,
    measurement_duration: float,
    cooldown_duration: float,
    num_warmup_iterations: int = 10,
    num_calibration_iterations: int = 100,
) -> TrialResult:
    """One trial with known durations: calibrate, sleep ``cooldown_duration`` s, warm up, and
    measure whole iterations for about ``measurement_duration`` s.

    The window holds ``max(1, int(measurement_duration / iteration_time))`` iterations, the
    iteration time calibrated over ``num_calibration_iterations`` calls after
    ``num_warmup_iterations`` warm-up calls.
    """
    window = _duration(measurement_duration, "measurement_duration", _MEASUREMENT)
    cooldown = _duration(cooldown_duration, "cooldown_duration", _COOLDOWN)
    profiler = _start(
        target_function, zeus_monitor, num_warmup_iterations, num_calibration_iterations
    )
    return profiler.trial(cooldown, window, profiler.warmup)
