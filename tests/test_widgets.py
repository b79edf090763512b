"""Controls' logic, headless behaviour, and the widgets they build (no frontend needed)."""

from __future__ import annotations

import pytest

from zeus_nb import device, widgets
from zeus_nb.plots import LiveSeries


@pytest.fixture
def gpu():
    return device.use_simulated(gpu="a40", workload="cifar100").gpu(0)


@pytest.fixture
def shown(monkeypatch):
    """Pretend a frontend is attached, so widgets are built."""
    monkeypatch.delenv("ZEUS_NB_HEADLESS", raising=False)
    monkeypatch.setattr(widgets, "_interactive_kernel", lambda: True)


def test_headless_rules(monkeypatch):
    monkeypatch.delenv("ZEUS_NB_HEADLESS", raising=False)
    assert widgets.is_headless() is True  # no kernel in pytest
    monkeypatch.setattr(widgets, "_interactive_kernel", lambda: True)
    assert widgets.is_headless() is False
    assert widgets.is_headless(True) is True  # the notebook parameter
    monkeypatch.setenv("ZEUS_NB_HEADLESS", "1")
    assert widgets.is_headless() is True


def test_interactive_kernel_reads_allow_stdin(monkeypatch):
    class Kernel:
        def __init__(self, allow):
            self.allow = allow

        def get_parent(self):
            return {"content": {"allow_stdin": self.allow}}

    class Shell:
        kernel = None

    shell = Shell()
    import IPython

    monkeypatch.setattr(IPython, "get_ipython", lambda: shell)
    assert widgets._interactive_kernel() is False  # terminal IPython: no kernel
    shell.kernel = Kernel(False)  # papermill / nbclient
    assert widgets._interactive_kernel() is False
    shell.kernel = Kernel(True)  # JupyterLab
    assert widgets._interactive_kernel() is True


def test_power_limit_range_follows_gpu_constraints(gpu):
    rng = widgets.power_limit_range(gpu)
    assert (rng.minimum, rng.maximum) == gpu.power_limit_constraints()
    assert (rng.maximum - rng.minimum) % rng.step == 0
    assert rng.snap(rng.maximum + 50) == rng.maximum
    assert rng.snap(rng.minimum - 50) == rng.minimum
    assert rng.snap(rng.minimum + 0.6 * rng.step) == rng.minimum + rng.step
    with pytest.raises(ValueError, match="step must be > 0"):
        widgets.power_limit_range(gpu, step=0)


def test_power_limit_slider_headless_uses_parameter(gpu):
    c = widgets.power_limit_slider(gpu, value=175, headless=True)
    assert c.widget is None and c.value == 175
    lo, hi = gpu.power_limit_constraints()
    with pytest.raises(ValueError, match="outside"):
        widgets.power_limit_slider(gpu, value=hi + 1, headless=True)


def test_power_limit_slider_widget_bounds(gpu, shown):
    c = widgets.power_limit_slider(gpu)
    lo, hi = gpu.power_limit_constraints()
    assert (c.widget.min, c.widget.max) == (lo, hi)
    assert c.value == gpu.get_power_limit()
    c.widget.value = lo
    assert c.value == lo
    assert gpu.get_power_limit() == hi  # moving the slider changes no GPU setting


def test_selector_kwargs_and_knobs():
    assert widgets.selector_kwargs("Energy") == {}
    assert widgets.selector_kwargs("ZeusCost", 0.3) == {"eta_knob": 0.3}
    assert widgets.selector_kwargs("MaxSlowdownConstraint") == {"factor": 1.1}
    with pytest.raises(ValueError, match=r"eta_knob must be in \[0, 1\]"):
        widgets.selector_kwargs("ZeusCost", 1.5)
    with pytest.raises(ValueError, match="unknown selector"):
        widgets.selector_kwargs("Fastest")


