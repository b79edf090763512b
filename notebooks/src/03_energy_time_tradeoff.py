# %% [markdown]
# # 03 · The energy-time tradeoff of batch size and power limit
#
# **What you will learn**
#
# - how batch size and GPU power limit together decide the time (TTA) and energy (ETA) to reach
#   a target accuracy, from the real ResNet-50/ImageNet measurements of the Zeus paper;
# - what the Pareto front is, and how to compute it (exercise), and how the Zeus cost picks one
#   configuration on it (exercise);
# - how to run a live sweep over batch size x power limit on the current backend;
# - how much energy the right choices could save on six workloads.
#
# **Prerequisites**: notebooks 01 and 02. No GPU needed: the figures come from shipped traces,
# and the live sweep runs on the simulated GPU when there is no real one.
#
# **Expected run time**: 13 s on the simulated GPU, 14 s with `smoke = True` (measured on 2 CPU
# cores that other jobs were using, load average 2.8 before and 1.7 after; beside 4 busy processes
# (load average 1.7 to 5.8) the smoke run took 12 s; Run All in JupyterLab adds the kernel's
# start; see the README's run-time table).
#
# **On a GPU** the live sweep trains every configuration for real (not yet timed on a GPU).

# %% tags=["parameters"]
backend: str = "auto"  # "auto" (real GPU if found, else simulated), "sim" or "nvml"
smoke: bool = False  # True: a smaller live sweep, for CI and quick checks
seed: int = 0  # seeds the synthetic data and the model weights
workload: str = "imagenet"  # traced workload of the figure (imagenet: ResNet-50)
trace_gpu: str = "v100"  # GPU of the traces: "v100" or "a40"
eta_knob: float = 1.0  # Zeus cost weight of energy, from 0 (only time) to 1 (only energy)
live_batch_sizes: str = "32,128,512"  # live sweep batch sizes (comma-separated)
live_power_limits: str = "auto"  # live sweep limits in W, comma-separated; auto: the GPU's own
target_accuracy: float = 0.8  # live sweep: validation accuracy that counts as trained
max_epochs: int = 8  # live sweep: give up on a configuration after this many epochs
out_dir: str = ""  # where the live results file goes (empty: a temporary directory)
headless: bool = False  # True: show no interactive controls (automatic under papermill)

# %%
import tempfile
from pathlib import Path

import pandas as pd
from IPython.display import display

import zeus_nb
from zeus_nb import widgets
from zeus_nb.course import check
from zeus_nb.data.traces import tta_eta
from zeus_nb.errors import InputError
from zeus_nb.inputs import validate
from zeus_nb.plots import energy_time_scatter, savings_bars, trace_tradeoff_figure
from zeus_nb.plots.tradeoff import in_plot_units
from zeus_nb.runner.changes import settings_system
from zeus_nb.runner.setup import counter_period, sizing_clock
from zeus_nb.runner.sweep import run_sweep
from zeus_nb.tradeoff import min_cost, pareto_front, potential_savings
from zeus_nb.train.demos import small_classifier
from zeus_nb.train.sweep_fn import repeated_to_span, synthetic_images, torch_train_fn

batch_sizes = validate.number_list(live_batch_sizes, "live_batch_sizes", integers=True)
(max_epochs,) = validate.notebook_counts(max_epochs=max_epochs)
out = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="zeus-nb-03-"))
out.mkdir(parents=True, exist_ok=True)
system = zeus_nb.notebook_setup(backend, seed, sim_workload="imagenet")
# the sweep changes power limits: on a GPU this process may not change, through zeusd when one
# is configured, else on a simulated GPU of the nearest measured model (one line says so)
system, live_source = settings_system(system, "The live sweep", seed=seed)
live_gpu = system.gpus[0]
low_w, high_w = live_gpu.power_limit_constraints()
if str(live_power_limits).strip().lower() == "auto":  # the GPU's maximum, middle and minimum
    middle_w = low_w + 25 * round((high_w - low_w) / 2 / 25)  # on the optimizer's 25 W grid
    power_limits = sorted({high_w, middle_w, low_w}, reverse=True)
