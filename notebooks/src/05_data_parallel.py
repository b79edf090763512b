# %% [markdown]
# # 05 · Energy of data-parallel training
#
# **What you will learn**
#
# - how to launch the DDP and FSDP training entry points with `torchrun` from a notebook, and read
#   the results they write;
# - how each rank measures its own GPU with `ZeusMonitor`, and how the measurements of all ranks
#   combine into the job's time and energy (exercise);
# - how the power-limit optimizer agrees on one limit across ranks, and which limit a slowdown
#   budget picks from the measured profile (exercise).
#
# **Prerequisites**: notebooks 01 and 02. No GPU needed: without GPUs the ranks run on the CPU
# (gloo) with one simulated A40 each. With GPUs, each rank takes one, so no more ranks run than
# there are GPUs (with one GPU, one rank: the cell below says so).
#
# **Expected run time**: 34 s on the simulated GPU, 34 s with `smoke = True` (measured on 2 CPU
# cores that other jobs were using, load average 2.8 before and 1.7 after; beside 4 busy processes
# (load average 1.7 to 5.8) the smoke run took 42 s; Run All in JupyterLab adds the kernel's
# start; see the README's run-time table).
#
# **On GPUs** it depends on the model and data you choose (`arch`, `data`).

# %% tags=["parameters"]
backend: str = "auto"  # "auto" (real GPU if found, else simulated), "sim" or "nvml"
smoke: bool = False  # True: shorter runs, for CI and quick checks
seed: int = 0  # seeds the model weights and the synthetic data order
nproc: int = 2  # processes, one GPU each (at most the GPUs present)
data: str = "synthetic"  # ImageNet-layout folder, or "synthetic"
arch: str = "tiny"  # "tiny" (small CNN) or a torchvision model name such as "resnet50"
epochs: int = 3  # training epochs
train_size: int = 1024  # synthetic training images
max_slowdown: float = 1.1  # the optimizer picks the lowest limit within this slowdown
warmup_steps: int = 1  # unmeasured steps after each power-limit change
profile_steps: int = 2  # measured steps per power limit
pl_step: int = 50  # W between profiled power limits
run_fsdp: bool = True  # also train with fully sharded data parallel
rank_spread: float = 0.03  # simulated GPUs: relative spread of step time and power across ranks
straggler: str = ""  # simulated GPUs: "RANK:FACTOR" slows one rank down, e.g. "1:1.3"

# %%
import pandas as pd

import zeus_nb
from zeus_nb.course import check
from zeus_nb.optimizer import PowerLimitMeasurement
from zeus_nb.plots import power_limit_profile
from zeus_nb.runner.changes import settings_system
from zeus_nb.runner.setup import counter_period
from zeus_nb.train.config import TrainConfig, train_size_to_profile
from zeus_nb.train.launch import launch

if smoke:
    epochs, train_size = 2, 512
system = zeus_nb.notebook_setup(backend, seed)
# every rank's optimizer changes its GPU's power limit: on GPUs this process may not change,
# through zeusd when one is configured, else on simulated GPUs of the nearest measured model
measured, (system, live_source) = system, settings_system(system, "DDP and FSDP", seed=seed)
sim_env = {}
if system is not measured:  # the ranks simulate that model too
    sim_env["ZEUS_NB_SIM_GPU"] = system.source
gpu_backend = system.backend
ranks_wanted, present = nproc, len(system.gpus)
if gpu_backend != "sim" and nproc > present:  # a rank per GPU (simulated GPUs: one per rank)
    nproc = present
    print(
        f"{present} GPU(s) here ({system.gpus[0].name}), and DDP and FSDP run one process per GPU: "
        f"{nproc} rank(s) instead of {ranks_wanted}."
        + (
            " With one rank there is no gradient exchange: the job's time and energy are that "
            "rank's, and the exercises below combine a single rank."
            if nproc == 1
            else ""
        )
    )
options = dict(
    data=data,
    arch=arch,
    epochs=epochs,
    train_size=train_size,
    backend=gpu_backend,
    max_slowdown=max_slowdown,
    warmup_steps=warmup_steps,
    profile_steps=profile_steps,
    pl_step=pl_step,
    seed=seed,
)
# Work is counted in steps, never in seconds: enough steps for the optimizer to measure every
# limit and choose, however busy the machine (adaptive profiling may stop early; not counted on).
low_w, high_w = system.gpus[0].power_limit_constraints()
profiled_size = train_size_to_profile(TrainConfig(**options), nproc, low_w, high_w)
if data == "synthetic" and profiled_size > train_size:
    print(
        f"{train_size} images are too few steps to profile every limit from {high_w:g} W down to "
        f"{low_w:g} W; training on {profiled_size} images"
    )
    train_size = options["train_size"] = profiled_size
