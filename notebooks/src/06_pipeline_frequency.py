# %% [markdown]
# # 06 · Pipeline frequency planning (Perseus)
#
# **What you will learn**
#
# - why a pipeline-parallel iteration under the 1F1B schedule leaves some GPUs waiting, and why
#   the energy of those waits counts;
# - how an instruction profile (time and energy of each stage's forward and backward at each SM
#   clock) turns into the whole time–energy frontier of an iteration (Phillips–Dessouky, as in
#   `lowtime`);
# - how a frequency plan runs a live 4-stage pipeline at the same iteration time with less energy,
#   measured on every rank;
# - what a straggler elsewhere in the job buys: the least-energy plan that still keeps up with it
#   (exercise).
#
# **Prerequisites**: notebooks 01 and 02. No GPU needed: the planning example and the live
# pipeline run on simulated GPUs whose time and power at each clock come from a frequency model
# calibrated on the shipped Zeus power-limit measurements (`docs/pipeline_frequency.md`). The live
# pipeline's stages compute on the CPU (gloo), so on a GPU machine they still run on simulated
# GPUs; real clocks are set only by `zeus_nb.train.pipeline --backend nvml`.
#
# **Expected run time**: 1 min 04 s on the simulated GPU, 53 s with `smoke = True` (measured on 2
# CPU cores that other jobs were using, load average 2.8 before and 1.7 after; beside 4 busy
# processes (load average 1.7 to 5.8) the smoke run took 1 min 16 s; Run All in JupyterLab adds
# the kernel's start; see the README's run-time table).
#
# Most of it goes into starting the four pipeline processes three times, so a GPU does not change
# it much.

# %% tags=["parameters"]
backend: str = "auto"  # "auto" (real GPU if found, else simulated), "sim" or "nvml"
smoke: bool = False  # True: fewer profiled clocks and measured steps, for CI and quick checks
seed: int = 0  # seeds the live pipeline's weights and synthetic data
sim_gpu: str = "v100"  # calibrated GPU model behind every simulated instruction: v100 or a40
stages: int = 4  # pipeline stages of the planning example
microbatches: int = 8  # microbatches per iteration of the planning example
stage_weights: str = "1,1.2,0.9,1.1"  # relative stage sizes of the planning example
quantum_scale: float = 4.0  # time quantum as a multiple of the default (larger: faster, coarser)
straggler_slowdown: float = 1.1  # a straggler makes every iteration this many times longer
live_model: str = "tiny-gpt"  # named model of the live 4-stage pipeline
live_microbatches: int = 8  # microbatches per iteration of the live pipeline
profile_clocks: str = "every:4"  # clocks the live profile measures: all, every:N or MHz list
live_steps: int = 2  # measured iterations per live run
headless: bool = False  # True: show no interactive controls (automatic under papermill)

# %%
import json
import math
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import display

import zeus_nb
from zeus_nb import widgets
from zeus_nb.course import check
from zeus_nb.errors import ZeusNbError
from zeus_nb.optimizer.pipeline_frequency import (
    FrequencyPlan,
    default_unit_time,
    evaluate,
    load_profile,
    solve_frontier,
    stage_order,
    synthetic_profile,
)
from zeus_nb.plots import (
    cost_model_fit,
    frequency_fit,
    frontier_plot,
    pipeline_timeline,
    timelines_before_after,
)
from zeus_nb.runner.notebooks import parse_values
from zeus_nb.runner.records import set_gpu_source
from zeus_nb.train.pipeline.launch import launch

weights = [float(w) for w in parse_values(stage_weights, "float", "stage_weights")]
warmup_steps, profile_steps = (0, 1) if smoke else (1, 2)
if smoke:
    profile_clocks, live_steps, quantum_scale = "every:12", 1, max(quantum_scale, 8.0)
zeus_nb.notebook_setup(backend, seed, sim_gpu=sim_gpu)
# every number recorded here comes from simulated GPUs (their calibrated frequency model), which
# lock clocks on any machine: the records say so, whatever GPU the notebook found
set_gpu_source(f"simulated: {sim_gpu} (calibrated frequency model; by design)")
work_dir = Path(tempfile.mkdtemp(prefix="zeus-nb-06-"))  # profile, plan and results files
live_env = {"ZEUS_NB_SIM_GPU": sim_gpu}
print(f"planning example: {stages} stages x {microbatches} microbatches, stage sizes {weights}")
print(
    f"live pipeline: {live_model}, 4 stages x {live_microbatches} microbatches, files in {work_dir}"
)

