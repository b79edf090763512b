"""plot_power_timeline on a real sampled timeline of the simulated GPU."""

from __future__ import annotations

import pandas as pd
import pytest

from zeus_nb import device
from zeus_nb.monitor import ZeusMonitor
from zeus_nb.plots import plot_power_timeline


def test_timeline_plot_lines_spans_and_file(tmp_path):
    system = device.use_simulated(gpu="a40", workload="cifar100", num_gpus=2)
    monitor = ZeusMonitor()
    with monitor.power_timeline(period=0.05) as sampler:
        system.step(4)
    frame = sampler.timeline.to_frame()
    fig = plot_power_timeline(frame, [("epoch 0", 0.0, system.clock())], path=tmp_path / "t.png")
    ax = fig.axes[0]
    assert len(ax.lines) == 2 and ax.get_legend() is not None  # one line per GPU
    assert ax.get_ylim()[1] > frame.power.max()  # headroom above the highest sample
    assert len(ax.patches) == 1  # the shaded window
    assert (tmp_path / "t.png").stat().st_size > 1000


def test_timeline_plot_rejects_other_frames():
    with pytest.raises(ValueError, match="timeline.to_frame"):
        plot_power_timeline(pd.DataFrame({"t": [0.0], "w": [1.0]}))
