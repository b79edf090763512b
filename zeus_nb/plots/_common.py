"""Helpers shared by the plot modules."""

from __future__ import annotations

from pathlib import Path

from zeus_nb.errors import InputError


def save_figure(fig, path: str | Path | None):
    """Save ``fig`` to ``path`` (format from the suffix: .png or .svg) and return it."""
    if path is None:
        return fig
    p = Path(path)
    if p.suffix.lower() not in (".png", ".svg"):
        raise InputError(f"cannot save a figure as {p.suffix!r}; use a .png or .svg path")
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(p, dpi=120, bbox_inches="tight")
    return fig