def test_selector_picker_widget(shown):
    c = widgets.selector_picker("ZeusCost", 0.8)
    assert c.value == ("ZeusCost", 0.8)
    dropdown, row, applies = c.widget.children
    slider = row.children[0]
    assert "ZeusCost" in applies.value and "0.8" in applies.value and "next cell" in applies.value
    dropdown.value = "Time"
    assert c.value == ("Time", None) and slider.layout.display == "none"
    assert "Time" in applies.value and "ZeusCost" not in applies.value  # says what changed
    dropdown.value = "MaxSlowdownConstraint"
    assert c.value == ("MaxSlowdownConstraint", 1.1) and slider.max == 3.0  # slider end only
    assert widgets.selector_picker("Energy", headless=True).value == ("Energy", None)


def test_live_output_recomputes_when_the_slider_moves(shown):
    calls = []

    def compute(eta_knob, scale):
        calls.append(eta_knob)
        print(f"knob {eta_knob}")
        return eta_knob * scale

    knob = widgets.float_slider(0.5, 0.0, 1.0, 0.1, "eta_knob")
    view = widgets.live_output(compute, {"eta_knob": knob, "scale": widgets.Control(10.0)})
    slider, _out = view.widget.children
    assert slider is knob.widget and calls == [0.5] and view.value == 5.0
    slider.value = 0.2
    assert calls == [0.5, 0.2] and view.value == pytest.approx(2.0)


def test_live_output_headless_runs_once_with_the_parameters(capsys):
    knob = widgets.float_slider(0.3, 0.0, 1.0, 0.1, "eta_knob", headless=True)
    view = widgets.live_output(lambda eta_knob: print(eta_knob) or -eta_knob, {"eta_knob": knob})
    assert knob.widget is None and view.widget is None and view.value == -0.3
    assert capsys.readouterr().out == "0.3\n"
    with pytest.raises(ValueError, match=r"eta_knob must be in \[0, 1\]"):
        widgets.float_slider(1.5, 0.0, 1.0, 0.1, "eta_knob")


def test_live_series_paces_redraws():
    s = LiveSeries(total_steps=100, frames=10)
    redraws = [s.add(i, 200.0, i * 2.0) for i in range(100)]
    assert sum(redraws) == 10 and redraws[-1]
    assert s.progress == 1.0 and "100/100 steps" in s.summary()
    with pytest.raises(ValueError):
        LiveSeries(total_steps=0)


def test_run_panel_headless_runs_nothing():
    calls = []
    assert widgets.run_panel(lambda v, r: calls.append(v), 5, headless=True) is None
    assert calls == []


def test_run_panel_click_runs_with_control_values(gpu, shown):
    import matplotlib

    matplotlib.use("Agg")
    limit = widgets.power_limit_slider(gpu, value=200)
    seen = {}

    def run(values, report):
        seen.update(values)
        for i in range(4):
            report(float(i), 150.0, 10.0 * i)

    panel = widgets.run_panel(run, 4, {"power_limit": limit})
    slider, row, _out = panel.children
    button, bar, status = row.children
    assert slider is limit.widget
    limit.widget.value = 150
    button.click()
    assert seen == {"power_limit": 150.0}
    assert bar.value == 4 and "4/4 steps" in status.value and not button.disabled


def test_run_panel_shows_errors(shown):
    def run(values, report):
        raise RuntimeError("boom")

    panel = widgets.run_panel(run, 3)
    row, _out = panel.children
    button, _bar, status = row.children
    button.click()
    assert "boom" in status.value and not button.disabled


def test_live_plots_live_in_plots_only():
    """zeus-nb never shipped ``widgets.plot_live``: no alias keeps that path alive."""
    assert not hasattr(widgets, "plot_live") and not hasattr(widgets, "LiveSeries")
    assert not hasattr(widgets, "backend_picker")


def test_power_limit_explorer_trains_an_epoch_at_the_limit_and_restores_it(gpu, shown, capsys):
    import matplotlib

    matplotlib.use("Agg")
    system = device.current()
    gpu.set_power_limit(300.0)
    seen = []

    def train_epoch():
        for _ in range(5):
            system.step(batch_size=64)
            seen.append(gpu.get_power_limit())
            yield

    panel = widgets.power_limit_explorer(system, gpu, train_epoch, 5, value=200)
    slider, row, _out = panel.children
    button, bar, status = row.children
    slider.value = 150
    button.click()
    assert seen == [150.0] * 5  # every step at the chosen limit
    assert bar.value == 5 and "5/5 steps" in status.value
    assert gpu.get_power_limit() == 300.0  # the previous limit is back

    # without permission: the epoch runs at the current limit, and the panel says why
    gpu.can_set_power_limit = lambda: (False, "no permission (needs CAP_SYS_ADMIN)")
    seen.clear()
    button.click()
    assert seen == [300.0] * 5 and gpu.get_power_limit() == 300.0
    assert "keeping 300 W: no permission" in capsys.readouterr().out
    assert widgets.power_limit_explorer(system, gpu, train_epoch, 5, headless=True) is None


