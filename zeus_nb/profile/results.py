"""What the profiling functions return: one trial, one swept setting, one sweep (Zeus's fields).

The ``__str__`` forms are the log's summary lines, with each setting tagged VALID or INVALID.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

__all__ = ["SweepReport", "SweepResult", "TrialResult", "aggregate", "seconds"]


def seconds(value: float) -> str:
    """A duration as Zeus prints it (one decimal), with more digits where one would hide it."""
    return f"{value:.1f}" if round(value, 1) == value else f"{value:g}"


@dataclass
class TrialResult:
    """One trial: energy (J) and time (s) of the measurement window, whole and per iteration.

    Temperatures (degrees Celsius) are the monitored GPUs' mean just before the warm-up and just
    after the window; NaN where a GPU reports no temperature.
    """

    energy_per_iter: float
    time_per_iter: float
    total_energy: float
    total_time: float
    iterations: int
    temperature_before: float
    temperature_after: float


def _summary(entry: SweepResult) -> str:
    tag = "VALID" if entry.is_valid else "INVALID"
    return (
        f"mean={entry.energy_mean:.4f} J  std={entry.energy_std:.4f} J  "
        f"temp_before={entry.avg_temperature_before:.1f} \u00b0C  "
        f"temp_after={entry.avg_temperature_after:.1f} \u00b0C  [{tag}]"
    )


@dataclass
class SweepResult:
    """The trials of one (measurement, cooldown) setting and how well they agree.

    ``energy_mean`` and ``energy_std`` (sample standard deviation, 0 for a single trial) are
    over the trials' ``energy_per_iter``; the ``avg_*`` fields are means over trials.
    ``is_valid`` is ``energy_std < trial_stddev_threshold``.
    """

    measurement_duration: float
    cooldown_duration: float
    trials: list[TrialResult]
    energy_mean: float
    energy_std: float
    avg_temperature_before: float
    avg_temperature_after: float
    avg_total_time: float
    avg_total_energy: float
    is_valid: bool

    def __str__(self) -> str:
        """The setting and its statistics on one line (trials left out)."""
        return (
            f"measurement={seconds(self.measurement_duration)} s  "
            f"cooldown={seconds(self.cooldown_duration)} s  {_summary(self)}"
        )


@dataclass
class SweepReport:
    """A sweep: ``sweep_param`` is (name, values swept), ``fixed_param`` (name, value held)."""

    sweep_param: tuple[str, list[float]]
    fixed_param: tuple[str, float]
    entries: list[SweepResult]

    def __str__(self) -> str:
        """A title line, then one aligned line per swept value."""
        swept, _ = self.sweep_param
        fixed, value = self.fixed_param
        labels = [f"{swept}={seconds(getattr(e, swept))} s" for e in self.entries]
        width = max((len(label) for label in labels), default=0)
        lines = [f"Sweep {swept} (fixed {fixed}={seconds(value)} s):"]
        for label, entry in zip(labels, self.entries, strict=True):
            lines.append(f"  {label:<{width}}  {_summary(entry)}")
        return "\n".join(lines)


def aggregate(
    measurement_duration: float,
    cooldown_duration: float,
    trials: list[TrialResult],
    threshold: float,
) -> SweepResult:
    """The :class:`SweepResult` of one setting's ``trials`` (VALID when std < ``threshold``)."""

    def mean(field: str) -> float:
        return sum(getattr(t, field) for t in trials) / len(trials)

    energies = [t.energy_per_iter for t in trials]
    std = statistics.stdev(energies) if len(energies) > 1 else 0.0
    return SweepResult(
        measurement_duration=measurement_duration,
        cooldown_duration=cooldown_duration,
        trials=trials,
        energy_mean=statistics.fmean(energies),
        energy_std=std,
        avg_temperature_before=mean("temperature_before"),
        avg_temperature_after=mean("temperature_after"),
        avg_total_time=mean("total_time"),
        avg_total_energy=mean("total_energy"),
        is_valid=std < threshold,
    )
