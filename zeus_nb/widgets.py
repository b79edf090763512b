"""Notebook controls (ipywidgets 8) that never block a headless run.

Every control starts from a notebook parameter and is a :class:`Control`: ``control.value`` is the
widget's current value when someone is looking, and the parameter value when nobody is. Controls are
not shown, and Run buttons never wait for a click, when the run is *headless*:

* the notebook's ``headless`` parameter is True (``papermill -p headless True``), or
* ``ZEUS_NB_HEADLESS=1`` is set (``zeus-nb sweep`` and ``zeus-nb tour`` set it), or
* the kernel is driven by a non-interactive client: papermill, nbclient and nbconvert send their
  execute requests with ``allow_stdin=False``, which JupyterLab, Notebook and VS Code never do, or
* there is no Jupyter kernel at all (plain Python, IPython in a terminal).

A control a notebook shows changes what the notebook computes: :func:`live_output` re-runs a
computation in place whenever its controls move, a Run button (:func:`run_panel`) trains when
clicked. The decisions behind each control (bounds, snapping, knobs, progress) are plain functions
here, testable without a browser; ipywidgets is imported only to build the visible widgets, and
the live plot lives in :mod:`zeus_nb.plots.live`.
"""

from __future__ import annotations

import html
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from zeus_nb.device.guard import power_limits_restored
from zeus_nb.errors import InputError
from zeus_nb.inputs.env import env
from zeus_nb.optimizer.power_limit.registry import SELECTORS as _REGISTRY
from zeus_nb.optimizer.power_limit.registry import (  # noqa: F401  (re-exported)
    Knob,
    make_selector,
    selector_kwargs,
)

# --- headless detection -------------------------------------------------------------------------


def _interactive_kernel() -> bool:
    """True when a Jupyter frontend that can show widgets drives this kernel."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    kernel = getattr(shell, "kernel", None)
    if kernel is None:
        return False
    try:
        parent = kernel.get_parent()
        allow_stdin = parent.get("content", {}).get("allow_stdin")
    except Exception:
        allow_stdin = None
    if allow_stdin is None:
        allow_stdin = getattr(kernel, "_allow_stdin", True)
    return bool(allow_stdin)


def is_headless(headless: bool | None = None) -> bool:
    """Whether controls should stay hidden and parameter values be used (see the module doc)."""
    if headless:
        return True
    if env("ZEUS_NB_HEADLESS", False):
        return True
    return not _interactive_kernel()


# --- the Control wrapper ------------------------------------------------------------------------


class Control:
    """A parameter value with an optional widget; ``value`` reads the widget when there is one."""

    def __init__(self, default: Any, widget: Any = None, read: Callable[[], Any] | None = None):
        self.default = default
        self.widget = widget
        self._read = read

    @property
    def value(self) -> Any:
        if self.widget is None:
            return self.default
        return self._read() if self._read else self.widget.value

    @property
    def shown(self) -> bool:
        return self.widget is not None

    def _ipython_display_(self) -> None:
        if self.widget is not None:
            from IPython.display import display

            display(self.widget)

    def __repr__(self) -> str:
        state = "widget" if self.widget is not None else "headless"
        return f"Control(value={self.value!r}, {state})"


# --- controls that recompute in place ------------------------------------------------------------


def slider_digits(step: float) -> int:
    """Decimals that show a slider's every step (0.05: 2, 0.0004: 4), at least 2."""
    return max(2, math.ceil(-math.log10(step) - 1e-9)) if step > 0 else 2


def float_slider(
    value: float,
    minimum: float,
    maximum: float,
    step: float,
    description: str,
    headless: bool | None = None,
    digits: int | None = None,
) -> Control:
    """A slider over ``[minimum, maximum]`` starting at the parameter ``value``.

    Its readout shows ``digits`` decimals (default: enough for ``step``), so a notebook that
    prints the chosen value with as many shows the same number the slider does.
    """
    if not minimum <= value <= maximum:
        raise InputError(f"{description} must be in [{minimum:g}, {maximum:g}], got {value:g}")
    if is_headless(headless):
        return Control(value)
    import ipywidgets as w

    slider = w.FloatSlider(
        value=value,
        min=minimum,
        max=maximum,
        step=step,
        description=description,
        readout_format=f".{slider_digits(step) if digits is None else digits}f",
        continuous_update=False,
        style={"description_width": "initial"},
    )
    return Control(value, slider)