else:
    power_limits = validate.number_list(
        live_power_limits, "live_power_limits", validate.POWER_LIMIT
    )
    outside = [w for w in power_limits if not low_w <= w <= high_w]
    if outside:
        raise InputError(
            f"live_power_limits: {', '.join(f'{w:g}' for w in outside)} W lie outside "
            f"{live_gpu.name}'s range {low_w:g}-{high_w:g} W; give limits in it, or auto"
        )
if smoke:
    batch_sizes, power_limits, max_epochs = batch_sizes[:2], power_limits[:2], 4
period = counter_period(system)  # s between energy-counter updates; 0: exact (simulated)
print(
    f"traces: {workload} on {trace_gpu}; live sweep on {live_gpu.name} ({system.backend}) at "
    f"{', '.join(f'{w:g}' for w in power_limits)} W"
)

# %% [markdown]
# ## The measured tradeoff
#
# Each point is one (batch size, power limit): the mean time and energy to reach the target
# accuracy over the recorded training runs. Configurations that did not always reach it are left
# out.

# %%
trace = tta_eta(workload, trace_gpu)
print(f"{len(trace)} configurations, {int(trace.reached.sum())} always reached the target")
fig = trace_tradeoff_figure(workload, trace_gpu, eta_knob=eta_knob)

# %% [markdown]
# ## Exercise: the Pareto front
#
# A configuration is worth considering only if no other one is at least as fast *and* uses less
# energy. Write `pareto_front_of(points)` for a list of `(time, energy)`: the non-dominated
# points, sorted by time. (The name keeps `pareto_front`, the library's version, free for the
# comparison after the check.)


