"""Figures for notebooks and reports: one module per topic, re-exported here.

Every function returns a matplotlib Figure; pass ``path=`` to also save it (PNG or SVG by suffix).
matplotlib is imported when this package is, never by ``import zeus_nb``.
"""

from __future__ import annotations

from zeus_nb.plots._common import save_figure
from zeus_nb.plots.power_limit import power_limit_profile

__all__ = ["power_limit_profile", "save_figure"]
