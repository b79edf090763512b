"""Energy-time tradeoff figures: the scatter with its Pareto front, savings bars, per-limit profile.

Every function takes the tables of :mod:`zeus_nb.data.traces` (``tta_eta``), :mod:`zeus_nb.tradeoff`
(``potential_savings``) or :mod:`zeus_nb.runner.sweep` (``load_results``), which share the columns
``batch_size``, ``power_limit`` (W), ``tta`` (s) and ``eta`` (J).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib.pyplot as plt
from matplotlib.lines import Line2D

from zeus_nb.data.traces import default_batch_size, get_workload, load_power_trace, tta_eta
from zeus_nb.errors import InputError
from zeus_nb.plots._common import save_figure
from zeus_nb.runner.sweep import load_results
from zeus_nb.tradeoff import min_cost, pareto_front

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

__all__ = [
    "in_plot_units",
    "energy_time_scatter",
    "tta_eta_by_power_limit",
    "savings_bars",
    "sweep_tradeoff_figure",
    "trace_tradeoff_figure",
]

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p")


def _time_unit(seconds: float) -> tuple[float, str]:
    if seconds >= 3 * 3600:
        return 3600.0, "h"
    if seconds >= 3 * 60:
        return 60.0, "min"
    return 1.0, "s"


def _energy_unit(joules: float) -> tuple[float, str]:
    if joules >= 3e6:
        return 1e6, "MJ"
    if joules >= 3e3:
        return 1e3, "kJ"
    return 1.0, "J"


def in_plot_units(table: pd.DataFrame, like: pd.DataFrame | None = None) -> pd.DataFrame:
    """``table`` with ``tta``/``eta`` in the units the tradeoff figures pick for ``like``.

    The figures choose h or min or s and MJ or kJ or J from the median configuration, so a
    table printed beside a figure speaks its units; the columns are renamed to say which
    (``time_h``, ``energy_MJ``...).
    """
    ok = (table if like is None else like).dropna(subset=["tta", "eta"])
    ts, tu = _time_unit(float(ok["tta"].median()))
    es, eu = _energy_unit(float(ok["eta"].median()))
    out = table.copy()
    out["tta"], out["eta"] = out["tta"] / ts, out["eta"] / es
    return out.rename(columns={"tta": f"time_{tu}", "eta": f"energy_{eu}"})


def _batch_colors(sizes: list[int]) -> dict[int, tuple]:
    """Viridis without its palest yellow, which vanishes on white."""
    cmap = plt.get_cmap("viridis")
    return {b: cmap(0.9 * i / max(len(sizes) - 1, 1)) for i, b in enumerate(sizes)}


def _check(data: pd.DataFrame, cols: tuple[str, ...]) -> None:
    missing = [c for c in cols if c not in data.columns]
    if missing:
        raise InputError(
            f"the table lacks column(s) {', '.join(missing)}; pass traces.tta_eta(...) or "
            "sweep.load_results(...)"
        )


def energy_time_scatter(
    data: pd.DataFrame,
    *,
    default_batch_size: int | None = None,
    eta_knob: float = 1.0,
    front: bool = True,
    log: bool | None = None,
    title: str | None = None,
    path: str | Path | None = None,
) -> Figure:
    """Energy against time to reach the target, one point per (batch size, power limit).

    ``log``: logarithmic axes; by default when time or energy spans more than a factor of 8
    (small batch sizes of some workloads take many times longer than the rest).

    Colour: batch size; marker: power limit. The Pareto front is drawn as a line; the default
    configuration (``default_batch_size`` at the highest power limit) and the optimum (least Zeus
    cost for ``eta_knob``; 1 = least energy) are annotated. Configurations that never reached the
    target (NaN ``eta``) are drawn hollow at the time and energy they spent (sweep results have
    ``time`` and ``energy`` columns for that); where those are unknown (traces) they are left out
    and counted in the title.
    """

    _check(data, ("batch_size", "power_limit", "tta", "eta"))
    ok = data.dropna(subset=["tta", "eta"])
    failed = data[data["tta"].isna() | data["eta"].isna()]
    if {"time", "energy"} <= set(data.columns):
        failed = failed.dropna(subset=["time", "energy"])
    else:
        failed = failed.iloc[0:0]
    if ok.empty and failed.empty:
        raise InputError("no configuration reached the target: nothing to plot")
    all_t = list(ok["tta"]) + (list(failed["time"]) if len(failed) else [])
    all_e = list(ok["eta"]) + (list(failed["energy"]) if len(failed) else [])
    ts, tu = _time_unit(sorted(all_t)[len(all_t) // 2])
    es, eu = _energy_unit(sorted(all_e)[len(all_e) // 2])
    sizes = sorted(int(b) for b in data["batch_size"].unique())
    limits = sorted(float(p) for p in data["power_limit"].unique())
    color = _batch_colors(sizes)
    marker = {p: MARKERS[i % len(MARKERS)] for i, p in enumerate(limits)}

    fig, ax = plt.subplots(figsize=(8.5, 5.2))
    handles = _draw_points(ax, ok, failed, color, marker, (ts, es))
    if front and len(ok):
        pf = pareto_front(ok)
        (line,) = ax.plot(
            pf["tta"] / ts, pf["eta"] / es, color="crimson", lw=1.6, zorder=2, label="Pareto front"
        )
        handles.append(line)
    top = max(limits)
    if default_batch_size is not None:
        _annotate_default(ax, ok, failed, default_batch_size, top, (ts, es), all_e)
    if len(ok):
        _annotate_best(ax, ok, eta_knob, (ts, es))
    if log is None:
        log = bool(max(all_t) > 8 * min(all_t) or max(all_e) > 8 * min(all_e))
    if log:
        _log_axes(ax)
    scale = " (log scale)" if log else ""
    ax.set_xlabel(f"Time to target ({tu}){scale}")
    ax.set_ylabel(f"Energy to target ({eu}){scale}")
    ax.grid(alpha=0.3)

    def count(df):
        return df[["batch_size", "power_limit"]].drop_duplicates().shape[0]

    missing = count(data) - count(ok) - count(failed)
    full_title = title or "Energy-time tradeoff"
    if missing:
        full_title += f"\n({missing} configuration(s) never reached the target: not shown)"
    elif ok.empty:
        full_title += "\n(no configuration reached the target)"
    ax.set_title(full_title)
    # the legends list what is drawn: a batch size or limit with no point has no entry
    drawn = _drawn(ok, failed)
    shown_sizes = {int(b) for b in drawn["batch_size"]}
    shown_limits = {float(p) for p in drawn["power_limit"]}
    _legends(
        fig,
        ax,
        {b: c for b, c in color.items() if b in shown_sizes},
        {p: m for p, m in marker.items() if p in shown_limits},
        handles,
    )
    fig.tight_layout()
    return save_figure(fig, path)


def _drawn(ok, failed):
    """The reached and the failed configurations that are drawn, in one table."""
    import pandas as pd

    return pd.concat([ok[["batch_size", "power_limit"]], failed[["batch_size", "power_limit"]]])


def _draw_points(ax, ok, failed, color: dict, marker: dict, scales) -> list:
    """Reached configurations filled, the others hollow at what they spent; legend handles."""
    ts, es = scales
    for (b, p), g in ok.groupby(["batch_size", "power_limit"]):
        ax.scatter(
            g["tta"] / ts,
            g["eta"] / es,
            color=color[int(b)],
            marker=marker[float(p)],
            s=46,
            edgecolors="black",
            linewidths=0.4,
            zorder=3,
        )
    for (b, p), g in failed.groupby(["batch_size", "power_limit"]):
        ax.scatter(
            g["time"] / ts,
            g["energy"] / es,
            facecolors="none",
            edgecolors=color[int(b)],
            marker=marker[float(p)],
            s=46,
            linewidths=1.2,
            zorder=3,
        )
    handles = []
    if len(failed):
        handles.append(
            Line2D(
                [],
                [],
                ls="",
                marker="o",
                markerfacecolor="none",
                color="0.3",
                label="target not reached\n(time, energy spent)",
            )
        )
    return handles


def _annotate_default(ax, ok, failed, batch_size, top, scales, all_e) -> None:
    """Point at the default configuration (where it never reached the target: what it spent)."""
    ts, es = scales
    base = ok[(ok["batch_size"] == batch_size) & (ok["power_limit"] == top)]
    base_t, base_e = "tta", "eta"
    if base.empty:
        base = failed[(failed["batch_size"] == batch_size) & (failed["power_limit"] == top)]
        base_t, base_e = "time", "energy"
    if base.empty:
        return
    x, y = base[base_t].iloc[0] / ts, base[base_e].iloc[0] / es
    high = y > (max(all_e) / es + min(all_e) / es) / 2  # keep the label inside
    ax.annotate(
        f"default\n(b={batch_size}, {top:g} W)",
        (x, y),
        xytext=(18, -38 if high else 18),
        textcoords="offset points",
        arrowprops={"arrowstyle": "->", "color": "black"},
        fontsize=9,
        bbox={"boxstyle": "round", "fc": "white", "alpha": 0.85},
    )


def _annotate_best(ax, ok, eta_knob, scales) -> None:
    """Point at the least-cost configuration for ``eta_knob``."""

    ts, es = scales
    what = "least energy" if eta_knob == 1.0 else f"least cost (eta={eta_knob:g})"
    best = min_cost(ok, eta_knob)
    ax.annotate(
        f"{what}\n(b={int(best['batch_size'])}, {best['power_limit']:g} W)",
        (best["tta"] / ts, best["eta"] / es),
        xytext=(40, 12),
        textcoords="offset points",
        arrowprops={"arrowstyle": "->", "color": "crimson"},
        fontsize=9,
        color="crimson",
        bbox={"boxstyle": "round", "fc": "white", "alpha": 0.85},
    )


def _log_axes(ax) -> None:
    """Log axes with plain numbers on the ticks (a factor of 8 spans few decades)."""
    from matplotlib.ticker import ScalarFormatter

    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(ScalarFormatter())
        axis.set_minor_formatter(ScalarFormatter())
    ax.tick_params(which="minor", labelsize=7)


def _legends(fig, ax, color: dict, marker: dict, extra: list) -> None:
    """Batch-size and power-limit legends beside the axes."""
    sizes, limits = sorted(color), sorted(marker)
    bs_handles = [
        Line2D([], [], ls="", marker="o", color=color[b], markeredgecolor="black", label=str(b))
        for b in sizes
    ]
    pl_handles = [
        Line2D(
            [], [], ls="", marker=marker[p], color="0.55", markeredgecolor="black", label=f"{p:g}"
        )
        for p in limits
    ]
    # Figure legends: not clipped by the axes, and kept by savefig(bbox_inches="tight").
    fig.legend(
        handles=bs_handles,
        title="batch size",
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        bbox_transform=ax.transAxes,
        fontsize=8,
        ncol=2 if len(sizes) > 7 else 1,
    )
    fig.legend(
        handles=pl_handles + extra,
        title="power limit (W)",
        loc="lower left",
        bbox_to_anchor=(1.01, 0.0),
        bbox_transform=ax.transAxes,
        fontsize=8,
    )


def trace_tradeoff_figure(
    workload: str = "imagenet",
    gpu: str | Path = "v100",
    *,
    eta_knob: float = 1.0,
    path: str | Path | None = None,
) -> Figure:
    """The energy-time scatter of a traced workload on a traced GPU (default ResNet-50, V100)."""

    wl = get_workload(workload)
    power = load_power_trace(gpu)
    table = tta_eta(wl.dataset, power)
    name = Path(str(gpu)).stem if str(gpu).lower().endswith(".csv") else str(gpu).upper()
    return energy_time_scatter(
        table,
        default_batch_size=default_batch_size(wl, power),
        eta_knob=eta_knob,
        title=f"{wl.network} on {wl.dataset} to {wl.target_metric:g}, {name} trace",
        path=path,
    )


def sweep_tradeoff_figure(
    results: str | Path | pd.DataFrame,
    *,
    default_batch_size: int | None = None,
    eta_knob: float = 1.0,
    title: str | None = None,
    path: str | Path | None = None,
) -> Figure:
    """The energy-time scatter of a live sweep (a results file or ``load_results`` table)."""
    import pandas as pd

    table = results if isinstance(results, pd.DataFrame) else load_results(results)
    return energy_time_scatter(
        table,
        default_batch_size=default_batch_size,
        eta_knob=eta_knob,
        title=title or "Energy-time tradeoff of a live sweep",
        path=path,
    )


def savings_bars(
    table: pd.DataFrame, *, title: str | None = None, path: str | Path | None = None
) -> Figure:
    """Bars of the potential-savings table: ETA relative to the default, per workload."""
    import numpy as np

    _check(
        table,
        ("workload", "best_batch_size_ratio", "best_power_limit_ratio", "best_both_ratio"),
    )
    kinds = [
        ("best_batch_size_ratio", "best batch size", "#4c72b0"),
        ("best_power_limit_ratio", "best power limit", "#dd8452"),
        ("best_both_ratio", "best of both", "#55a868"),
    ]
    x = np.arange(len(table))
    width = 0.26
    fig, ax = plt.subplots(figsize=(max(6.0, 1.5 * len(table) + 2), 4.4))
    for i, (col, label, c) in enumerate(kinds):
        bars = ax.bar(x + (i - 1) * width, table[col], width, label=label, color=c)
        ax.bar_label(bars, fmt="%.2f", fontsize=7, padding=1)
    ax.axhline(1.0, color="black", ls="--", lw=1, label="default (b0, max limit)")
    labels = [
        f"{w}\n{n}" if "network" in table.columns else str(w)
        for w, n in zip(table["workload"], table.get("network", table["workload"]), strict=True)
    ]
    ax.set_xticks(x, labels, fontsize=8)
    ax.set_ylabel("Energy to target / default (ratio)")
    ax.set_ylim(0, 1.15)
    ax.set_title(title or "Potential energy savings")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return save_figure(fig, path)


def tta_eta_by_power_limit(
    data: pd.DataFrame,
    *,
    batch_sizes: list[int] | None = None,
    title: str | None = None,
    path: str | Path | None = None,
) -> Figure:
    """Time and energy to target against the power limit, one line per batch size.

    Lower limits usually save energy and cost time; the two panels show how much of each.
    """
    _check(data, ("batch_size", "power_limit", "tta", "eta"))
    ok = data.dropna(subset=["tta", "eta"])
    if batch_sizes is not None:
        ok = ok[ok["batch_size"].isin(batch_sizes)]
    if ok.empty:
        raise InputError("no configuration (of these batch sizes) reached the target")
    ts, tu = _time_unit(float(ok["tta"].median()))
    es, eu = _energy_unit(float(ok["eta"].median()))
    sizes = sorted(int(b) for b in ok["batch_size"].unique())
    colors = _batch_colors(sizes)
    fig, (ax_t, ax_e) = plt.subplots(1, 2, figsize=(10, 4.2), sharex=True)
    for b in sizes:
        g = ok[ok["batch_size"] == b].sort_values("power_limit")
        c = colors[b]
        ax_t.plot(g["power_limit"], g["tta"] / ts, marker="o", ms=4, color=c, label=str(b))
        ax_e.plot(g["power_limit"], g["eta"] / es, marker="o", ms=4, color=c, label=str(b))
    ax_t.set_ylabel(f"Time to target ({tu})")
    ax_e.set_ylabel(f"Energy to target ({eu})")
    for ax in (ax_t, ax_e):
        ax.set_xlabel("GPU power limit (W)")
        ax.grid(alpha=0.3)
    ax_e.legend(title="batch size", fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(title or "Time and energy per power limit")
    fig.tight_layout()
    return save_figure(fig, path)