def test_explorer_overlays_runs_with_fixed_axes_and_a_legend_of_limits(gpu, shown):
    """Two runs of the power-limit explorer stay comparable: both drawn, labelled, same scale."""
    import matplotlib

    matplotlib.use("Agg")
    from unittest import mock

    from zeus_nb.plots import live

    system = device.current()
    drawn = []
    real = live.plot_runs

    def spy(runs, bounds=None, **kw):
        fig = real(runs, bounds, **kw)
        ax_power, ax_energy = fig.axes
        drawn.append(
            (
                [label for label, _ in runs],
                ax_energy.get_xlim(),
                ax_energy.get_ylim(),
                [t.get_text() for t in ax_energy.get_legend().get_texts()],
            )
        )
        return fig

    def train_epoch():
        for _ in range(6):
            system.step(batch_size=64)
            yield

    with mock.patch.object(live, "plot_runs", spy):
        panel = widgets.power_limit_explorer(system, gpu, train_epoch, 6, value=300)
        slider, row, _out = panel.children
        button, _bar, status = row.children
        button.click()
        assert "300 W" in status.value
        slider.value = 150
        button.click()
    assert "150 W" in status.value
    labels, xlim, ylim, legend = drawn[-1]
    assert labels == legend == ["300 W", "150 W"]  # the earlier run is kept, the limits named
    first_full = next(d for d in drawn if d[0] == ["300 W"] and d is not drawn[0])
    # axes never shrink between frames or runs: the second run is drawn on at least the first's
    assert xlim[1] >= first_full[1][1] and ylim[1] >= first_full[2][1]
    for a, b in zip(drawn, drawn[1:], strict=False):
        assert b[1][1] >= a[1][1] and b[2][1] >= a[2][1]


def test_figures_show_as_images_even_with_a_non_interactive_mplbackend(tmp_path):
    """JupyterLab started with MPLBACKEND=Agg: a figure a widget displays is an image, not the
    text "<Figure size ...>" (notebook_setup switches the kernel to its inline backend)."""
    import nbformat

    from zeus_nb.runner.notebooks import run_notebook
    from zeus_nb.utils.environ import temp_environ

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "from zeus_nb.runner.setup import _inline_figures\n_inline_figures()"
        ),
        nbformat.v4.new_code_cell(
            "import matplotlib.pyplot as plt\nfrom IPython.display import display\n"
            "fig, ax = plt.subplots()\nax.plot([1, 2])\ndisplay(fig)\nplt.close(fig)"
        ),
    ]
    nbformat.write(nb, tmp_path / "plot.ipynb")
    with temp_environ(MPLBACKEND="Agg"):
        res = run_notebook(tmp_path / "plot.ipynb", tmp_path / "out" / "plot.ipynb")
    assert res.ok, res.error
    outputs = nbformat.read(res.output, as_version=4).cells[1].outputs
    assert any("image/png" in o.get("data", {}) for o in outputs), outputs


def test_a_slider_reads_as_many_decimals_as_the_notebook_prints(shown):
    """06's deadline slider and its plot's title show the same number (4 decimals)."""
    slider = widgets.float_slider(1.99512, 1.2, 3.0, 0.036, "deadline_s", digits=4)
    assert slider.widget.readout_format == ".4f"
    assert f"{slider.value:.4f}" == "1.9951"
    assert widgets.float_slider(0.5, 0.0, 1.0, 0.05, "eta_knob").widget.readout_format == ".2f"
    assert widgets.slider_digits(0.0004) == 4 and widgets.slider_digits(0.5) == 2
