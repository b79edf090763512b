# %% [markdown]
# # 01 · Measuring the energy of training
#
# **What you will learn**
#
# - how `ZeusMonitor` measures the GPU time and energy of any block of code with named
#   *measurement windows*;
# - how windows nest: one over the whole run, one per epoch, one per step;
# - how to sample GPU power over time and plot the power timeline;
# - how to compute average power and energy per training step (two short exercises).
#
# **Prerequisites**: Python and a PyTorch training loop. No GPU needed: without one, zeus-nb
# uses a *simulated* NVIDIA A40 whose time and power per step come from real measurements
# (the Zeus traces). The small model below trains on your CPU (or GPU), while the monitor reads the
# (simulated or real) GPU.
#
# **Expected run time**: 30 s on the simulated GPU, 17 s with `smoke = True` (measured on 2 CPU
# cores that other jobs were using, load average 2.8 before and 1.7 after; beside 4 busy processes
# (load average 1.7 to 5.8) the smoke run took 20 s; Run All in JupyterLab adds the kernel's
# start; see the README's run-time table).
#
# **On a GPU** the same small model trains for real (not yet timed on a GPU).
#
# The next cell holds the parameters. Papermill and `zeus-nb sweep` override them; in JupyterLab,
# edit them and run all cells.

# %% tags=["parameters"]
backend: str = "auto"  # "auto" (real GPU if found, else simulated), "sim" or "nvml"
smoke: bool = False  # True: a few steps only, for CI and quick checks
seed: int = 0  # seeds PyTorch and the simulated GPU's measurement noise
epochs: int = 3  # training epochs
steps_per_epoch: int = 20  # training steps per epoch (the data set is synthetic)
batch_size: int = 32  # images per step for the model below
gpu_index: int = 0  # which GPU to measure
sim_gpu: str = "a40"  # simulated GPU: "a40" or "v100" (real measurements of that GPU)
sim_workload: str = "cifar100"  # workload whose measured steps the simulated GPU replays
sample_period: float = 0.05  # seconds between power samples of the timeline
headless: bool = False  # True: show no interactive controls (automatic under papermill)

# %%
import torch
import torchvision
from torchvision import transforms

import zeus_nb
from zeus_nb import widgets
from zeus_nb.course import check
from zeus_nb.inputs import validate
from zeus_nb.runner.setup import counter_period, steps_spanning

epochs, steps_per_epoch, batch_size = validate.notebook_counts(
    epochs=epochs, steps_per_epoch=steps_per_epoch, batch_size=batch_size
)
sample_period = validate.number(
    sample_period, "notebook parameter sample_period", validate.DURATION
)
if smoke:
    epochs, steps_per_epoch = 2, 4
system = zeus_nb.notebook_setup(
    backend, seed, sim_gpu=sim_gpu, sim_workload=sim_workload, sim_noise=0.02
)
gpu = system.gpu(gpu_index)
period = counter_period(system)  # s between energy-counter updates; 0: exact (simulated)
compute = "cuda" if torch.cuda.is_available() else "cpu"
print(f"measuring {gpu.name} on the {system.backend} backend; the model runs on {compute}")
print(f"{epochs} epochs x {steps_per_epoch} steps, batch size {batch_size}")
if period:
    print(f"its energy counter moves every {period * 1000:g} ms (see the per-step section)")

# %% [markdown]
# ## A small model and a training step
#
# A ShuffleNetV2 from torchvision on synthetic 32x32 images (`FakeData` needs no download).
# `zeus_nb.step()` goes once per training step: on the simulated GPU it advances the virtual
# clock by one measured step of the traced workload; on a real GPU it does nothing.

# %%
data = torchvision.datasets.FakeData(
    size=steps_per_epoch * batch_size,
    image_size=(3, 32, 32),
    num_classes=100,
    transform=transforms.ToTensor(),
    random_offset=seed,
)
loader = torch.utils.data.DataLoader(data, batch_size=batch_size)
model = torchvision.models.shufflenet_v2_x0_5(num_classes=100).to(compute)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
loss_fn = torch.nn.CrossEntropyLoss()