sim_env |= {"ZEUS_NB_SIM_RANK_SPREAD": str(rank_spread), "ZEUS_NB_SIM_STRAGGLER": straggler}
print(
    f"{nproc} processes on the {gpu_backend} backend: the {arch} model on {data} data, "
    f"{epochs} epochs of {train_size} images, max slowdown {max_slowdown:g}"
)
if gpu_backend == "sim":
    print(
        f"simulated GPUs differ by {rank_spread:.0%} between ranks"
        + (f"; straggler {straggler}" if straggler else "")
    )

# %% [markdown]
# ## DistributedDataParallel
#
# `launch("dp", nproc=N, ...)` runs the job `torchrun --nproc_per_node N -m zeus_nb.train.dp` runs,
# in a subprocess (its ranks forked from a process that imported PyTorch once), shows its output
# here and returns the results JSON that rank 0 wrote. Each rank measures its own GPU
# (`ZeusMonitor(gpu_indices=[local_rank])`) and runs the power-limit optimizer; the optimizer
# reduces every measurement across ranks before it chooses.
#
# No two GPUs of one model run exactly alike: on the simulated backend each rank's GPU gets its
# own step time and power, `rank_spread` apart (3 % by default), and `straggler = "1:1.3"` makes
# rank 1 take 1.3 times as long per step, like a GPU that throttles.

# %%
dp = launch("dp", nproc=nproc, env=sim_env, **options)

# %%
ranks = pd.DataFrame(dp["ranks"])
print(ranks[["rank", "gpu_index", "time_s", "energy_j", "power_limit_w"]].round(2))
print(f"job: {dp['time_s']:.2f} s, {dp['energy_j']:.1f} J, accuracy {dp['accuracy']:.1%}")
slowest = ranks.loc[ranks.time_s.idxmax()]
print(
    f"rank {slowest['rank']:.0f} is the slowest ({slowest.time_s:.2f} s); the ranks' times span "
    f"{ranks.time_s.min():.2f}-{ranks.time_s.max():.2f} s and their energies "
    f"{ranks.energy_j.min():.0f}-{ranks.energy_j.max():.0f} J"
)

# %% [markdown]
# ## Exercise: combine the ranks
#
# The ranks run side by side. Write `aggregate_data_parallel(times, energies)`: the job's time and
# energy from the per-rank lists.


# %%
def aggregate_data_parallel(times: list[float], energies: list[float]) -> tuple[float, float]:
    # BEGIN SOLUTION
    return max(times), sum(energies)
    # END SOLUTION


aggregate_data_parallel = check.aggregate_data_parallel(aggregate_data_parallel)
job_time, job_energy = aggregate_data_parallel(list(ranks.time_s), list(ranks.energy_j))
print(
    f"{check.whose(aggregate_data_parallel, 'aggregate_data_parallel')} gives {job_time:.2f} s, "
    f"{job_energy:.1f} J; the results file says {dp['time_s']:.2f} s, {dp['energy_j']:.1f} J"
)

# %% [markdown]
# ## What the optimizer measured
#
# Each profiled limit's window holds all ranks (time: the slowest, energy: the sum). Limits that
# adaptive profiling ruled out early are drawn as dotted grey lines (the cell lists them too).

# %%
profile = [
    PowerLimitMeasurement(p["power_limit_w"], p["energy_j"], p["time_s"], p["num_gpus"])
    for p in dp["profile"]
]
chosen_w = dp["optimal_power_limit_w"]  # None: profiling did not finish, no limit was chosen
print(
    (
        f"chosen limit: {chosen_w:g} W"
        if chosen_w is not None
        else f"no limit chosen: profiling did not finish ({len(profile)} limits measured)"
    )
    + "; the ranks ended at "
    + ", ".join(f"{w:g} W" for w in sorted(set(ranks.power_limit_w)))
)
if profile:
    fig = power_limit_profile(
        profile, chosen=dp["optimal_power_limit_w"], skipped=dp.get("profile_skipped_w", [])
    )
    skipped = dp.get("profile_skipped_w", [])
    print(f"ruled out early: {', '.join(f'{w:g} W' for w in skipped) if skipped else 'none'}")
    period = counter_period(system)  # s between energy-counter updates; 0: exact (simulated)
    longest = max(m.time for m in profile)
    if period and longest < 10 * period:
        print(
            f"(these windows of {profile_steps} steps last {longest:.2f} s at most, fewer than 10 "
            f"updates of the GPUs' energy counters (every {period * 1000:g} ms): here the energies "
            "are the counter's steps, and the choice shows the optimizer at work; on such GPUs "
            "profile more steps per limit)"
        )