# %% [markdown]
# ## Why 1F1B has slack
#
# Under 1F1B (one forward, one backward), stage `s` of `S` first runs `S - s - 1` warm-up forwards,
# then alternates a forward and a backward, then drains the remaining backwards. A forward needs
# the previous stage's forward of the same microbatch, a backward the next stage's backward. Here
# is each stage's order for a small pipeline:

# %%
for s in range(stages):
    order = stage_order(s, stages, min(microbatches, 4))
    print(f"stage {s}: " + " ".join(f"{i[0].upper()}{j}" for i, j in order))

# %% [markdown]
# Stages rarely take equally long: a model splits into whole layers, and the first and last stages
# hold the embedding and the output head. The planning example is an unbalanced pipeline whose
# instructions come from the simulated GPU's calibrated frequency model (`synthetic_profile`: one
# microbatch's forward and backward take one traced training step, split by stage size). At the
# maximum clock everywhere, the iteration's length is set by its *critical path* (outlined); every
# other instruction finishes early and its GPU waits, drawing its blocking power.

# %%
profile = synthetic_profile(sim_gpu, stages, weights)
max_clock = evaluate(FrequencyPlan.max_clock(profile, microbatches), profile)
clocks = [m.frequency for ms in profile.measurements.values() for m in ms]
clock_range = (min(clocks), max(clocks))  # one colour scale for this and every later timeline
fig = pipeline_timeline(
    max_clock, title=f"all max clocks: {max_clock.iteration_time:.3f} s", clock_range=clock_range
)

spans = max_clock.to_frame()
spans["time"] = spans.end - spans.start
busy = spans.groupby("stage").time.sum()
slack = pd.DataFrame({"busy_s": busy, "waiting_s": max_clock.iteration_time - busy})
slack["waiting_pct"] = 100 * slack.waiting_s / max_clock.iteration_time
print(slack.round(3))

# %% [markdown]
# ## Exercise: the energy of an iteration
#
# Every GPU draws power for the whole iteration: its instructions' energy while it computes, and
# its blocking power while it waits. Write `iteration_energy(busy_energy, busy_time,
# iteration_time, blocking_power)`, each argument but the iteration time a per-stage list. Without
# the waiting term, slowing an instruction down would look free.


# %%
def iteration_energy(
    busy_energy: list[float],
    busy_time: list[float],
    iteration_time: float,
    blocking_power: list[float],
) -> float:
    # BEGIN SOLUTION
    return sum(
        e + p * (iteration_time - t)
        for e, t, p in zip(busy_energy, busy_time, blocking_power, strict=True)
    )
    # END SOLUTION


iteration_energy = check.iteration_energy(iteration_energy)
busy_energy = [
    sum(profile.at(s, i, f).energy for (s, i, _), (_, _, f) in max_clock.spans.items() if s == st)
    for st in range(stages)
]
blocking = [profile.blocking_power[s] for s in range(stages)]
my_energy = iteration_energy(busy_energy, list(busy), max_clock.iteration_time, blocking)
print(
    f"{check.whose(iteration_energy, 'iteration_energy')} gives {my_energy:.1f} J; "
    f"the planner's timeline: {max_clock.energy:.1f} J"
)

# %% [markdown]
# ## The frontier
#
# Each instruction's profiled (time, energy) options get an exponential cost model (energy minus
# blocking energy, so waiting is paid for). A Phillips–Dessouky solver (the package's own, which
# follows `lowtime`'s; `solver="lowtime"` runs `lowtime` itself) shortens the iteration one time
# quantum at a time from the all-slowest plan to the fastest; each step is a plan. The frontier
# keeps the plans where a longer iteration buys strictly less energy. Its fastest point takes the
# time of all max clocks (the star), up to one time quantum, on less energy: the instructions off
# the critical path slow down into their slack (the *intrinsic energy bloat*). The lines printed
# with the plot give both.