def live_output(
    compute: Callable[..., Any], controls: dict[str, Control], headless: bool | None = None
) -> Control:
    """Call ``compute(**values)`` now, and again each time a shown control moves.

    What ``compute`` prints or displays goes to an output area under the controls, replaced on
    every move, so the cell's result follows the controls. The returned control's ``value`` is
    ``compute``'s latest result; later cells read it when they run. Headless (or with no control
    shown) ``compute`` runs once with the parameter values and its output is the cell's.
    """
    state: dict[str, Any] = {}

    def run(**values: Any) -> None:
        state["value"] = compute(**values)

    shown = {k: c.widget for k, c in controls.items() if c.shown}
    if is_headless(headless) or not shown:
        run(**{k: c.value for k, c in controls.items()})
        return Control(state["value"])
    import functools

    import ipywidgets as w

    for name, c in controls.items():
        if c.shown and c._read is not None:
            raise InputError(f"control {name!r} is a composite widget; pass one slider or dropdown")
    fixed = {k: c.value for k, c in controls.items() if not c.shown}
    out = w.interactive_output(functools.partial(run, **fixed), shown)  # runs ``compute`` once
    return Control(state.get("value"), w.VBox([*shown.values(), out]), lambda: state["value"])


# --- power limit --------------------------------------------------------------------------------


@dataclass(frozen=True)
class PowerLimitRange:
    """Slider bounds from the GPU's own constraints, with a step that divides the range."""

    minimum: float
    maximum: float
    step: float

    def snap(self, watts: float) -> float:
        """The nearest allowed slider value to ``watts`` (clamped to the GPU's range)."""
        w = min(max(float(watts), self.minimum), self.maximum)
        n = round((w - self.minimum) / self.step)
        return min(self.minimum + n * self.step, self.maximum)


def power_limit_range(gpu, step: float | None = None) -> PowerLimitRange:
    """Bounds of a power-limit slider for ``gpu``: exactly its (min, max) constraints."""
    lo, hi = gpu.power_limit_constraints()
    span = hi - lo
    if step is None:
        step = next((s for s in (25, 10, 5, 1) if span >= 4 * s and span % s == 0), 1)
    if step <= 0:
        raise InputError(f"slider step must be > 0 W, got {step}")
    return PowerLimitRange(float(lo), float(hi), float(step))


def power_limit_slider(
    gpu, value: float | None = None, step: float | None = None, headless: bool | None = None
) -> Control:
    """Slider over ``gpu``'s allowed power limits, starting at ``value`` (default: current limit).

    Moving it changes nothing by itself; the code reading ``control.value`` applies the limit.
    """
    rng = power_limit_range(gpu, step)
    start = gpu.get_power_limit() if value is None else float(value)
    if not rng.minimum <= start <= rng.maximum:
        raise InputError(
            f"power limit {start:g} W is outside {gpu.name}'s range "
            f"[{rng.minimum:g}, {rng.maximum:g}] W"
        )
    if is_headless(headless):
        return Control(start)
    import ipywidgets as w

    slider = w.FloatSlider(
        value=rng.snap(start),
        min=rng.minimum,
        max=rng.maximum,
        step=rng.step,
        description="Power limit",
        readout_format=".0f",
        continuous_update=False,
        style={"description_width": "initial"},
        layout=w.Layout(width="420px"),
    )
    slider.add_class("zeus-nb-power-limit")
    return Control(start, slider)


# --- optimum selectors ----------------------------------------------------------------------------


# The one selector registry (shared with the CLI), as name -> knob for the picker below.
SELECTORS: dict[str, Knob | None] = {name: spec.knob for name, spec in _REGISTRY.items()}


def selector_picker(
    name: str = "ZeusCost", knob: float | None = None, headless: bool | None = None
) -> Control:
    """Selector dropdown plus a slider for its knob; value is ``(name, knob or None)``."""
    kw = selector_kwargs(name, knob)
    default = (name, next(iter(kw.values()), None))
    if is_headless(headless):
        return Control(default)
    import ipywidgets as w

    dropdown = w.Dropdown(options=list(SELECTORS), value=name, description="Selector")
    slider = w.FloatSlider(description="knob", continuous_update=False)
    note = w.HTML()
    # The choice governs code in a later cell: say so, and show the value that cell will use.
    applies = w.HTML()
    applies.add_class("zeus-nb-selector-choice")

    def show_choice(*_):
        spec = SELECTORS[dropdown.value]
        knob_text = "" if spec is None else f" ({spec.name}={float(slider.value):g})"
        applies.value = (
            f"Picked <b>{html.escape(dropdown.value)}</b>{html.escape(knob_text)}: "
            "run the next cell to train with it."
        )

    def update(*_):
        spec = SELECTORS[dropdown.value]
        slider.layout.display = "none" if spec is None else ""
        if spec is not None:
            slider.min, slider.max, slider.step = spec.minimum, spec.slider_maximum, spec.step
            slider.description = spec.name
            slider.value = default[1] if dropdown.value == name and default[1] else spec.default
            note.value = f"<i>{spec.help}</i>"
        else:
            note.value = ""

    dropdown.observe(update, names="value")
    update()
    dropdown.observe(show_choice, names="value")
    slider.observe(show_choice, names="value")
    show_choice()

    def read():
        spec = SELECTORS[dropdown.value]
        return (dropdown.value, None if spec is None else float(slider.value))

    return Control(default, w.VBox([dropdown, w.HBox([slider, note]), applies]), read)


