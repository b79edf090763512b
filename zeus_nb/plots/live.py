"""The live power and energy plot of a running job (the Run button of :mod:`zeus_nb.widgets`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field


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
            raise ValueError(f"total_steps must be >= 1, got {self.total_steps}")

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
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3))
    times = [0.0, *series.times]  # each step's power holds from the previous sample to its own
    ax1.plot(times, series.powers[:1] + series.powers, drawstyle="steps-pre")
    ax1.set(xlabel="time (s)", ylabel="power (W)", title="power")
    ax1.set_ylim(bottom=0)
    ax2.plot(times, [0.0, *series.energies], marker=".")
    ax2.set(xlabel="time (s)", ylabel="energy (J)", title="cumulative energy")
    ax2.set_ylim(bottom=0)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