# %%
frontier = solve_frontier(
    profile, stages, microbatches, unit_time=quantum_scale * default_unit_time(profile)
)
fastest = frontier.fastest()
ref = frontier.max_clock
saved_fastest = 100 * (1 - fastest.energy / ref.energy)
slower_fastest = 100 * (fastest.iteration_time / ref.iteration_time - 1)
print(
    f"{len(frontier.points)} frontier points from {fastest.iteration_time:.4f} s to "
    f"{frontier.points[-1].iteration_time:.4f} s (quantum {frontier.unit_time:.2e} s)"
)
print(
    f"all max clocks: {ref.iteration_time:.4f} s, {ref.energy:.1f} J; fastest plan: "
    f"{fastest.iteration_time:.4f} s ({slower_fastest:+.2f} % time, within one quantum), "
    f"{fastest.energy:.1f} J ({saved_fastest:.2f} % less energy)"
)
fig = frontier_plot(frontier, chosen=fastest)

# %%
fig = timelines_before_after(frontier, fastest)

# %% [markdown]
# The cost model the solver fits per instruction, against the profiled options (first and last
# stage):

# %%
fig = cost_model_fit(frontier, stages=[0, stages - 1])

# %% [markdown]
# ## Along the frontier: a straggler
#
# If another pipeline of the job (or a slow node) makes every iteration `straggler_slowdown` times
# longer anyway, this pipeline may take that long too: the least-energy plan within that deadline
# saves more. Move the slider to pick any deadline; the timeline redraws with its plan.
#
# ## Exercise: the plan for a deadline
#
# Write `plan_within(plans, deadline)`: `plans` lists the frontier's plans as
# `(iteration_time, energy)` (s, J), `deadline` is in s. Return the index of the least-energy plan
# that finishes an iteration within the deadline (a plan that takes exactly the deadline meets
# it). Do not count on the list's order: a list of plans need not be a frontier.


# %%
def plan_within(plans: list[tuple[float, float]], deadline: float) -> int:
    # BEGIN SOLUTION
    in_time = [i for i, (seconds, _) in enumerate(plans) if seconds <= deadline]
    return min(in_time, key=lambda i: plans[i][1])
    # END SOLUTION


plan_within = check.plan_within(plan_within)

# %%
deadline = straggler_slowdown * fastest.iteration_time
if deadline < fastest.iteration_time:
    raise ZeusNbError(
        f"straggler_slowdown={straggler_slowdown:g}: no plan is faster than the fastest one; "
        "give a factor of 1 or more"
    )
plans = [(p.iteration_time, p.energy) for p in frontier.points]
straggler = frontier.points[plan_within(plans, deadline)]
saved_straggler = 100 * (1 - straggler.energy / ref.energy)
print(
    f"deadline {deadline:.4f} s ({straggler_slowdown:g}x): "
    f"{check.whose(plan_within, 'plan_within')} picks the plan of "
    f"{straggler.iteration_time:.4f} s, "
    f"{straggler.energy:.1f} J, {saved_straggler:.2f} % less than all max clocks"
)


def plan_for(deadline_s: float):
    point = frontier.for_deadline(deadline_s)
    saved = 100 * (1 - point.energy / ref.energy)
    title = (
        f"deadline {deadline_s:.4f} s: plan {point.iteration_time:.4f} s, {point.energy:.1f} J "
        f"({saved:.2f} % saved)"
    )
    fig = pipeline_timeline(frontier.timeline(point), title=title, clock_range=clock_range)
    display(fig)
    plt.close(fig)
    return point


slowest = frontier.points[-1].iteration_time
start = min(max(deadline, fastest.iteration_time), slowest)
step = max((slowest - fastest.iteration_time) / 50, 1e-9)
slider = widgets.float_slider(
    start, fastest.iteration_time, slowest, step, "deadline_s", headless, digits=4
)
chosen = widgets.live_output(plan_for, {"deadline_s": slider}, headless)
display(chosen)

# %% [markdown]
# ## Where a simulated instruction's numbers come from
#
# A simulated GPU runs an instruction as work with a compute-bound share (stretching as the clock
# drops) and a dynamic power (falling with the clock), on top of the GPU's static power. These
# parameters are fitted to the shipped Zeus power-limit measurements: under a power limit the GPU
# runs at the clock that limit allows, so each measured (limit, time, power) is a point of the
# model. Dots: measured; lines: the model.

# %%
fig = frequency_fit(sim_gpu)

