"""Power over time, with measurement windows shaded."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt

from zeus_nb.errors import InputError
from zeus_nb.plots._common import save_figure


def plot_power_timeline(
    frame,
    windows: Sequence[tuple[str, float, float]] = (),
    title: str = "GPU power",
    path: str | Path | None = None,
):
    """Power (W) against time (s) per GPU from ``PowerTimeline.to_frame()``.

    ``windows`` are ``(label, start, end)`` spans to shade, e.g. the epochs of a training run.
    """
    missing = {"time", "gpu", "power"} - set(frame.columns)
    if missing:
        raise InputError(
            f"power timeline frame lacks columns {sorted(missing)}; pass timeline.to_frame()"
        )
    fig, ax = plt.subplots(figsize=(8, 3.2))
    if len(frame):
        t0 = float(frame["time"].min())
        for gpu, g in frame.groupby("gpu"):
            ax.plot(g["time"] - t0, g["power"], drawstyle="steps-post", label=f"GPU {gpu}")
    else:
        t0 = 0.0
    for i, (label, start, end) in enumerate(windows):
        ax.axvspan(start - t0, end - t0, color=f"C{i % 2 + 1}", alpha=0.12, lw=0)
        ax.text(
            (start + end) / 2 - t0,
            0.02,
            label,
            transform=ax.get_xaxis_transform(),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax.set(xlabel="time (s)", ylabel="power (W)", title=title)
    top = float(frame["power"].max()) if len(frame) else 0.0
    ax.set_ylim(0, top * 1.15 if top > 0 else 1.0)
    if frame["gpu"].nunique() > 1:
        ax.legend(loc="upper right")
    fig.tight_layout()
    return save_figure(fig, path)
