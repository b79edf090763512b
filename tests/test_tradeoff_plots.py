"""Tradeoff figures: what is drawn matches the tables, and files are written."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import zeus_nb  # noqa: E402
from zeus_nb import plots  # noqa: E402
from zeus_nb.data.traces import tta_eta  # noqa: E402
from zeus_nb.runner.sweep import run_sweep, trace_train_fn  # noqa: E402
from zeus_nb.tradeoff import pareto_front, potential_savings  # noqa: E402


def _texts(ax) -> str:
    return " | ".join(t.get_text() for t in ax.texts)


def test_resnet50_v100_scatter(tmp_path):
    fig = plots.trace_tradeoff_figure("imagenet", "v100", path=tmp_path / "f.png")
    ax = fig.axes[0]
    table = tta_eta("imagenet", "v100")
    reached = table.dropna(subset=["eta"])
    drawn = sum(len(c.get_offsets()) for c in ax.collections)
    assert drawn == len(reached)
    assert "(h)" in ax.get_xlabel() and "(MJ)" in ax.get_ylabel()
    front = pareto_front(reached)
    (line,) = [ln for ln in ax.lines if ln.get_label() == "Pareto front"]
    assert np.allclose(line.get_xdata(), front["tta"] / 3600)
    text = _texts(ax)
    assert "b=256, 250 W" in text and "b=360, 150 W" in text
    assert "never reached" in ax.get_title()
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG"
    matplotlib.pyplot.close(fig)


def test_legends_list_only_what_is_drawn():
    """A batch size whose configurations never reached the target has no point: no legend."""
    table = tta_eta("imagenet", "v100")
    fig = plots.energy_time_scatter(table)
    reached = table.dropna(subset=["tta", "eta"])
    sizes = sorted(int(b) for b in reached.batch_size.unique())
    assert len(sizes) < table.batch_size.nunique()  # some batch size has no point here
    legends = {lg.get_title().get_text(): lg for lg in fig.legends}
    shown = [t.get_text() for t in legends["batch size"].get_texts()]
    assert shown == [str(b) for b in sizes]
    matplotlib.pyplot.close(fig)


def test_eta_knob_moves_the_optimum_and_svg_is_written(tmp_path):
    fig = plots.energy_time_scatter(
        tta_eta("imagenet", "v100"), eta_knob=0.0, path=tmp_path / "f.svg"
    )
    fastest = tta_eta("imagenet", "v100").sort_values("tta").iloc[0]
    assert f"b={int(fastest['batch_size'])}, {fastest['power_limit']:g} W" in _texts(fig.axes[0])
    assert "<svg" in (tmp_path / "f.svg").read_text()
    with pytest.raises(ValueError, match=".png or .svg"):
        plots.energy_time_scatter(tta_eta("imagenet", "v100"), path=tmp_path / "f.jpg")
    matplotlib.pyplot.close("all")


def test_savings_bars_heights():
    table = potential_savings("v100")
    fig = plots.savings_bars(table)
    heights = [p.get_height() for p in fig.axes[0].patches]
    assert np.allclose(heights[: len(table)], table["best_batch_size_ratio"])
    assert np.allclose(heights[-len(table) :], table["best_both_ratio"])
    matplotlib.pyplot.close(fig)


def test_tta_eta_by_power_limit_lines():
    table = tta_eta("librispeech", "v100")
    fig = plots.tta_eta_by_power_limit(table, batch_sizes=[32, 48])
    ax_t, ax_e = fig.axes[:2]
    assert len(ax_t.lines) == len(ax_e.lines) == 2
    assert "power limit (W)" in ax_t.get_xlabel()
    with pytest.raises(ValueError, match="reached"):
        plots.tta_eta_by_power_limit(table, batch_sizes=[3])
    matplotlib.pyplot.close(fig)


def test_sweep_figure_from_results_file(tmp_path):
    zeus_nb.use_simulated("v100", workload="cifar100")
    path = tmp_path / "r.jsonl"
    # Batch size 2048 reaches 0.6 only after the 100-epoch cap: drawn hollow where it stopped.
    run_sweep(
        trace_train_fn("cifar100"),
        [128, 1024, 2048],
        [100, 250],
        workload="cifar100",
        results_path=path,
        progress=False,
    )
    fig = plots.sweep_tradeoff_figure(path, default_batch_size=1024)
    ax = fig.axes[0]
    assert "b=1024, 250 W" in _texts(ax)
    assert sum(len(c.get_offsets()) for c in ax.collections) == 6
    hollow = [c for c in ax.collections if len(c.get_facecolors()) == 0]
    assert len(hollow) == 2
    assert "never reached" not in ax.get_title()
    matplotlib.pyplot.close(fig)
