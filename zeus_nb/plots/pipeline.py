"""Pipeline frequency planning figures: timelines, the frontier, cost models, the clock model."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from zeus_nb.data.traces import default_batch_size, load_power_trace
from zeus_nb.device.frequency import fit_table
from zeus_nb.errors import InputError
from zeus_nb.plots._common import save_figure


def pipeline_timeline(
    timeline,
    title: str | None = None,
    clock_range: tuple[float, float] | None = None,
    ax=None,
    path: str | Path | None = None,
):
    """Gantt chart of one iteration: a row per stage, a bar per forward (F) / backward (B).

    Bars are coloured by SM clock; the critical path has a thick black outline.

    Args:
        timeline: a :class:`~zeus_nb.optimizer.pipeline_frequency.Timeline` (``evaluate(...)``).
        clock_range: (low, high) MHz of the colour scale, to compare two timelines alike.
        ax: draw into these axes instead of a new figure.
    """
    df = timeline.to_frame()
    if ax is None:
        fig, ax = plt.subplots(figsize=(10, 0.6 * df["stage"].nunique() + 1.4))
    else:
        fig = ax.figure
    lo, hi = clock_range or (float(df["frequency"].min()), float(df["frequency"].max()))
    one_clock = hi <= lo  # a scale from lo to lo + 1 would invent clocks nobody ran
    norm = plt.Normalize(lo - 1 if one_clock else lo, hi if hi > lo else lo)
    cmap = plt.get_cmap("viridis")
    for row in df.itertuples():
        crit = bool(row.critical)
        ax.barh(
            row.stage,
            row.end - row.start,
            left=row.start,
            height=0.8,
            color=cmap(norm(row.frequency)),
            edgecolor="black" if crit else "white",
            linewidth=2.0 if crit else 0.5,
            hatch="//" if row.instruction == "backward" else None,
        )
        if row.end - row.start > 0.03 * timeline.iteration_time:
            ax.text(
                (row.start + row.end) / 2,
                row.stage,
                f"{row.instruction[0].upper()}{row.microbatch}",
                ha="center",
                va="center",
                fontsize=7,
                color="white" if norm(row.frequency) < 0.6 else "black",
            )
    ax.set_yticks(sorted(df["stage"].unique()))
    ax.set_yticklabels([f"stage {s}" for s in sorted(df["stage"].unique())])
    ax.invert_yaxis()
    ax.set_xlabel("time (s)")
    ax.set_title(
        title
        or f"iteration {timeline.iteration_time:.4g} s, {timeline.energy:.4g} J "
        "(hatched: backward; outlined: critical path)"
    )
    if one_clock:
        swatch = plt.Rectangle((0, 0), 1, 1, color=cmap(norm(lo)))
        ax.legend(
            [swatch],
            [f"every instruction at {lo:g} MHz"],
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            fontsize=8,
            title="SM clock",
        )
    else:
        fig.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax, label="SM clock (MHz)")
    return save_figure(fig, path)


def timelines_before_after(frontier, point=None, path: str | Path | None = None):
    """All-max-clock timeline above the timeline of ``point`` (default: the fastest point)."""
    point = point or frontier.fastest()
    before, after = frontier.timeline(frontier.max_clock), frontier.timeline(point)
    freqs = [f for _, _, f in before.spans.values()] + [f for _, _, f in after.spans.values()]
    rng = (min(freqs), max(freqs))
    stages = frontier.profile.num_stages
    fig, axes = plt.subplots(2, 1, figsize=(10, 1.2 * stages + 2.5), sharex=True)
    pipeline_timeline(before, f"all max clocks: {before.iteration_time:.4g} s, "
                      f"{before.energy:.4g} J", rng, axes[0])  # fmt: skip
    pipeline_timeline(after, f"planned: {after.iteration_time:.4g} s, {after.energy:.4g} J",
                      rng, axes[1])  # fmt: skip
    fig.tight_layout()
    return save_figure(fig, path)


def frontier_plot(
    frontier,
    chosen=None,
    deadline: float | None = None,
    path: str | Path | None = None,
):
    """Iteration time vs energy of every frontier point, the all-max-clock point starred."""
    fig, ax = plt.subplots(figsize=(6.5, 4))
    t = [p.iteration_time for p in frontier.points]
    e = [p.energy for p in frontier.points]
    ax.plot(t, e, "o-", ms=3, label="frontier (planned)")
    ref = frontier.max_clock
    ax.plot([ref.iteration_time], [ref.energy], "*", ms=14, color="C3", label="all max clocks")
    if chosen is not None:
        ax.plot([chosen.iteration_time], [chosen.energy], "s", ms=9, mfc="none", mec="k",
                label="chosen")  # fmt: skip
    if deadline is not None:
        ax.axvline(deadline, color="gray", ls="--", lw=1, label=f"deadline {deadline:.4g} s")
    ax.set_xlabel("iteration time (s)")
    ax.set_ylabel("energy per iteration (J)")
    fastest = frontier.fastest()
    saved = 100 * (1 - fastest.energy / ref.energy)
    slower = 100 * (fastest.iteration_time / ref.iteration_time - 1)
    ax.set_title(
        f"time–energy frontier: the fastest plan takes {slower:+.1f} % time, "
        f"{saved:.1f} % less energy"
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path)


def cost_model_fit(frontier, stages: Sequence[int] | None = None, path: str | Path | None = None):
    """Per stage and instruction: the solver's options (time, energy minus blocking energy) and
    the fitted cost model through them."""
    stages = list(range(frontier.profile.num_stages)) if stages is None else list(stages)
    fig, axes = plt.subplots(len(stages), 2, figsize=(8, 2.4 * len(stages)), squeeze=False)
    unit = frontier.unit_time
    for r, s in enumerate(stages):
        for c, inst in enumerate(("forward", "backward")):
            ax = axes[r][c]
            cands, model = frontier.cost_models[(s, inst)]
            q = np.array([o.quant_time for o in cands.options])
            scale = getattr(frontier, "cost_scale", 1.0)
            ax.plot(q * unit, [o.cost / scale for o in cands.options], "o", ms=4, label="profiled")
            xs = np.linspace(q.min(), q.max(), 100) if q.max() > q.min() else q
            ax.plot(xs * unit, [model(x) / scale for x in xs], "-", label=type(model).__name__)
            ax.set_title(f"stage {s} {inst}", fontsize=9)
            ax.set_xlabel("time (s)", fontsize=8)
            ax.set_ylabel("cost (J)", fontsize=8)
            ax.legend(fontsize=7)
    fig.tight_layout()
    return save_figure(fig, path)


def frequency_fit(
    gpu: str = "a40",
    curves: Sequence[tuple[str, int]] | None = None,
    path: str | Path | None = None,
):
    """The calibrated frequency model against the power-limit trace it was fitted to.

    Time per epoch and average power over the power limit, measured (dots) and modelled (lines),
    for ``curves`` given as (dataset, batch size) (default: each dataset's default batch size).
    """

    df = fit_table(gpu)
    if curves is None:
        curves = []
        for ds in sorted(df["dataset"].unique()):
            sizes = sorted(df.loc[df["dataset"] == ds, "batch_size"].unique())
            b0 = default_batch_size(ds, load_power_trace(gpu))
            curves.append((ds, b0 if b0 in sizes else sizes[0]))
    fig, (ax_t, ax_p) = plt.subplots(1, 2, figsize=(11, 4))
    for k, (ds, bs) in enumerate(curves):
        g = df[(df["dataset"] == ds) & (df["batch_size"] == bs)].sort_values("power_limit")
        if g.empty:
            raise InputError(f"the {gpu} trace has no curve ({ds!r}, {bs})")
        t0 = g["time_measured"].min()
        color = f"C{k % 10}"
        ax_t.plot(g["power_limit"], g["time_measured"] / t0, "o", color=color, ms=4)
        ax_t.plot(g["power_limit"], g["time_model"] / t0, "-", color=color, label=f"{ds} b{bs}")
        ax_p.plot(g["power_limit"], g["power_measured"], "o", color=color, ms=4)
        ax_p.plot(g["power_limit"], g["power_model"], "-", color=color)
    ax_t.set_ylabel("time per epoch / fastest measured")
    ax_p.set_ylabel("average power (W)")
    for ax in (ax_t, ax_p):
        ax.set_xlabel("power limit (W)")
    ax_t.legend(fontsize=7)
    med_t, med_p = df["time_error"].median(), df["power_error"].median()
    fig.suptitle(
        f"{gpu.upper()} frequency model (lines) vs Zeus trace (dots): median error "
        f"{100 * med_t:.1f} % time, {100 * med_p:.1f} % power over all {len(df)} rows"
    )
    fig.tight_layout()
    return save_figure(fig, path)