# %%
def pareto_front_of(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    # BEGIN SOLUTION
    front: list[tuple[float, float]] = []
    for t, e in sorted(points):
        if not front or e < front[-1][1]:
            front.append((t, e))
    return front
    # END SOLUTION


pareto_front_of = check.pareto_front(pareto_front_of)
reached = trace.dropna(subset=["tta", "eta"])
mine = pareto_front_of(list(zip(reached.tta, reached.eta, strict=True)))
front = pareto_front(trace)
print(
    f"{check.whose(pareto_front_of, 'pareto_front_of')} finds {len(mine)} points on the front; "
    f"zeus_nb.tradeoff.pareto_front finds {len(front)}:"
)
shown = in_plot_units(front[["batch_size", "power_limit", "tta", "eta"]], like=trace)
print(shown.round(2).to_string(index=False))

# %% [markdown]
# The least-cost configuration depends on `eta_knob`: 1 picks the least energy, 0 the least
# time, and values between walk along the front. Move the slider: the choice below follows it
# (the results at the end record the latest one).


# %%
def least_cost(eta_knob: float) -> pd.Series:
    best = min_cost(trace, eta_knob)
    print(f"eta_knob={eta_knob:.2f}: batch size {best.batch_size}, {best.power_limit:g} W")
    return best


knob = widgets.float_slider(eta_knob, 0.0, 1.0, 0.05, "eta_knob", headless)
optimum = widgets.live_output(least_cost, {"eta_knob": knob}, headless)
display(optimum)

# %% [markdown]
# ## Exercise: the least-cost configuration
#
# The slider above calls `min_cost`. Write it yourself: `least_cost_config(configs, eta_knob)`
# gets the measured table as a list of `(batch_size, power_limit, time, energy)` (W, s, J) and
# returns `(batch_size, power_limit)` of the configuration with the least Zeus cost
# `eta_knob * energy + (1 - eta_knob) * MaxPower * time`. MaxPower is the highest power limit in
# the table, the same for every configuration: it turns time into joules, so a low limit does not
# make time cheaper.


# %%
def least_cost_config(
    configs: list[tuple[int, float, float, float]], eta_knob: float
) -> tuple[int, float]:
    # BEGIN SOLUTION
    max_power = max(limit for _, limit, _, _ in configs)
    costs = [eta_knob * e + (1 - eta_knob) * max_power * t for _, _, t, e in configs]
    bs, limit, _, _ = configs[costs.index(min(costs))]
    return bs, limit
    # END SOLUTION


least_cost_config = check.least_cost_config(least_cost_config)

# %% [markdown]
# The exercise's function (yours once it passes, the reference until then) walks along the front:
# the least-cost configuration for three values of `eta_knob`, from the measured table.

# %%
configs = list(zip(reached.batch_size, reached.power_limit, reached.tta, reached.eta, strict=True))
along = {
    f"{eta:.1f}": [int(bs), float(limit)]
    for eta in (0.0, 0.5, 1.0)
    for bs, limit in [least_cost_config(configs, eta)]
}
print(f"{check.whose(least_cost_config, 'least_cost_config')} for each eta_knob:")
print(pd.DataFrame(along, index=["batch_size", "power_limit"]))

# %% [markdown]
# ## Live: sweep batch size x power limit here
#
# `run_sweep` trains every configuration until the target accuracy (or `max_epochs`), measuring
# time and energy with a `ZeusMonitor`, and appends each finished one to a results file, so an
# interrupted sweep resumes. The model is small and the images synthetic; on the simulated A40
# each step costs what the traced ResNet-50/ImageNet steps cost at that batch size and limit,
# so a lower limit slows every step down, and larger batches need more epochs to reach the
# target. The lines under the table compare the limits at each batch size.
#
# On a real GPU an epoch of this small model takes milliseconds, shorter than one update of the
# GPU's energy counter (every 100 ms on an H100), and would read 0 J. There the cell first times
# an epoch and repeats the training set until an epoch spans several counter updates.

# %%
train_data, val_data = synthetic_images(512, num_classes=10, image_size=8, noise=0.6, seed=seed)
if period:
    updates = 3 if smoke else 10  # counter updates an epoch at the largest batch size spans
    train_data, copies = repeated_to_span(
        lambda data: torch_train_fn(small_classifier, data, val_data, seed=seed),
        train_data,
        max(batch_sizes),
        2 * updates * period,  # twice: epochs may run up to 2x faster than when timed
        sizing_clock,  # real time less waits for a CPU: the same under load
    )
    print(
        f"{live_gpu.name}'s counter moves every {period * 1000:g} ms: the training set is "
        f"repeated {copies} times, so that an epoch spans {updates} counter updates or more"
    )


results_file = out / "live_sweep.jsonl"
results_file.unlink(missing_ok=True)
live = run_sweep(
    torch_train_fn(small_classifier, train_data, val_data, seed=seed),
    batch_sizes,
    power_limits,
    results_path=results_file,
    target_metric=target_accuracy,
    max_epochs=max_epochs,
    progress=False,
)
print(live[["batch_size", "power_limit", "epochs", "reached", "time", "energy"]].round(2))
top_w = max(power_limits)


def counter_steps_j(row) -> float:
    """About one counter update's energy at the row's power: how exact its energy is."""
    return period * row.energy / row.time if row.time else 0.0


for bs, rows in live[live.reached].groupby("batch_size"):
    at_top = rows[rows.power_limit == top_w]
    for _, row in rows[rows.power_limit < top_w].iterrows():
        if len(at_top):
            top = at_top.iloc[0]
            dt = row.time / top.time - 1
            de = row.energy / top.energy - 1 if top.energy else float("nan")
            unsure = counter_steps_j(row) + counter_steps_j(top)
            note = (
                f" (within the counter's resolution: +-{unsure:.0f} J)"
                if period and abs(row.energy - top.energy) <= unsure
                else ""
            )
            print(
                f"batch size {bs}, {row.power_limit:g} W vs {top_w:g} W: "
                f"{dt:+.0%} time, {de:+.0%} energy{note}"
            )

# %%
live_front = pareto_front(live)
fig = energy_time_scatter(live, title=f"Live sweep on {live_gpu.name}")
print(f"the live sweep's Pareto front has {len(live_front)} point(s):")
shown = in_plot_units(live_front[["batch_size", "power_limit", "tta", "eta"]], like=live)
print(shown.round(2).to_string(index=False))

# %% [markdown]
# ## How much could be saved?
#
# For six workloads: the energy to reach the target with the best batch size, the best power
# limit, or both, relative to the default batch size at the maximum power limit.

# %%
savings = potential_savings(trace_gpu)
print(
    savings[["workload", "best_batch_size_ratio", "best_power_limit_ratio", "best_both_ratio"]]
    .round(2)
    .to_string(index=False)
)
alone = savings[["best_batch_size_ratio", "best_power_limit_ratio"]].min(axis=1)
ahead = savings.best_both_ratio < alone
points = 100 * (alone - savings.best_both_ratio).max()
print(
    f"\nboth together use less energy than the better single choice on {ahead.sum()} of "
    f"{len(savings)} workloads (by up to {points:.0f} % of the default's energy)"
)
fig = savings_bars(savings)

# %% [markdown]
# ## Results

# %%
traced = f"real: {trace_gpu} (Zeus's published traces)"
zeus_nb.record("trace_configurations", len(trace), gpu=traced)
zeus_nb.record(
    "trace_front",
    [[int(b), float(p)] for b, p in zip(front.batch_size, front.power_limit, strict=True)],
    gpu=traced,
)
zeus_nb.record("student_front_size", len(mine))
best = optimum.value  # the latest choice of the eta_knob slider
zeus_nb.record("eta_knob", knob.value)
zeus_nb.record("optimum", [int(best.batch_size), float(best.power_limit)], gpu=traced)
zeus_nb.record("optimum_by_eta", along, gpu=traced)
zeus_nb.record("live_power_limits", power_limits, gpu=live_source)
zeus_nb.record("live_configurations", len(live), gpu=live_source)
zeus_nb.record(
    "live_sweep", live[["batch_size", "power_limit", "reached", "time", "energy"]], gpu=live_source
)
zeus_nb.record("live_reached", int(live.reached.sum()), gpu=live_source)
zeus_nb.record(
    "live_front",
    [
        [int(b), float(p)]
        for b, p in zip(live_front.batch_size, live_front.power_limit, strict=True)
    ],
    gpu=live_source,
)
for column in ("best_batch_size_ratio", "best_power_limit_ratio", "best_both_ratio"):
    zeus_nb.record(column, dict(zip(savings.workload, savings[column], strict=True)), gpu=traced)
zeus_nb.record(
    "takeaway",
    f"tuning batch size and power limit together needs {savings.best_both_ratio.min():.0%} to "
    f"{savings.best_both_ratio.max():.0%} of the default's energy on six traced workloads; "
    f"the live sweep's front has {len(live_front)} point(s)",
)
print(f"{len(zeus_nb.runner.records.recorded())} results recorded (zeus_nb.collect reads them)")

# %% [markdown]
# ## What you learned
#
# - Batch size and power limit together span an energy-time tradeoff; only the Pareto front (no
#   other point both faster and cheaper) is worth choosing from.
# - `eta_knob` walks along the front: 1 picks the least energy, 0 the least time; the Zeus cost
#   turns time into joules with one MaxPower for every configuration (exercise).
# - Tuning batch size and power limit together never saves less than tuning either alone, and on
#   most workloads it saves more (the line under the savings table counts them; published traces).

# %% [markdown]
# **Next**: notebook 04 finds the batch size automatically for jobs that train again and again.
