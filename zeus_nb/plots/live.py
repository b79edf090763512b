"""The live power and energy plot of a running job (the Run button of :mod:`zeus_nb.widgets`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from zeus_nb.errors import InputError


@dataclass
class LiveSeries:
    """Samples of a running job and when to redraw: at most ``frames`` redraws, plus the last."""

    total_steps: int
    frames: int = 20
    times: list[float] = field(default_factory=list)
    powers: list[float] = field(default_factory=list)
    energies: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.total_steps < 1:
            raise InputError(f"total_steps must be >= 1, got {self.total_steps}")

    @property
    def steps(self) -> int:
        return len(self.times)

    def add(self, time_s: float, power_w: float, energy_j: float) -> bool:
        """Add one step's sample; returns whether the plot should be redrawn now."""
        self.times.append(float(time_s))
        self.powers.append(float(power_w))
        self.energies.append(float(energy_j))
        every = max(1, math.ceil(self.total_steps / self.frames))
        return self.steps % every == 0 or self.steps >= self.total_steps

    @property
    def progress(self) -> float:
        return min(1.0, self.steps / self.total_steps)

    def summary(self) -> str:
        if not self.times:
            return "no steps yet"
        e = self.energies[-1]
        return f"{self.steps}/{self.total_steps} steps, {self.times[-1]:.2f} s, {e:.1f} J"


def plot_live(series: LiveSeries, title: str = ""):
    """Power and cumulative energy over time (a matplotlib Figure)."""
    return plot_runs([("", series)], title=title)


@dataclass
class Bounds:
    """Axis limits that only grow, so runs drawn one after another share their scale."""

    time_s: float = 0.0
    power_w: float = 0.0
    energy_j: float = 0.0

    def cover(self, series: LiveSeries) -> Bounds:
        """Grow to hold ``series`` (with 5 % headroom); returns self."""
        if series.times:
            self.time_s = max(self.time_s, 1.05 * max(series.times))
            self.power_w = max(self.power_w, 1.05 * max(series.powers))
            self.energy_j = max(self.energy_j, 1.05 * max(series.energies))
        return self


def plot_runs(
    runs: list[tuple[str, LiveSeries]],
    bounds: Bounds | None = None,
    title: str = "",
    legend_title: str = "",
):
    """Power and cumulative energy of several runs, overlaid; the last one drawn boldest.

    Each run is ``(label, series)``; labels (a power limit, say) go into the legend. ``bounds``
    fixes the axes so that two runs can be compared by eye; by default they fit the runs.
    """
    import matplotlib.pyplot as plt

    if bounds is None:
        bounds = Bounds()
        for _, series in runs:
            bounds.cover(series)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3))
    for i, (label, series) in enumerate(runs):
        last = i == len(runs) - 1
        style = {"linewidth": 2.0 if last else 1.0, "alpha": 1.0 if last else 0.55}
        times = [0.0, *series.times]  # each step's power holds from the previous sample to its own
        ax1.plot(
            times, series.powers[:1] + series.powers, drawstyle="steps-pre", label=label, **style
        )
        ax2.plot(times, [0.0, *series.energies], marker="." if last else None, label=label, **style)
    ax1.set(xlabel="time (s)", ylabel="power (W)", title="power")
    ax2.set(xlabel="time (s)", ylabel="energy (J)", title="cumulative energy")
    for ax, top in ((ax1, bounds.power_w), (ax2, bounds.energy_j)):
        ax.set_ylim(0, top or None)
        ax.set_xlim(0, bounds.time_s or None)
    if any(label for label, _ in runs):
        ax2.legend(title=legend_title or None, fontsize="small", loc="upper left")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