def train_one_step(x: torch.Tensor, y: torch.Tensor) -> float:
    optimizer.zero_grad()
    loss = loss_fn(model(x.to(compute)), y.to(compute))
    loss.backward()
    optimizer.step()
    zeus_nb.step()  # one training step on the (simulated) GPU
    return loss.item()


# %% [markdown]
# ## Windows over the run, each epoch and each step
#
# `begin_window(name)` reads the GPU's energy counter and the clock; `end_window(name)` reads them
# again and returns a `Measurement` with `time` (s) and `gpu_energy` (J per GPU). Windows with
# different names may be open at the same time, so they nest: the `training` window contains every
# `epoch` window, which contains its `step` windows. `monitor.power_timeline(period)` samples power
# meanwhile.

# %%
monitor = zeus_nb.ZeusMonitor(gpu_indices=[gpu_index])
epoch_spans: list[tuple[str, float, float]] = []
epoch_results = []
step_results = []

monitor.begin_window("training", restart=True)
with monitor.power_timeline(period=sample_period) as sampler:
    for epoch in range(epochs):
        start = system.clock()
        monitor.begin_window("epoch")
        for x, y in loader:
            monitor.begin_window("step")
            loss = train_one_step(x, y)
            step_results.append(monitor.end_window("step"))
        m = monitor.end_window("epoch")
        epoch_results.append(m)
        epoch_spans.append((f"epoch {epoch}", start, system.clock()))
        print(f"epoch {epoch}: {m.time:.2f} s, {m.total_energy:.1f} J, loss {loss:.3f}")
training = monitor.end_window("training")
print(f"training: {training.time:.2f} s, {training.total_energy:.1f} J")

# %% [markdown]
# The epochs add up to the whole run, because the windows nest and nothing runs in between. (On a
# real GPU, up to the counter updates that fall between one window's reads and the next one's:
# see the per-step section below.)

# %%
import pandas as pd

epochs_df = pd.DataFrame(
    {"time_s": [m.time for m in epoch_results], "energy_j": [m.total_energy for m in epoch_results]}
).rename_axis("epoch")
print(epochs_df.round(2))
print(f"sum of epochs: {epochs_df.energy_j.sum():.1f} J")
print(f"training window: {training.total_energy:.1f} J")
update_j = period * training.total_energy / training.time if training.time else 0.0
if period:
    between_j = training.total_energy - epochs_df.energy_j.sum()
    print(
        f"difference: {between_j:.1f} J, {abs(between_j) / update_j:.0f} counter update(s) of "
        f"about {update_j:.1f} J that fell between the windows' reads"
    )

# %% [markdown]
# ## Exercise 1: average power
#
# Write `average_power(m)`: the average power in watts over a window, counting all its GPUs.
# An empty window (time 0) has average power 0.


# %%
def average_power(m: zeus_nb.Measurement) -> float:
    # BEGIN SOLUTION
    return m.total_energy / m.time if m.time > 0 else 0.0
    # END SOLUTION


average_power = check.average_power(average_power)
print(
    f"{check.whose(average_power, 'average_power')} gives {average_power(training):.1f} W "
    "over the training window"
)

# %% [markdown]
# ## Exercise 2: energy per step
#
# Write `energy_per_step(m, steps)`: joules per training step for a window that ran `steps` steps.


# %%
def energy_per_step(m: zeus_nb.Measurement, steps: int) -> float:
    # BEGIN SOLUTION
    return m.total_energy / steps
    # END SOLUTION


energy_per_step = check.energy_per_step(energy_per_step)
total_steps = epochs * steps_per_epoch
per_step = energy_per_step(training, total_steps)
print(
    f"{check.whose(energy_per_step, 'energy_per_step')} gives {per_step:.2f} J per step over "
    f"{total_steps} steps"
)

