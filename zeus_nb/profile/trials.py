"""The trial machinery behind :mod:`zeus_nb.profile`: calibration, one trial, one sweep.

A :class:`Profiler` lives for one public call, so the calibrated iteration time is shared by
all trials of that call and the note about missing temperatures is logged once per call.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import Any, Literal

from zeus_nb.errors import TargetFunctionError, UnsupportedError
from zeus_nb.monitor.energy import ZeusMonitor
from zeus_nb.profile.results import SweepReport, TrialResult, aggregate, seconds
from zeus_nb.utils.framework import all_reduce, get_rank, get_world_size, sync_execution

__all__ = ["WINDOW", "Profiler", "SweepParam"]

logger = logging.getLogger(__name__)

#: The monitor window of a trial; Zeus's name, so a monitor's log file reads the same.
WINDOW = "__zeus_profile_run_trial"

SweepParam = Literal["measurement_duration", "cooldown_duration"]


class Profiler:
    """One profiling call: its target, monitor, calibrated iteration time and log state."""

    def __init__(self, target: Callable[[], Any], monitor: ZeusMonitor, warmup: int):
        self.target = target
        self.monitor = monitor
        self.warmup = warmup
        self.iteration_duration = math.nan
        self.rank0 = get_rank() == 0
        system = getattr(monitor, "system", None)
        self._clock: Callable[[], float] = system.clock if system is not None else time.monotonic
        self._virtual = bool(getattr(system, "virtual_clock", False))
        self._said_nan = False

    def run(self, n: int, stage: str) -> None:
        """Call the target ``n`` times; its exceptions become one-line TargetFunctionErrors."""
        try:
            for _ in range(n):
                self.target()
        except Exception as e:
            said = " ".join(str(e).split()) or "no message"
            raise TargetFunctionError(
                f"target_function raised {type(e).__name__} ({said}) during the {stage}; the "
                "profile stopped. Fix the function (it is called with no arguments, once per "
                "iteration) and run the profile again"
            ) from e

    def calibrate(self, iterations: int) -> None:
        """Warm up, then time ``iterations`` calls on the monitor's clock (slowest rank wins)."""
        gpus, sync_with = self.monitor.gpu_indices, self.monitor.sync_with
        self.run(self.warmup, "warm-up before calibration")
        sync_execution(gpus, sync_with=sync_with)
        start = self._clock()
        self.run(iterations, "calibration")
        sync_execution(gpus, sync_with=sync_with)
        [slowest] = all_reduce([(self._clock() - start) / iterations], "max")
        if not slowest > 0:
            hint = (
                "the simulated GPU's virtual clock moves only on zeus_nb.step(): call it once "
                "inside target_function, or use the wall clock (ZEUS_NB_SIM_CLOCK=wall)"
                if self._virtual
                else "give it measurable work, or pass iteration_duration"
            )
            raise TargetFunctionError(
                f"{iterations} calls of target_function took no time on the monitor's clock, so "
                f"no iteration count fits a measurement window; {hint}"
            )
        self.iteration_duration = float(slowest)
        if self.rank0:
            logger.info("Calibrated iteration duration: %.3f ms", self.iteration_duration * 1e3)

    def temperature(self) -> float:
        """Mean temperature of the monitored GPUs; NaN if any of them reports none."""
        temps = []
        for gpu in self.monitor.gpus:
            try:
                temps.append(float(gpu.temperature()))
            except UnsupportedError:
                return math.nan
        return sum(temps) / len(temps)

    def trial(self, cooldown: float, measurement: float, warmup: int) -> TrialResult:
        """Sleep ``cooldown`` s, warm up, measure whole iterations for about ``measurement`` s."""
        iterations = max(1, int(measurement / self.iteration_duration))
        if cooldown > 0:
            time.sleep(cooldown)
        before = self.temperature()
        self.run(warmup, "warm-up")
        self.monitor.begin_window(WINDOW)
        try:
            self.run(iterations, "measurement")
        except BaseException:
            self.monitor.end_window(WINDOW, cancel=True)
            raise
        window = self.monitor.end_window(WINDOW)
        after = self.temperature()
        energy, before_sum, after_sum = all_reduce(
            [float(window.total_energy), before, after], "sum"
        )
        [elapsed] = all_reduce([float(window.time)], "max")
        ranks = get_world_size()
        result = TrialResult(
            energy_per_iter=energy / iterations,
            time_per_iter=elapsed / iterations,
            total_energy=energy,
            total_time=elapsed,
            iterations=iterations,
            temperature_before=before_sum / ranks,
            temperature_after=after_sum / ranks,
        )
        if math.isnan(before_sum + after_sum) and self.rank0 and not self._said_nan:
            self._said_nan = True
            logger.warning(
                "GPU temperatures are NaN: a monitored GPU reports no temperature (the simulated "
                "GPU does not: Zeus's traces hold none); energy and time are measured as usual"
            )
        return result

    def sweep(
        self,
        swept: SweepParam,
        values: list[float],
        fixed: float,
        trials: int,
        warmup_trials: int,
        threshold: float,
    ) -> SweepReport:
        """Warm-up trials (no cooldown, no warm-up iterations), then ``trials`` per value."""
        by_cooldown = swept == "cooldown_duration"
        held: SweepParam = "measurement_duration" if by_cooldown else "cooldown_duration"
        self._log("Sweeping %s (%s fixed at %s s)", swept, held, seconds(fixed))
        if warmup_trials:
            self._log("Running %d warmup trial(s)", warmup_trials)
        for i in range(warmup_trials):
            self.trial(0.0, fixed if by_cooldown else max(values), 0)
            self._log("Warmup trial %d/%d done", i + 1, warmup_trials)
        entries = []
        for value in values:
            cooldown, measurement = (value, fixed) if by_cooldown else (fixed, value)
            self._log("Starting %s=%s s  [%d trials]", swept, seconds(value), trials)
            results = []
            for i in range(trials):
                results.append(self.trial(cooldown, measurement, self.warmup))
                self._log("Trial %d/%d done", i + 1, trials)
            entries.append(aggregate(measurement, cooldown, results, threshold))
        report = SweepReport((swept, list(values)), (held, fixed), entries)
        self._log("%s", report)
        return report

    def _log(self, message: str, *args: object) -> None:
        if self.rank0:
            logger.info(message, *args)
