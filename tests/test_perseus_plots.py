"""Pipeline planning figures render and save."""

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from zeus_nb.optimizer.pipeline_frequency import solve_frontier, synthetic_profile  # noqa: E402
from zeus_nb.plots.pipeline import (  # noqa: E402
    cost_model_fit,
    frequency_fit,
    frontier_plot,
    pipeline_timeline,
    timelines_before_after,
)


@pytest.fixture(scope="module")
def frontier():
    return solve_frontier(synthetic_profile("v100", 2, [1, 1.5]), 2, 3)


def test_timeline_marks_critical_path_and_colours_by_clock(frontier, tmp_path):
    tl = frontier.timeline(frontier.fastest())
    fig = pipeline_timeline(tl, path=tmp_path / "t.png")
    assert (tmp_path / "t.png").stat().st_size > 0
    bars = fig.axes[0].patches
    assert len(bars) == len(tl.spans)
    thick = [b for b in bars if b.get_linewidth() == 2.0]
    assert len(thick) == len(tl.critical_path)
    assert len({b.get_facecolor() for b in bars}) >= 2  # not every bar at one clock


def test_a_timeline_at_one_clock_says_so_instead_of_a_made_up_scale(frontier):
    """All max clocks: one clock everywhere, so no colour bar from that clock to one MHz more."""
    tl = frontier.timeline(frontier.max_clock)
    clocks = {f for _, _, f in tl.spans.values()}
    assert len(clocks) == 1
    fig = pipeline_timeline(tl)
    assert len(fig.axes) == 1  # no colour bar axes
    [text] = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert text == f"every instruction at {clocks.pop():g} MHz"
    profile_clocks = [m.frequency for ms in frontier.profile.measurements.values() for m in ms]
    shared = pipeline_timeline(tl, clock_range=(min(profile_clocks), max(profile_clocks)))
    low, high = shared.axes[1].get_ylim()  # the colour bar spans the profile's real clocks
    assert (low, high) == (min(profile_clocks), max(profile_clocks))


def test_before_after_frontier_and_cost_models(frontier, tmp_path):
    fig = timelines_before_after(frontier, path=tmp_path / "ba.svg")
    assert len([a for a in fig.axes if a.get_xlabel() == "time (s)"]) == 2
    fig = frontier_plot(frontier, chosen=frontier.points[-1], deadline=1.0, path=tmp_path / "f.png")
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "all max clocks" in labels and "chosen" in labels
    # the title gives the fastest plan's time against all max clocks, never "the same time"
    fastest, ref = frontier.fastest(), frontier.max_clock
    slower = 100 * (fastest.iteration_time / ref.iteration_time - 1)
    title = fig.axes[0].get_title()
    assert f"{slower:+.1f} % time" in title and "same time" not in title
    fig = cost_model_fit(frontier)
    assert len(fig.axes) == 4


def test_frequency_fit_plot(tmp_path):
    fig = frequency_fit("v100", curves=[("imagenet", 128)], path=tmp_path / "fit.png")
    assert "median error" in fig._suptitle.get_text()
    with pytest.raises(ValueError, match="no curve"):
        frequency_fit("v100", curves=[("imagenet", 3)])
    frequency_fit("a40")  # the default curves exist