# --- Run button with live plot ------------------------------------------------------------------


Report = Callable[[float, float, float], None]


def run_panel(
    run: Callable[[dict[str, Any], Report], Any],
    total_steps: int,
    controls: dict[str, Control] | None = None,
    label: str = "Run",
    headless: bool | None = None,
    run_label: Callable[[dict[str, Any]], str] | None = None,
    keep: int = 4,
):
    """A Run button that calls ``run(values, report)`` with the controls' values.

    ``run`` calls ``report(time_s, power_w, energy_j)`` once per step; the panel updates a progress
    bar and a live power/energy plot. With ``run_label`` (the values -> a legend label, such as
    "200 W") the plot keeps the last ``keep`` finished runs under the new one, on axes that only
    grow, and the status line says which values the run used, so runs can be compared. Headless,
    nothing is shown and nothing runs: the notebook's own cells do the work with the parameter
    values. Returns the panel widget or None.
    """
    controls = controls or {}
    if is_headless(headless):
        return None
    import ipywidgets as w
    from IPython.display import clear_output, display

    button = w.Button(description=label, button_style="primary", icon="play")
    bar = w.IntProgress(value=0, min=0, max=total_steps, description="steps")
    status = w.HTML()
    out = w.Output()

    from zeus_nb.plots.live import Bounds, LiveSeries, plot_runs

    history: list[tuple[str, LiveSeries]] = []  # finished runs, oldest first
    bounds = Bounds()

    def on_click(_):
        import matplotlib.pyplot as plt

        button.disabled = True
        values = {k: c.value for k, c in controls.items()}
        name = run_label(values) if run_label else ""
        series = LiveSeries(total_steps)
        bar.value = 0
        last = [0.0]

        def report(t: float, p: float, e: float) -> None:
            redraw = series.add(t, p, e)
            bar.value = series.steps
            status.value = f"{name}: {series.summary()}" if name else series.summary()
            if (redraw and time.monotonic() - last[0] > 0.2) or series.steps >= total_steps:
                last[0] = time.monotonic()
                with out:
                    clear_output(wait=True)
                    runs = [*history[-keep:], (name, series)] if run_label else [(name, series)]
                    fig = plot_runs(runs, bounds.cover(series) if run_label else None)
                    display(fig)
                    plt.close(fig)

        try:
            run(values, report)
        except Exception as e:  # show it in the panel, keep the button usable
            status.value = f"<span style='color:#b00'>{type(e).__name__}: {e}</span>"
        else:
            if run_label and series.steps:
                history.append((name, series))
        finally:
            button.disabled = False

    button.on_click(on_click)
    shown = [c.widget for c in controls.values() if c.widget is not None]
    return w.VBox([*shown, w.HBox([button, bar, status]), out])


def power_limit_explorer(
    system,
    gpu,
    train_epoch: Callable[[], Iterable[Any]],
    steps_per_epoch: int,
    value: float | None = None,
    headless: bool | None = None,
):
    """A power-limit slider and a Run button that trains one epoch at the chosen limit.

    ``train_epoch()`` returns an iterable that trains one step per item (a generator over a
    DataLoader, say). Each step is reported to the live plot. The GPU gets its previous limit
    back afterwards, even if training fails; where this process may not change the limit, the
    epoch runs at the current one and says why. Headless, nothing is shown and nothing runs.
    """

    limit = power_limit_slider(gpu, value=value, headless=headless)

    def explore(values: dict[str, Any], report: Report) -> None:
        allowed, why = gpu.can_set_power_limit()
        if not allowed:
            print(f"keeping {gpu.get_power_limit():g} W: {why}")
        with power_limits_restored([gpu], backend=system.backend):
            if allowed:
                gpu.set_power_limit(values["power_limit"])
            t0, e0 = system.clock(), gpu.energy()
            for _ in train_epoch():
                report(system.clock() - t0, gpu.power(), gpu.energy() - e0)

    return run_panel(
        explore,
        steps_per_epoch,
        {"power_limit": limit},
        headless=headless,
        run_label=lambda values: f"{values['power_limit']:g} W",
    )
