"""Figures for notebooks and reports: one module per topic, re-exported here.

Every function returns a matplotlib Figure; pass ``path=`` to also save it (PNG or SVG by suffix).
matplotlib is imported when this package is, never by ``import zeus_nb``.
"""

from __future__ import annotations

from zeus_nb.plots._common import save_figure
from zeus_nb.plots.batch_size import bso_costs, bso_posterior
from zeus_nb.plots.live import LiveSeries, plot_live
from zeus_nb.plots.pipeline import (
    cost_model_fit,
    frequency_fit,
    frontier_plot,
    pipeline_timeline,
    timelines_before_after,
)
from zeus_nb.plots.power_limit import power_limit_profile
from zeus_nb.plots.timeline import plot_power_timeline
from zeus_nb.plots.tradeoff import (
    energy_time_scatter,
    savings_bars,
    sweep_tradeoff_figure,
    trace_tradeoff_figure,
    tta_eta_by_power_limit,
)

__all__ = [
    "LiveSeries",
    "bso_costs",
    "bso_posterior",
    "cost_model_fit",
    "frequency_fit",
    "frontier_plot",
    "pipeline_timeline",
    "timelines_before_after",
    "energy_time_scatter",
    "plot_live",
    "plot_power_timeline",
    "power_limit_profile",
    "save_figure",
    "savings_bars",
    "sweep_tradeoff_figure",
    "trace_tradeoff_figure",
    "tta_eta_by_power_limit",
]
