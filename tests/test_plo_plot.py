"""The per-limit profile chart."""

from importlib import resources

import matplotlib
import pytest

matplotlib.use("Agg")

from zeus_nb.optimizer import Time, ZeusCost  # noqa: E402
from zeus_nb.optimizer.replay import replay_optimizer  # noqa: E402
from zeus_nb.plots import power_limit_profile  # noqa: E402

LOG = resources.files("zeus_nb") / "resources" / "zeus_profiles" / "A40+resnet50+gpu0.csv"


def bars(ax):
    return {round(p.get_x() + p.get_width() / 2, 6): p.get_height() for p in ax.patches}


def test_profile_chart_shows_each_measured_limit(tmp_path):
    plo = replay_optimizer(LOG, ZeusCost(0.5), adaptive=True)
    fig = power_limit_profile(plo, path=tmp_path / "p.png")
    ax_t, ax_e = fig.axes
    assert bars(ax_t) == pytest.approx({m.power_limit: m.time for m in plo.measurements})
    assert bars(ax_e) == pytest.approx({m.power_limit: m.energy for m in plo.measurements})
    assert plo.abandoned  # skipped limits are drawn as lines and keep their tick
    ticks = {float(t.get_text()) for t in ax_e.get_xticklabels()}
    assert ticks == set(plo.power_limits)
    assert "ZeusCost(eta_knob=0.5)" in fig._suptitle.get_text()
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    power_limit_profile(plo.measurements, chosen=plo.optimal_power_limit, path=tmp_path / "p.svg")
    assert "<svg" in (tmp_path / "p.svg").read_text()[:500]
    matplotlib.pyplot.close("all")


def test_profile_chart_errors(tmp_path):
    plo = replay_optimizer(LOG, Time())
    with pytest.raises(ValueError, match=".png or .svg"):
        power_limit_profile(plo, path=tmp_path / "p.jpg")
    with pytest.raises(ValueError, match="no power limit was measured"):
        power_limit_profile([])
    matplotlib.pyplot.close("all")
