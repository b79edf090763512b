# %% [markdown]
# # 04 · Learning the batch size of a recurring job
#
# **What you will learn**
#
# - why jobs that train again and again can learn their batch size across recurrences;
# - how the batch-size optimizer (pruning, then Thompson sampling, with early stopping) converges,
#   replayed on the real Zeus traces;
# - what the `eta` and `beta` knobs change;
# - how to decide when to stop a run early (exercise), how Thompson sampling picks a batch size
#   round by round (exercise), and how to drive the optimizer from your own training loop.
#
# **Prerequisites**: notebooks 02 and 03 (the Zeus cost, the tradeoff). No GPU needed.
#
# **Expected run time**: 14 s on the simulated GPU, 13 s with `smoke = True` (measured on 2 CPU
# cores that other jobs were using, load average 2.8 before and 1.7 after; beside 4 busy processes
# (load average 1.7 to 5.8) the smoke run took 12 s; Run All in JupyterLab adds the kernel's
# start; see the README's run-time table).
#
# **On a GPU** the live part trains a small model for real (not yet timed on a GPU).

# %% tags=["parameters"]
backend: str = "auto"  # "auto" (real GPU if found, else simulated), "sim" or "nvml"
smoke: bool = False  # True: fewer live recurrences, for CI and quick checks
seed: int = 1  # seeds the bandit's draws, the sampled runs and the live model
workload: str = "imagenet"  # traced workload the simulation replays
trace_gpu: str = "v100"  # GPU of the traces: "v100" or "a40"
eta: float = 0.5  # Zeus cost weight of energy, from 0 (only time) to 1 (only energy)
beta: float = 2.0  # stop a run once its cost passes beta times the best so far
compare_seeds: int = 10  # seeds for the comparison with the published policy
live_recurrences: int = 12  # recurrences of the live job
live_batch_sizes: str = "32,64,128,256"  # candidate batch sizes of the live job
target_accuracy: float = 0.8  # live job: validation accuracy that counts as trained
max_epochs: int = 8  # live job: epochs before a run counts as failed

# %%
import math

import numpy as np
import pandas as pd

import zeus_nb
from zeus_nb.course import check
from zeus_nb.inputs import validate
from zeus_nb.optimizer.batch_size import BatchSizeOptimizer, PaperBatchSizeOptimizer
from zeus_nb.optimizer.batch_size.simulator import simulate
from zeus_nb.optimizer.batch_size.store import MemoryStore
from zeus_nb.plots import bso_costs, bso_posterior
from zeus_nb.runner.setup import counter_period, sizing_clock
from zeus_nb.train.demos import small_classifier
from zeus_nb.train.sweep_fn import repeated_to_span, synthetic_images, torch_train_fn

compare_seeds, live_recurrences, max_epochs = validate.notebook_counts(
    compare_seeds=compare_seeds, live_recurrences=live_recurrences, max_epochs=max_epochs
)
if smoke:
    live_recurrences = 6
    compare_seeds = min(compare_seeds, 3)
candidates = validate.number_list(live_batch_sizes, "live_batch_sizes", integers=True)
system = zeus_nb.notebook_setup(backend, seed)
print(f"simulating {workload} on {trace_gpu}; live job on {system.gpus[0].name}")

# %% [markdown]
# ## The bandit on the traces
#
# Each recurrence samples one recorded training run of the chosen batch size (when it reached
# the target, if ever) and charges its epochs with the measured time and power. The baseline
# runs the default batch size at the maximum power limit every time.

# %%
result = simulate(workload, gpu=trace_gpu, eta=eta, beta=beta, seed=seed)
summary = result.summary()
print(
    f"{summary['recurrences']} recurrences: {summary['cumulative_saving']:.1%} energy saved "
    f"overall, {summary['last10_saving']:.1%} over the last 10; converged to batch size "
    f"{summary['converged_batch_size']} at {summary['converged_power_limit']:g} W"
)
fig = bso_costs(result)

# %%
fig = bso_posterior(result)

# %% [markdown]
# ## The knobs
#
# `eta` weighs energy against time in the cost the bandit minimizes; `beta` bounds how much a
# bad run may cost before it is stopped (`inf`: never stop).

# %%
rows = []
for e in (0.0, 0.5, 1.0):
    s = simulate(workload, gpu=trace_gpu, eta=e, beta=beta, seed=seed).summary()
    rows.append(("eta", e, s["converged_batch_size"], s["converged_power_limit"], s))
for b in (1.5, 2.0, math.inf):
    s = simulate(workload, gpu=trace_gpu, eta=eta, beta=b, seed=seed).summary()
    rows.append(("beta", b, s["converged_batch_size"], s["converged_power_limit"], s))
knobs = pd.DataFrame(
    [
        (k, v, bs, pl, s["cumulative_saving"], s["time"] / 3600, s["runs"])
        for k, v, bs, pl, s in rows
    ],
    columns=["knob", "value", "batch_size", "power_limit", "saving", "hours", "runs"],
)
print(knobs.round(3).to_string(index=False))