# %% [markdown]
# Each step's own window tells the same story, step by step, when the counter can resolve a step.
# On the simulated GPU it can (its counter is exact): the spread of the per-step energies is the
# noise we asked for (`sim_noise=0.02`, 2 % on each step's time and power, so a little more on
# their product, the energy).
#
# A real GPU's energy counter moves in steps: NVML's counter on an H100 (driver 580) moved every
# 100 ms. A window shorter than that reads 0 J, or a whole update (about 70 J at 700 W), depending
# on whether an update fell inside it; a window of N updates is exact to about one update in N. A
# training step of 30 ms therefore measures 0 J most of the time and 70 J now and then: the spread
# of such per-step energies is the counter's, not training's. (Where the monitor reads the counter
# in the background it shares each update out by power readings instead, and marks such windows
# in `Measurement.approximate`: estimates, not measurements of each step.) Energy per step then
# comes from a window over many steps (the exercise above divides the whole run's energy). The
# cell below says which case this GPU is in.

# %%
steps_df = pd.DataFrame(
    {"time_s": [m.time for m in step_results], "energy_j": [m.total_energy for m in step_results]}
)
print(steps_df.describe().loc[["mean", "std", "min", "max"]].round(3))
mean_j = steps_df.energy_j.mean()
spread = 100 * steps_df.energy_j.std() / mean_j if mean_j > 0 else float("nan")
step_s = steps_df.time_s.median()
if period and step_s < 10 * period:
    zero = int((steps_df.energy_j == 0).sum())
    estimated = sum(bool(getattr(m, "approximate", None)) for m in step_results)
    if estimated:  # the monitor shared the counter's updates out by power readings
        how = (
            f"{estimated} of {len(steps_df)} step energies are estimates that share the "
            "counter's updates out by power readings (Measurement.approximate), not readings "
            "of each step"
        )
    else:
        how = (
            "the spread of what step windows read is the counter's, not training's "
            f"({zero} of {len(steps_df)} read 0 J)"
        )
    print(
        f"a step takes {step_s * 1000:.0f} ms and {gpu.name}'s counter moves every "
        f"{period * 1000:g} ms: a step's window spans {step_s / period:.2f} updates, too few "
        f"to measure its energy with the counter; {how}"
        + (f"; spread {spread:.0f} % of the mean" if mean_j > 0 else "")
    )
    updates = training.time / period
    print(
        f"per step over the whole run ({training.time:.2f} s, {updates:.0f} counter updates), "
        f"{check.whose(energy_per_step, 'energy_per_step')} gives {per_step:.2f} J, exact to "
        f"about {100 / updates:.0f} %"
    )
else:
    print(f"step-to-step spread of the energy: {spread:.1f} % of the mean")

# %% [markdown]
# ## The power timeline
#
# The sampler collected `(time, gpu, power)` rows; shaded spans are the epochs.

# %%
from zeus_nb.plots import plot_power_timeline

timeline = sampler.timeline.to_frame()
fig = plot_power_timeline(timeline, epoch_spans, title=f"{gpu.name}: power while training")
print(f"{len(timeline)} power samples, mean {timeline.power.mean():.1f} W")

# %% [markdown]
# ## Zeus's other monitors: power timeline, CPU energy, carbon and cost
#
# Code written for Zeus runs here with only its imports changed. This section uses three more of
# Zeus's tools on the same training: `PowerMonitor` beside the windows, the CPU and memory energy
# the monitor read all along, and the run's grams of CO2 and electricity cost.
#
# ### `PowerMonitor` next to the windows
#
# Zeus code often runs a `PowerMonitor` beside the `ZeusMonitor`: it samples power every
# `update_period` seconds in the background and answers timeline and energy queries in Unix time
# (comparable with `time.time()`). Here it watches one more epoch, measured by a window too; on a
# GPU whose counter moves in steps, as many more steps as make the window span at least 20 counter
# updates, so that the counter's own steps do not decide the comparison. `reset_windows()` at the
# top makes the cell safe to run again after an interruption.

# %%
from zeus_nb.monitor import PowerMonitor

