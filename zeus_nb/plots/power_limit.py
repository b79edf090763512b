"""What the power-limit optimizer measured: time and energy at each profiled limit."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt

from zeus_nb.errors import InputError
from zeus_nb.plots._common import save_figure


def power_limit_profile(
    source,
    chosen: float | None = None,
    skipped: Sequence[float] = (),
    title: str | None = None,
    path: str | Path | None = None,
):
    """Two panels over the power limit: window time (s) and energy (J), the choice marked.

    Args:
        source: a finished ``GlobalPowerLimitOptimizer`` (its measurements, choice and the limits
            adaptive profiling skipped are used), or a list of ``PowerLimitMeasurement``.
        chosen: the chosen limit in W (taken from the optimizer if not given).
        skipped: limits that were not measured in full (taken from the optimizer if not given).
        title: figure title (default: the selector, when known).
        path: also save the figure there (.png or .svg).
    """
    measurements = getattr(source, "measurements", source)
    measurements = sorted(measurements, key=lambda m: m.power_limit)
    if not measurements:
        raise InputError("nothing to plot: no power limit was measured yet")
    if chosen is None:
        chosen = getattr(source, "optimal_power_limit", None)
    if not skipped:
        skipped = sorted(getattr(source, "abandoned", {}) or ())
    if title is None and hasattr(source, "optimum_selector"):
        title = f"Power-limit profile, chosen by {source.optimum_selector!r}"

    limits = [m.power_limit for m in measurements]
    width = 0.6 * (
        min(b - a for a, b in zip(limits, limits[1:], strict=False)) if len(limits) > 1 else 10
    )
    fig, (ax_t, ax_e) = plt.subplots(2, 1, figsize=(7, 5.5), sharex=True)
    for ax, values, label, color in (
        (ax_t, [m.time for m in measurements], "time per window (s)", "tab:blue"),
        (ax_e, [m.energy for m in measurements], "energy per window (J)", "tab:orange"),
    ):
        colors = [("tab:green" if w == chosen else color) for w in limits]
        ax.bar(limits, values, width=width, color=colors, edgecolor="black", linewidth=0.5)
        ax.set_ylabel(label)
        ax.grid(axis="y", alpha=0.3)
        top = max(values) if max(values) > 0 else 1.0
        ax.set_ylim(0, top * 1.15)
        for w in skipped:
            ax.axvline(w, color="grey", linestyle=":", linewidth=1)
        if chosen is not None:
            i = limits.index(chosen) if chosen in limits else None
            if i is not None:
                ax.annotate(
                    "chosen",
                    (chosen, values[i]),
                    xytext=(0, 4),
                    textcoords="offset points",
                    ha="center",
                    fontsize=8,
                    color="tab:green",
                )
    ax_e.set_xlabel("power limit (W)")
    ticks = sorted(set(limits) | set(skipped))
    ax_e.set_xticks(ticks)
    ax_e.set_xticklabels([f"{w:g}" for w in ticks])
    if skipped:
        ax_t.plot([], [], color="grey", linestyle=":", label="skipped (could not win)")
        ax_t.legend(loc="upper right", fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return save_figure(fig, path)