# %% [markdown]
# ## Live: profile a 4-stage pipeline on simulated GPUs
#
# `launch(4, ...)` runs the job `torchrun --nproc_per_node 4 -m zeus_nb.train.pipeline` runs, in a
# subprocess (torch.distributed's elastic launcher, as torchrun, with its ranks forked from a
# process that imported PyTorch once: `zeus_nb.train.forkrun`): one process per stage on the CPU,
# each measuring its own simulated GPU per instruction. With `profile=True` every rank runs its
# forward and backward at each of the chosen clocks (locked under the settings guard, restored
# afterwards) and rank 0 writes one CSV row per stage, instruction and clock, plus each stage's
# blocking power.

# %%
profile_csv = work_dir / "profile.csv"
profiled = launch(
    4,
    env=live_env,
    timeout=600,
    backend="sim",
    model=live_model,
    pp=4,
    num_microbatches=1,
    profile=True,
    profile_clocks=profile_clocks,
    profile_path=str(profile_csv),
    num_warmup_steps=warmup_steps,
    num_prof_steps=profile_steps,
    seed=seed,
)
live_profile = load_profile(profile_csv)
rows = [
    (s, inst, m.frequency, 1e6 * m.time, 1e3 * m.energy)
    for (s, inst), ms in live_profile.measurements.items()
    for m in ms
]
table = pd.DataFrame(rows, columns=["stage", "instruction", "MHz", "time_us", "energy_mJ"])
print(f"{len(profiled['clocks_profiled'])} clocks profiled: {profiled['clocks_profiled']}")
print(table[table.MHz == table.MHz.max()].round(2).to_string(index=False))

# %% [markdown]
# ## Live: all max clocks against the plan
#
# Plan the live pipeline from its profile, save the fastest frontier point as a plan file (what
# `zeus-nb perseus plan PROFILE.csv --stages 4 --microbatches M --deadline S --json` writes), and
# run the pipeline twice: at the maximum clock everywhere, and with a `PipelineFrequencyOptimizer`
# that locks each instruction's planned clock. Both runs are measured on every rank.

# %%
live_unit = 2 * quantum_scale * default_unit_time(live_profile)  # coarser: a quicker solve
live_frontier = solve_frontier(live_profile, 4, live_microbatches, unit_time=live_unit)
live_point = live_frontier.fastest()
plan_file = work_dir / "plan.json"
plan_file.write_text(json.dumps(live_point.to_json()))
run_options = dict(
    env=live_env,
    timeout=600,
    backend="sim",
    model=live_model,
    pp=4,
    num_microbatches=live_microbatches,
    max_steps=warmup_steps + live_steps,
    num_warmup_steps=warmup_steps,
    num_prof_steps=live_steps,
    seed=seed,
)
live_max = launch(4, **run_options)
live_planned = launch(4, plan=str(plan_file), **run_options)

# %%
compare = pd.DataFrame(
    {
        "all max clocks": {
            "predicted_us": 1e6 * live_frontier.max_clock.iteration_time,
            "measured_us": 1e6 * live_max["iteration_time_s"],
            "predicted_mJ": 1e3 * live_frontier.max_clock.energy,
            "measured_mJ": 1e3 * live_max["energy_j"],
        },
        "plan": {
            "predicted_us": 1e6 * live_point.iteration_time,
            "measured_us": 1e6 * live_planned["iteration_time_s"],
            "predicted_mJ": 1e3 * live_point.energy,
            "measured_mJ": 1e3 * live_planned["energy_j"],
        },
    }
).T
live_saved = 100 * (1 - live_planned["energy_j"] / live_max["energy_j"])
live_slower = 100 * (live_planned["iteration_time_s"] / live_max["iteration_time_s"] - 1)
print(compare.round(2).to_string())
print(
    f"measured: the plan takes {live_slower:+.2f} % time and "
    f"{'saves' if live_saved > 0 else 'does not save'} {abs(live_saved):.2f} % energy per iteration"
)
model_is_measured = all(
    math.isclose(row[f"predicted_{u}"], row[f"measured_{u}"], rel_tol=1e-9)
    for _, row in compare.iterrows()
    for u in ("us", "mJ")
)
if model_is_measured:
    print(
        "measured equals predicted to every digit: these ranks run on simulated GPUs, whose time "
        "and energy per instruction come from the same frequency model the planner predicts "
        "with, so this run checks the plan's execution (each instruction at its planned clock), "
        "not the model; on real GPUs (`zeus_nb.train.pipeline --backend nvml`) the measurement "
        "comes from the GPUs' own counters"
    )