window_steps = steps_spanning(20 * period, step_s, at_least=steps_per_epoch)
power_monitor = PowerMonitor(gpu_indices=[gpu_index], update_period=sample_period)
monitor.reset_windows()
monitor.begin_window("one epoch")
epoch_start = system.wall_time()  # Unix time of the window's start on this GPU's clock
done = 0
while done < window_steps:
    for x, y in loader:
        train_one_step(x, y)
        done += 1
        if done == window_steps:
            break
one_epoch = monitor.end_window("one epoch")
epoch_end = epoch_start + one_epoch.time
power_monitor.stop()

counter_j = one_epoch.gpu_energy[gpu_index]
integrated_j = power_monitor.get_energy(epoch_start, epoch_end)[gpu_index]
gap = 100 * (integrated_j - counter_j) / counter_j
print(f"{window_steps} steps, {one_epoch.time:.2f} s")
print(f"ZeusMonitor (energy counter):       {counter_j:8.1f} J")
print(f"PowerMonitor (integrated samples):  {integrated_j:8.1f} J ({gap:+.1f} %)")
if period:
    print(
        f"the counter itself is exact to about one update in {one_epoch.time / period:.0f} "
        f"(+-{100 * period / one_epoch.time:.0f} %) over this window"
    )
samples = power_monitor.get_power_timeline("device_instant", gpu_index, start_time=epoch_start - 1)
power_frame = pd.DataFrame(
    [(t, gpu_index, w) for t, w in samples[gpu_index]], columns=["time", "gpu", "power"]
)
fig = plot_power_timeline(
    power_frame,
    [("ZeusMonitor window", epoch_start, epoch_end)],
    title=f"{gpu.name}: PowerMonitor samples and the window",
)

# %% [markdown]
# **Why the two energies differ.** `ZeusMonitor` reads the GPU's cumulative *energy counter* at the
# window's two edges: the difference is all the energy in between, however power moved. The
# `PowerMonitor` only knows power at its sample times; its energy is the area under the samples
# joined by straight lines (trapezoidal rule), cut at the window's edges, where the samples on
# either side are interpolated (`stop()` takes a last one, so the window's end has a sample after
# it). It misses any change of power between samples, so the gap shrinks with a shorter period
# (on an H100, the samples inside windows of 3 to 5 s alone came within 1.2 % of the counter).
# A real counter is itself exact only to about one of its updates per window, which is why the
# window above spans many of them. Use windows for energy, and the timeline to *see* power.

# %% [markdown]
# ### CPU and memory energy of the same run
#
# The monitor above also read the CPU package and its DRAM: on Linux through RAPL (when this
# process may read it), on the simulated backend from CodeCarbon's documented model (the package
# at half its TDP, memory at 3 W per 8 GB). As in Zeus, `total_energy` counts the GPUs only.


# %%
def joules(part: dict[int, float] | None) -> str:
    return "not measured on this machine" if part is None else f"{sum(part.values()):.1f} J"


print(f"GPU  {training.total_energy:.1f} J")
print(f"CPU  {joules(training.cpu_energy)}")
print(f"DRAM {joules(training.dram_energy)}")
whole_j = sum(
    sum(part.values())
    for part in (training.gpu_energy, training.cpu_energy, training.dram_energy)
    if part
)
print(f"all measured parts: {whole_j:.1f} J")

# %% [markdown]
# ### Grams of CO2 and electricity cost
#
# `CarbonEmissionMonitor` and `EnergyCostMonitor` (Zeus's names) convert each window's energy
# with an intensity provider, hour by hour. A fixed value or a CSV of values over time keeps this
# notebook deterministic; live providers (ElectricityMaps, OpenEI) ask online services. The two
# values below are published averages (sources in the comments); put in your own grid's. Both
# monitors watch one more epoch; the whole training run converts the same way.

# %%
# gCO2eq per kWh: US average of 2023 (EIA FAQ "How much carbon dioxide is produced per
# kilowatthour of U.S. electricity generation?": 1,532 million t CO2 over 4,183 billion kWh)
carbon_intensity_g_per_kwh: float = 366.0
# $ per kWh: Michigan's commercial sector in 2023 (EIA Electric Power Annual 2023, average
# revenue per kWh, 13.40 cents)
electricity_price_per_kwh: float = 0.134