# %% [markdown]
# ## Compared with the published policy
#
# `PaperBatchSizeOptimizer` prunes the same way but samples as the Zeus paper does: full-width
# draws from each arm's own cost variance. Running both on the same seeds replays the same
# recorded training runs, so the difference per seed is the policies' alone.

# %%
paired = pd.DataFrame(
    [
        (
            s,
            simulate(workload, gpu=trace_gpu, eta=eta, beta=beta, seed=s).cumulative_saving,
            simulate(
                workload,
                gpu=trace_gpu,
                eta=eta,
                beta=beta,
                seed=s,
                optimizer=PaperBatchSizeOptimizer,
            ).cumulative_saving,
        )
        for s in range(seed, seed + compare_seeds)
    ],
    columns=["seed", "zeus_nb", "paper"],
)
paired["difference"] = paired["zeus_nb"] - paired["paper"]
print(paired.round(4).to_string(index=False))
print(f"mean difference: {paired['difference'].mean():+.2%} of the baseline energy")

# %% [markdown]
# ## Exercise: stop early
#
# Write `should_stop_early(cost, best_cost, beta)`: stop a run once its cost so far exceeds
# `beta` times the cheapest successful run (`best_cost`). With no successful run yet
# (`best_cost` is None) or `beta = inf`, never stop.


# %%
def should_stop_early(cost: float, best_cost: float | None, beta: float) -> bool:
    # BEGIN SOLUTION
    if best_cost is None or math.isinf(beta):
        return False
    return cost > beta * best_cost
    # END SOLUTION


should_stop_early = check.should_stop_early(should_stop_early)

# %% [markdown]
# ## Exercise: Thompson sampling, round by round
#
# Once pruning is over, each recurrence the bandit holds a belief about every surviving batch
# size: a Gaussian posterior of its mean cost (mean and standard deviation, from the costs of its
# earlier runs). It draws one cost per batch size from its posterior and runs the cheapest
# *draw*, not the cheapest mean: an uncertain batch size sometimes draws low and gets tried
# again, and as its runs pile up its posterior narrows and its draws stay near its mean.
#
# Write `thompson_pick(posterior, z)`: `posterior` maps each batch size to `(mean, std)` of its
# cost in J, `z` holds one standard-normal number per batch size in the same order; a draw is
# `mean + std * z`. Return the batch size with the cheapest draw. For example, with
# `{128: (100.0, 10.0), 256: (95.0, 5.0)}` and `z = [0.2, 1.5]` the draws are 102 and 102.5:
# batch size 128 runs although 256 has the cheaper mean.


# %%
def thompson_pick(posterior: dict[int, tuple[float, float]], z: list[float]) -> int:
    # BEGIN SOLUTION
    draws = {bs: mean + std * x for (bs, (mean, std)), x in zip(posterior.items(), z, strict=True)}
    return min(draws, key=draws.__getitem__)
    # END SOLUTION


thompson_pick = check.thompson_pick(thompson_pick)

# %% [markdown]
# The simulated bandit above kept every run in its store. Replaying that log run by run rebuilds
# its posterior as it was before each Thompson round; the optimizer seeds round *n*'s normal
# numbers with (seed, *n*) and narrows every posterior by its `exploration` factor, so the
# exercise's `thompson_pick` (the reference until yours passes) can redraw each round and be
# compared with the batch size the bandit ran.

# %%
bandit = result.optimizer
replay = BatchSizeOptimizer(bandit.job, MemoryStore())
width = replay.job.exploration
rounds = []
for _, run in bandit.store.observations(bandit.job.name):
    if replay.phase == "thompson":
        arms = replay.survivors
        belief = replay.posterior().set_index("batch_size").loc[arms]
        posterior = {
            int(b): (float(m), width * float(s))
            for b, m, s in zip(arms, belief.mean_cost, belief["std"], strict=True)
        }
        normals = np.random.default_rng([replay.job.seed, replay.num_observations])
        picked = thompson_pick(posterior, list(normals.standard_normal(len(arms))))
        rounds.append(
            {"run": replay.num_observations, "exercise": picked, "bandit": run.batch_size}
            | {f"std {b}": posterior[b][1] for b in arms}
        )
    replay.store.append(replay.job.name, run)
rounds = pd.DataFrame(rounds)
agree = int((rounds.exercise == rounds.bandit).sum()) if len(rounds) else 0
print(
    f"{len(rounds)} Thompson rounds; {check.whose(thompson_pick, 'thompson_pick')} picks the "
    f"batch size the bandit ran in {agree} of them"
)
print("every fifth round, with the width (J) of each batch size's draws:")
print(rounds.iloc[::5].round(0).to_string(index=False))