# %% [markdown]
# ## Exercise: the limit within the slowdown budget
#
# Which of the measured limits does the optimizer choose? With `max_slowdown` it keeps the job
# within that factor of its time at the highest limit and, within that budget, takes the lowest
# limit. Write `slowdown_limit(profile, max_slowdown)`: `profile` is the list of
# `PowerLimitMeasurement`s above, in the order they were measured (each has `power_limit` in W,
# `energy` in J summed over the ranks and `time` in s of the slowest rank). Return the lowest
# power limit whose time is at most `max_slowdown` times the time at the highest limit.


# %%
def slowdown_limit(profile: list[PowerLimitMeasurement], max_slowdown: float) -> float:
    # BEGIN SOLUTION
    reference = max(profile, key=lambda m: m.power_limit).time
    return min(m.power_limit for m in profile if m.time <= max_slowdown * reference)
    # END SOLUTION


slowdown_limit = check.slowdown_limit(slowdown_limit)
my_limit = slowdown_limit(profile, max_slowdown) if profile else None
if my_limit is not None:
    verdict = "the same limit" if my_limit == chosen_w else "a different limit"
    print(
        f"within {max_slowdown:g}x the time at {max(m.power_limit for m in profile):g} W: "
        f"{check.whose(slowdown_limit, 'slowdown_limit')} picks {my_limit:g} W, "
        + (
            f"the optimizer chose {chosen_w:g} W ({verdict})"
            if chosen_w is not None
            else "the optimizer chose none (its profiling did not finish)"
        )
    )

# %% [markdown]
# ## Fully sharded data parallel
#
# FSDP shards parameters, gradients and optimizer state across ranks; the measurement and the
# optimizer work the same way.

# %%
fsdp = launch("fsdp", nproc=nproc, env=sim_env, **options) if run_fsdp else None
if fsdp is not None:
    summary = pd.DataFrame(
        {
            mode: {k: r[k] for k in ("time_s", "energy_j", "accuracy", "power_limit_w")}
            for mode, r in (("dp", dp), ("fsdp", fsdp))
        }
    )
    print(summary.round(3))
    same = all(abs(dp[k] - fsdp[k]) <= 1e-9 * max(1.0, abs(dp[k])) for k in ("time_s", "energy_j"))
    if same and gpu_backend == "sim":
        print(
            "DDP and FSDP measure the same time and energy here: the simulated GPU's step cost "
            "depends on batch size and power limit only, not on how the model is sharded "
            "(on real GPUs the two can differ)."
        )
    elif not same:
        print(
            f"FSDP vs DDP: {fsdp['time_s'] / dp['time_s']:.2f}x the time, "
            f"{fsdp['energy_j'] / dp['energy_j']:.2f}x the energy"
        )

# %% [markdown]
# ## Results


# %%
def record(name, value):
    """Every result here comes from the ranks' GPUs: the records say which they were."""
    zeus_nb.record(name, value, gpu=live_source)


record("ranks", [ranks_wanted, nproc])
record("dp", {k: dp[k] for k in ("world_size", "time_s", "energy_j", "accuracy")})
record("dp_rank_times", list(ranks.time_s))
record("dp_rank_energies", list(ranks.energy_j))
record("dp_aggregated", [job_time, job_energy])
record("dp_power_limits", list(ranks.power_limit_w))
record("dp_optimal_power_limit", dp["optimal_power_limit_w"])
record("dp_slowdown_limit", my_limit)
if fsdp is not None:
    record("fsdp", {k: fsdp[k] for k in ("world_size", "time_s", "energy_j", "accuracy")})
    record("fsdp_power_limits", [r["power_limit_w"] for r in fsdp["ranks"]])
record(
    "takeaway",
    f"{nproc} ranks: the job lasts as long as its slowest rank ({job_time:.1f} s) and uses the "
    f"sum of their energies ({job_energy:.0f} J); the optimizer "
    + (f"chose {chosen_w:g} W" if chosen_w is not None else "chose no limit (profiling unfinished)")
    + " and the ranks ended at "
    + ", ".join(f"{w:g} W" for w in sorted(set(ranks.power_limit_w))),
)
print(f"{len(zeus_nb.runner.records.recorded())} results recorded (zeus_nb.collect reads them)")

# %% [markdown]
# ## What you learned
#
# - Each rank of a data-parallel job measures its own GPU; the job lasts as long as its slowest
#   rank and its energy is the sum over ranks.
# - The power-limit optimizer runs on every rank and agrees on one limit for the whole job: with
#   a slowdown budget, the lowest limit whose time stays within `max_slowdown` times the time at
#   the highest limit (exercise).
# - FSDP shards parameters, gradients and optimizer state across ranks; energy is measured and
#   optimized the same way as with DDP.

# %% [markdown]
# **Where next**: run the same entry points on real GPUs (see the training guide), or sweep this
# notebook's parameters with `zeus-nb sweep`.