else:
    gap = (compare.measured_mJ / compare.predicted_mJ - 1).abs().max()
    print(f"measured and predicted energy differ by up to {gap:.1%}")
fig = timelines_before_after(live_frontier, live_point)

# %% [markdown]
# The same straggler on the live pipeline: the frontier of the live profile, and its least-energy
# plan within `straggler_slowdown` times the fastest plan's time (the star on the plot). Inside a
# job, rank 0 can plan the same way (`plan_profile=..., plan_deadline=...`) and broadcast the
# plan, with no server.

# %%
live_straggler = live_frontier.for_deadline(straggler_slowdown * live_point.iteration_time)
live_slowest = live_frontier.points[-1]
live_saved_straggler = 100 * (1 - live_straggler.energy / live_frontier.max_clock.energy)
print(
    f"{len(live_frontier.points)} live frontier points from {live_point.iteration_time * 1e6:.1f} "
    f"to {live_slowest.iteration_time * 1e6:.1f} us per iteration"
)
print(
    f"within {straggler_slowdown:g}x the fastest plan's time: a plan of "
    f"{live_straggler.iteration_time * 1e6:.1f} us and {live_straggler.energy * 1e3:.2f} mJ, "
    f"{live_saved_straggler:.1f} % less energy than all max clocks "
    f"(the fastest plan: {100 * (1 - live_point.energy / live_frontier.max_clock.energy):.1f} %)"
)
fig = frontier_plot(live_frontier, chosen=live_straggler)

# %% [markdown]
# ## Results

# %%
zeus_nb.record("slack_waiting_s", list(slack.waiting_s))
zeus_nb.record("max_clock", [ref.iteration_time, ref.energy])
zeus_nb.record("exercise_energy", my_energy)
zeus_nb.record("unit_time", frontier.unit_time)
zeus_nb.record("frontier", [[p.iteration_time, p.energy] for p in frontier.points])
zeus_nb.record("saved_at_fastest_pct", saved_fastest)
zeus_nb.record("straggler", [deadline, straggler.iteration_time, straggler.energy])
zeus_nb.record("saved_at_straggler_pct", saved_straggler)
zeus_nb.record("slider_point", [chosen.value.iteration_time, chosen.value.energy])
zeus_nb.record("live_clocks_profiled", profiled["clocks_profiled"])
zeus_nb.record("live_max", [live_max["iteration_time_s"], live_max["energy_j"]])
zeus_nb.record("live_planned", [live_planned["iteration_time_s"], live_planned["energy_j"]])
zeus_nb.record("live_predicted", [live_point.iteration_time, live_point.energy])
zeus_nb.record(
    "live_max_predicted", [live_frontier.max_clock.iteration_time, live_frontier.max_clock.energy]
)
zeus_nb.record("live_saved_pct", live_saved)
zeus_nb.record("live_frontier", [[p.iteration_time, p.energy] for p in live_frontier.points])
zeus_nb.record("live_straggler", [live_straggler.iteration_time, live_straggler.energy])
zeus_nb.record(
    "takeaway",
    f"the planner's fastest plan keeps all max clocks' iteration time "
    f"({slower_fastest:+.1f} %) on {saved_fastest:.1f} % "
    f"less energy, a {straggler_slowdown:g}x straggler deadline saves {saved_straggler:.1f} %; "
    f"live, the plan saved {live_saved:.1f} % at {live_slower:+.1f} % time",
)
print(f"{len(zeus_nb.runner.records.recorded())} results recorded (zeus_nb.collect reads them)")

# %% [markdown]
# ## What you learned
#
# - Under 1F1B the stages of a pipeline wait for each other; a waiting GPU still draws its blocking
#   power, so an iteration's energy counts every GPU for the whole iteration (exercise).
# - Instructions off the critical path can run at lower clocks without making the iteration
#   longer: the frontier's fastest plan removes this intrinsic energy bloat.
# - A straggler elsewhere in the job sets a deadline; the least-energy plan within it saves more,
#   and a longer deadline can only keep or lower the energy (exercise).
# - A frequency plan is computed from a profile of the pipeline's own instructions and applied to
#   a live run.

# %% [markdown]
# **Where next**: `docs/pipeline_frequency.md` (the frequency model, the profile CSV, the CLI), and
# `zeus-nb perseus plan` on a profile of your own pipeline.