from zeus_nb.monitor import CarbonEmissionMonitor, EnergyCostMonitor
from zeus_nb.monitor.providers import J_PER_KWH, FixedIntensity

carbon = CarbonEmissionMonitor(FixedIntensity(carbon_intensity_g_per_kwh), [gpu_index])
cost = EnergyCostMonitor(FixedIntensity(electricity_price_per_kwh), [gpu_index])
carbon.begin_window("epoch")
cost.begin_window("epoch")
for x, y in loader:
    train_one_step(x, y)
epoch_co2 = carbon.end_window("epoch")
epoch_cost = cost.end_window("epoch")
print(
    f"one epoch: {epoch_co2.total_carbon_emission:.3f} gCO2eq, ${epoch_cost.total_energy_cost:.6f}"
)
training_kwh = whole_j / J_PER_KWH
training_co2_g = training_kwh * carbon_intensity_g_per_kwh
training_cost = training_kwh * electricity_price_per_kwh
zeus_nb.record("power_monitor_energy_j", integrated_j)
zeus_nb.record("counter_energy_j", counter_j)
zeus_nb.record(
    "cpu_energy_j", None if training.cpu_energy is None else sum(training.cpu_energy.values())
)
zeus_nb.record(
    "dram_energy_j", None if training.dram_energy is None else sum(training.dram_energy.values())
)
zeus_nb.record("training_co2_g", training_co2_g)
zeus_nb.record("training_cost_usd", training_cost)
print(
    f"training run: {training_kwh * 1000:.3f} Wh, {training_co2_g:.3f} gCO2eq, ${training_cost:.6f}"
)

# %% [markdown]
# ## Try it: the power limit
#
# Pick a power limit and press **Run** to train one epoch at that limit with a live power and
# energy plot. A lower limit makes each step slower; down to a point it also saves energy, and
# below that point the slower steps cost more energy than the lower power saves (notebook 02 finds
# that point). (On a real GPU this needs permission to change power limits; the limit is restored
# afterwards.)
# Headless runs skip this cell's controls.

# %%
widgets.power_limit_explorer(
    system,
    gpu,
    lambda: (train_one_step(x, y) for x, y in loader),  # one epoch, one item per step
    steps_per_epoch,
    headless=headless,
)

# %% [markdown]
# ## Results
#
# `zeus_nb.record` keeps the key numbers in the executed notebook (and in a JSON file next to it
# under `zeus-nb sweep` / `zeus-nb tour`), so `zeus_nb.collect` can gather many runs into a table.

# %%
zeus_nb.record("backend", system.backend)
zeus_nb.record("gpu", gpu.name)
zeus_nb.record("steps", total_steps)
zeus_nb.record("training_time_s", training.time)
zeus_nb.record("training_energy_j", training.total_energy)
zeus_nb.record("average_power_w", average_power(training))
zeus_nb.record("energy_per_step_j", per_step)
zeus_nb.record("epoch_energy_j", [m.total_energy for m in epoch_results])
zeus_nb.record("power_samples", len(timeline))
zeus_nb.record(
    "takeaway",
    f"{total_steps} training steps on the {gpu.name}: {training.total_energy:.0f} J in "
    f"{training.time:.1f} s, {per_step:.1f} J per step, "
    f"{average_power(training):.0f} W on average",
)
print(f"{len(zeus_nb.runner.records.recorded())} results recorded (zeus_nb.collect reads them)")

# %% [markdown]
# ## What you learned
#
# - A measurement window (`begin_window`/`end_window`) gives the time and the energy of any block
#   of training code, per GPU; windows can nest (the run, each epoch, each step).
# - Average power is total energy (all GPUs) over time; energy per step is energy over the number
#   of steps.
# - The power timeline shows *when* the energy is drawn; the power limit changes both how fast a
#   step runs and how much it draws.

# %% [markdown]
# **Next**: notebook 02 uses these measurements to *choose* a power limit automatically.