# %% [markdown]
# ## Live: a recurring job on this backend
#
# Each recurrence asks the optimizer for a batch size, trains a small model until the target
# accuracy, stopping early when `should_stop` says so, and reports time, energy and success.
# `MemoryStore` keeps the state in this notebook; a real job uses the default SQLite store so each
# recurrence (a new process) continues where the last one stopped.
#
# This small model trains an epoch in milliseconds on a GPU, shorter than one update of a real
# GPU's energy counter (every 100 ms on an H100): such an epoch reads 0 J. On such a GPU the cell
# times an epoch first and repeats the training set until an epoch spans a few counter updates;
# it also says how exact the runs' energies are.

# %%
train_data, val_data = synthetic_images(512, num_classes=10, image_size=8, noise=0.6, seed=seed)
period = counter_period(system)  # s between energy-counter updates; 0: exact (simulated)
if period:
    train_data, copies = repeated_to_span(
        lambda data: torch_train_fn(small_classifier, data, val_data, seed=seed),
        train_data,
        max(candidates),
        6 * period,  # an epoch at the largest batch size spans 3 counter updates or more, also
        # if epochs then run up to 2x faster than when timed
        sizing_clock,  # real time less waits for a CPU: the same under load
    )
    print(
        f"the counter moves every {period * 1000:g} ms: the training set is repeated {copies} "
        "times, so that an epoch spans 3 counter updates or more"
    )

train_epoch = torch_train_fn(small_classifier, train_data, val_data, seed=seed)
bso = BatchSizeOptimizer(
    "live-demo",
    MemoryStore(),
    batch_sizes=candidates,
    default_batch_size=candidates[len(candidates) // 2],
    eta=eta,
    beta=beta,
    seed=seed,
)
monitor = zeus_nb.ZeusMonitor()
live_rows = []
for recurrence in range(live_recurrences):
    bs = bso.next_batch_size()
    total_time = total_energy = 0.0
    reached = stopped = False
    for epoch in range(max_epochs):
        with monitor.window("epoch") as m:
            accuracy = train_epoch(bs, epoch)
        total_time += m.time
        total_energy += m.total_energy
        reached = accuracy >= target_accuracy
        if reached:
            break
        if bso.should_stop(time=total_time, energy=total_energy, epochs=epoch + 1):
            stopped = True
            break
    bso.report(bs, time=total_time, energy=total_energy, reached=reached)
    live_rows.append((recurrence, bs, epoch + 1, reached, stopped, total_time, total_energy))
live = pd.DataFrame(
    live_rows,
    columns=["recurrence", "batch_size", "epochs", "reached", "stopped", "time", "energy"],
)
print(live.round(2).to_string(index=False))
print(f"phase: {bso.phase}, surviving batch sizes: {bso.survivors}")
if period and live.time.min() < 10 * period:
    watts = live.energy.sum() / live.time.sum()
    print(
        f"runs of {live.time.min():.2f} to {live.time.max():.2f} s on a counter that moves every "
        f"{period * 1000:g} ms: each energy is exact only to about one update ({watts * period:.0f}"
        f" J at {watts:.0f} W): differences of less than that between runs are the counter's, "
        "not the batch sizes'"
    )

# %% [markdown]
# ## Results

# %%
zeus_nb.record("simulation", summary)
zeus_nb.record("knobs", knobs)
zeus_nb.record("paired", paired)
zeus_nb.record("thompson_rounds", len(rounds))
zeus_nb.record("thompson_agreement", agree)
zeus_nb.record("live_candidates", candidates)
zeus_nb.record("live_batch_sizes", live.batch_size.tolist())
zeus_nb.record("live_reached", live.reached.tolist())
zeus_nb.record("live_time", live.time.tolist())
zeus_nb.record("live_energy", live.energy.tolist())
zeus_nb.record("live_phase", bso.phase)
zeus_nb.record("live_survivors", bso.survivors)
zeus_nb.record(
    "takeaway",
    f"replayed on the traces, the bandit settles on batch size {summary['converged_batch_size']} "
    f"at {summary['converged_power_limit']:g} W and saves {summary['cumulative_saving']:.0%} of "
    f"the baseline's energy over {summary['recurrences']} recurrences",
)
print(f"{len(zeus_nb.runner.records.recorded())} results recorded (zeus_nb.collect reads them)")

# %% [markdown]
# ## What you learned
#
# - A recurring job can learn its batch size across runs: the optimizer first prunes batch sizes
#   that fail to reach the target, then treats the rest as arms of a bandit and samples the next
#   one from what earlier runs cost (Thompson sampling): each round draws a cost per batch size
#   from its posterior and runs the cheapest draw, so uncertain batch sizes still get tried while
#   the posteriors narrow as runs pile up.
# - Early stopping ends a run once its cost passes `beta` times the best cost so far, so a bad batch
#   size costs little to rule out.
# - `eta` weighs energy against time in the cost the bandit minimizes; `beta` trades how early runs
#   are stopped against the risk of stopping one that would have done well.

# %% [markdown]
# **Next**: notebook 05 measures data-parallel training across several GPUs.
