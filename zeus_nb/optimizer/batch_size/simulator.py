"""Trace-driven simulation of the batch-size optimizer on the Zeus traces.

Each of N recurrences asks the optimizer for a batch size, then replays one recorded training run
of that batch size: the train trace gives the epoch at which that run reached the target metric
(NaN or beyond the workload's maximum epochs: never), the power trace the time and average power
of one epoch at each power limit. Nothing is invented: every joule comes from those two tables.

How a simulated run is costed:

* **Just-in-time power limit.** The first run of a batch size profiles the power limits the way
  :class:`~zeus_nb.optimizer.power_limit.GlobalPowerLimitOptimizer` does, at the start of its
  first epoch: ``k`` steps at each limit, where ``k = min(profile_steps, steps_per_epoch //
  number_of_limits)`` so profiling fits in the epoch. Those steps cost what the trace says one
  step costs at that limit; the rest of the epoch, and every later epoch, runs at the least-cost
  limit, which the optimizer then remembers for that batch size. Later runs skip profiling.
* **Early stopping.** The optimizer's threshold is beta x the cheapest successful run so far.
  Because the cost of every epoch after profiling is the same, a run is stopped before the first
  epoch that would take it over the threshold; a run that cannot afford even one epoch is
  stopped at the first step whose cost passes the threshold, and every step up to it is charged.
  Stopped and failed runs are retried within the recurrence (at most ``max_attempts`` runs) and
  all their time and energy is charged to it.
* MaxPower in the cost is the highest power limit in the power trace.

``accounting="epoch"`` charges runs by whole epochs instead, as the original Zeus trace-driven
simulator does, for comparing with figures it produced: the first run of a batch size spends its
first epoch evenly at every power limit; the threshold is beta x the cheapest *recurrence* so far
(all its runs' costs summed); a run is stopped before the first epoch that would take it over,
and a run that cannot afford one epoch is not started at all, costs nothing, and is reported to
the optimizer as a failure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from zeus_nb.data.traces import (
    Workload,
    get_workload,
    load_power_trace,
    load_train_trace,
    power_curves,
    target_epochs,
)
from zeus_nb.errors import InputError
from zeus_nb.inputs.validate import integer
from zeus_nb.optimizer.batch_size.optimizer import LocalBatchSizeOptimizer
from zeus_nb.optimizer.batch_size.store import DEFAULT_EXPLORATION, JobSpec, MemoryStore

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ACCOUNTING", "SimulationResult", "WorkloadModel", "run_by_epochs", "simulate"]
__all__ += ["trace_rng", "workload_model"]

DEFAULT_PROFILE_STEPS = 50  # warm-up + measured steps per limit, as the power-limit optimizer
ACCOUNTING = ("step", "epoch")


@dataclass(frozen=True)
class _Arm:
    """Everything the simulator needs about one batch size."""

    batch_size: int
    steps_per_epoch: int
    power_limits: np.ndarray
    epoch_time: np.ndarray  # s, per power limit
    epoch_energy: np.ndarray  # J, per power limit
    best: int  # index of the least-cost power limit
    target_epochs: np.ndarray  # one per recorded run, in trace order; NaN: never reached

    def sample_target(self, rng: np.random.Generator) -> float:
        """The target epoch of one recorded run drawn uniformly (NaN: that run never reached)."""
        return float(self.target_epochs[rng.integers(self.target_epochs.size)])


@dataclass(frozen=True)
class WorkloadModel:
    """A workload as the simulator sees it: per batch size, epoch costs and recorded runs."""

    workload: str
    gpu: str
    eta: float
    max_power: float
    max_epochs: int
    default_batch_size: int
    power_limits: tuple[float, ...]
    arms: dict[int, _Arm]

    @property
    def batch_sizes(self) -> list[int]:
        return sorted(self.arms)

    def epoch_cost(self, batch_size: int) -> np.ndarray:
        """Cost (J) of one epoch at each power limit."""
        a = self.arms[batch_size]
        return self.eta * a.epoch_energy + (1 - self.eta) * self.max_power * a.epoch_time

    def jit_power_limit(self, batch_size: int) -> float:
        a = self.arms[batch_size]
        return float(a.power_limits[a.best])

    def baseline_energy(self) -> float:
        """Mean energy to accuracy of the default batch size at the highest power limit (J).

        A run of the default that never reaches the target counts its ``max_epochs``.
        """
        a = self.arms[self.default_batch_size]
        top = int(np.argmax(a.power_limits))
        epochs = np.where(np.isnan(a.target_epochs), self.max_epochs, a.target_epochs)
        epochs = np.minimum(epochs, self.max_epochs)
        return float(epochs.mean() * a.epoch_energy[top])

    def num_recurrences(self) -> int:
        """2 x |batch sizes| x |power limits|, as in the Zeus paper."""
        return 2 * len(self.arms) * len(self.power_limits)


def workload_model(
    workload: str | Workload,
    gpu: str | Path | pd.DataFrame = "v100",
    eta: float = 0.5,
    train_trace: str | Path | pd.DataFrame | None = None,
    default_batch_size: int | None = None,
) -> WorkloadModel:
    """Join the train and power traces for one workload (batch sizes present in both).

    ``workload`` is a traced workload's name or a :class:`~zeus_nb.data.traces.Workload` (another
    target metric or epoch cap); ``gpu`` and ``train_trace`` are trace names, CSV paths or
    DataFrames of the trace schema. The default batch size b0 is the workload's; where the traces
    of this GPU lack it, the next smaller batch size they have (the smallest if none is smaller),
    as :func:`zeus_nb.data.traces.default_batch_size` does (LibriSpeech's 256 becomes 192 on the
    V100).
    """
    wl = workload if isinstance(workload, Workload) else get_workload(workload)
    power_all = load_power_trace(gpu)
    power = power_curves(power_all, wl.dataset, wl.network, wl.optimizer)
    # target_epoch is NaN for runs that never reached the target within max_epochs
    train = target_epochs(wl, load_train_trace(train_trace), file_order=True)
    max_power = float(power_all["power_limit"].max())
    arms: dict[int, _Arm] = {}
    for bs, rows in power.groupby("batch_size"):
        runs = train[train["batch_size"] == bs]
        if runs.empty:
            continue
        rows = rows.sort_values("power_limit")
        t = rows["time_per_epoch"].to_numpy(float)
        e = t * rows["average_power"].to_numpy(float)
        cost = eta * e + (1 - eta) * max_power * t
        target = runs["target_epoch"].to_numpy(float)
        arms[int(bs)] = _Arm(
            int(bs),
            wl.steps_per_epoch(int(bs)),
            rows["power_limit"].to_numpy(float),
            t,
            e,
            int(np.argmin(cost)),
            target,
        )
    if not arms:
        raise InputError(f"no batch size of {wl.dataset} is in both the train and power traces")
    label = str(gpu) if isinstance(gpu, str | Path) else "a DataFrame"
    b0 = wl.default_batch_size if default_batch_size is None else int(default_batch_size)
    if default_batch_size is not None and b0 not in arms:
        raise InputError(
            f"default batch size {b0} of {wl.dataset} is not in both traces on {label}; "
            f"choose one of {sorted(arms)}"
        )
    if b0 not in arms:  # e.g. librispeech's 256 was not measured on the V100
        smaller = [b for b in sorted(arms) if b <= b0]
        b0 = smaller[-1] if smaller else min(arms)
    limits = tuple(sorted({float(p) for a in arms.values() for p in a.power_limits}))
    return WorkloadModel(
        wl.dataset,
        label,
        eta,
        max_power,
        wl.max_epochs,
        b0,
        limits,
        arms,
    )


@dataclass
class SimulationResult:
    """One simulated sequence of recurrences; ``history`` has one row per run (attempt)."""

    model: WorkloadModel
    beta: float
    seed: int
    recurrences: int
    history: pd.DataFrame
    optimizer: LocalBatchSizeOptimizer = field(repr=False)

    @property
    def baseline_energy(self) -> float:
        return self.model.baseline_energy()

    def per_recurrence(self) -> pd.DataFrame:
        """One row per recurrence: its total time, energy and cost over all its runs, the batch
        size and limit of the run that finished it, and whether any run was stopped early."""
        h = self.history
        g = h.groupby("recurrence")
        last = g.tail(1).set_index("recurrence")
        out = g[["time", "energy", "cost"]].sum()
        out["attempts"] = g.size()
        out["batch_size"] = last["batch_size"]
        out["power_limit"] = last["power_limit"]
        out["reached"] = last["reached"]
        out["stopped_early"] = g["stopped_early"].any()
        return out.reset_index()

    @property
    def cumulative_saving(self) -> float:
        """1 - energy of all runs / (recurrences x baseline energy)."""
        total = float(self.history["energy"].sum())
        return 1.0 - total / (self.recurrences * self.baseline_energy)

    def last_saving(self, n: int = 10) -> float:
        """The same saving over the last ``n`` recurrences."""
        h = self.history
        tail = h[h["recurrence"] >= self.recurrences - n]
        n = min(n, self.recurrences)
        return 1.0 - float(tail["energy"].sum()) / (n * self.baseline_energy)

    @property
    def converged(self) -> tuple[int, float]:
        """(batch size, power limit) of the run that finished the last recurrence."""
        last = self.history.iloc[-1]
        return int(last["batch_size"]), float(last["power_limit"])

    def summary(self) -> dict:
        bs, pl = self.converged
        return {
            "workload": self.model.workload,
            "gpu": self.model.gpu,
            "eta": self.model.eta,
            "beta": self.beta,
            "seed": self.seed,
            "recurrences": self.recurrences,
            "cumulative_saving": self.cumulative_saving,
            "last10_saving": self.last_saving(10),
            "converged_batch_size": bs,
            "converged_power_limit": pl,
            "energy": float(self.history["energy"].sum()),
            "time": float(self.history["time"].sum()),
            "runs": len(self.history),
        }


def _first_epoch(arm: _Arm, profile: bool, profile_steps: int) -> list[tuple[int, float, float]]:
    """The first epoch as (steps, seconds per step, joules per step) segments, in order.

    Profiling measures the limits from the highest down, ``k`` steps each, before the rest of
    the epoch runs at the least-cost limit.
    """
    spe = arm.steps_per_epoch
    best = arm.best
    if not profile:
        return [(spe, arm.epoch_time[best] / spe, arm.epoch_energy[best] / spe)]
    n = arm.power_limits.size
    k = max(1, min(profile_steps, spe // n))
    segments = [
        (k, arm.epoch_time[i] / spe, arm.epoch_energy[i] / spe)
        for i in np.argsort(arm.power_limits)[::-1]
    ]
    rest = spe - n * k
    if rest > 0:
        segments.append((rest, arm.epoch_time[best] / spe, arm.epoch_energy[best] / spe))
    return [(int(m), float(t), float(e)) for m, t, e in segments]


def _run(
    model: WorkloadModel,
    arm: _Arm,
    target: float,
    threshold: float,
    profile: bool,
    profile_steps: int,
) -> tuple[int, float, float, bool, bool]:
    """Replay one run; returns (epochs, time, energy, reached, stopped early).

    ``epochs`` counts whole epochs; 0 means the run was stopped inside its first epoch.
    """
    best = arm.best
    t_ep, e_ep = float(arm.epoch_time[best]), float(arm.epoch_energy[best])
    first = _first_epoch(arm, profile, profile_steps)
    t1 = math.fsum(m * t for m, t, _ in first)
    e1 = math.fsum(m * e for m, _, e in first)
    eta, mp = model.eta, model.max_power
    c1 = eta * e1 + (1 - eta) * mp * t1
    c = eta * e_ep + (1 - eta) * mp * t_ep
    if c1 > threshold:
        # Not even one epoch fits: the run stops at the first step whose cost passes the
        # threshold, and every step up to it is charged.
        t = e = spent = 0.0
        for m, ts, es in first:
            cs = eta * es + (1 - eta) * mp * ts
            steps = int((threshold - spent) // cs) + 1
            if spent + steps * cs <= threshold:  # the division rounded down a whole step
                steps += 1
            steps = min(m, steps)
            t, e, spent = t + steps * ts, e + steps * es, spent + steps * cs
            if spent > threshold:
                break
        return 0, t, e, False, True
    allowed = model.max_epochs
    if math.isfinite(threshold):  # the epochs it can afford without passing the threshold
        allowed = min(allowed, 1 + int((threshold - c1) // c))
    reached = not math.isnan(target) and target <= allowed
    epochs = int(target) if reached else allowed
    stopped = not reached and allowed < model.max_epochs
    return epochs, t1 + (epochs - 1) * t_ep, e1 + (epochs - 1) * e_ep, reached, stopped


def run_by_epochs(
    model: WorkloadModel,
    arm: _Arm,
    target: float,
    threshold: float,
    profile: bool,
    limit: int | None = None,
) -> tuple[int, float, float, bool, bool]:
    """Replay one run under whole-epoch accounting (see the module docstring).

    ``limit`` indexes ``arm.power_limits`` (default: the least-cost one). Returns (epochs, time,
    energy, reached, stopped early); 0 epochs: the run was not started.
    """
    best = arm.best if limit is None else int(limit)
    t_ep, e_ep = float(arm.epoch_time[best]), float(arm.epoch_energy[best])
    c = model.eta * e_ep + (1 - model.eta) * model.max_power * t_ep
    allowed = model.max_epochs
    if math.isfinite(threshold):
        allowed = min(allowed, int(threshold // c))
    if allowed == 0:
        return 0, 0.0, 0.0, False, True
    reached = not math.isnan(target) and target <= allowed
    epochs = int(target) if reached else allowed
    t1, e1 = (
        (float(arm.epoch_time.mean()), float(arm.epoch_energy.mean())) if profile else (t_ep, e_ep)
    )
    stopped = not reached and allowed < model.max_epochs
    return epochs, t1 + (epochs - 1) * t_ep, e1 + (epochs - 1) * e_ep, reached, stopped


def trace_rng(seed: int) -> np.random.Generator:
    """The generator of which recorded run each simulated run replays, as Zeus's simulator
    draws: one ``default_rng(seed)``, one ``integers(n)`` per run (a one-row sample's value and
    state) over the batch size's runs in train-trace row order."""
    return np.random.default_rng(int(seed))


#: One row per attempt of :func:`simulate`.
HISTORY_COLUMNS = (
    "recurrence",
    "attempt",
    "batch_size",
    "power_limit",
    "epochs",
    "time",
    "energy",
    "cost",
    "reached",
    "stopped_early",
    "profiled",
)


#: Recurrences one simulation may run (about 1 ms each; 100 000 once ran for minutes).
MAX_RECURRENCES = 10_000


def simulate(
    workload: str | Workload | WorkloadModel,
    gpu: str | Path = "v100",
    *,
    eta: float = 0.5,
    beta: float = 2.0,
    seed: int = 1,
    recurrences: int | None = None,
    profile_steps: int = DEFAULT_PROFILE_STEPS,
    max_attempts: int = 20,
    train_trace: str | Path | None = None,
    exploration: float = DEFAULT_EXPLORATION,
    accounting: str = "step",
    optimizer: type[LocalBatchSizeOptimizer] = LocalBatchSizeOptimizer,
) -> SimulationResult:
    """Simulate ``recurrences`` recurrences (default 2 x |batch sizes| x |power limits|).

    ``accounting`` is ``"step"`` (profiling and stopping charged step by step, as this package's
    optimizers run) or ``"epoch"`` (whole epochs, as the original Zeus simulator charges them).
    ``optimizer`` is the class that decides, e.g.
    :class:`~zeus_nb.optimizer.batch_size.PaperBatchSizeOptimizer` for the published policy.
    """
    import pandas as pd

    model = workload if isinstance(workload, WorkloadModel) else None
    if model is None:
        model = workload_model(workload, gpu, eta, train_trace)
    n = model.num_recurrences() if recurrences is None else recurrences
    why = f"each takes about 1 ms; the bandit settles within {model.num_recurrences()} here"
    n = integer(n, "recurrences", 1, MAX_RECURRENCES, why)
    if profile_steps < 1:
        raise InputError(f"profile_steps must be at least 1, got {profile_steps}")
    if accounting not in ACCOUNTING:
        raise InputError(f"accounting must be one of {ACCOUNTING}, got {accounting!r}")
    spec = JobSpec(
        f"sim/{model.workload}/{model.gpu}",
        tuple(model.batch_sizes),
        model.default_batch_size,
        eta=model.eta,
        beta=float(beta),
        max_power=model.max_power,
        seed=int(seed),
        exploration=float(exploration),
    )
    bso = optimizer(spec, MemoryStore())
    rng = trace_rng(seed)
    rows = []
    best_recurrence = math.inf  # cheapest recurrence so far, all its runs (epoch accounting)
    for rec in range(n):
        spent = 0.0
        for attempt in range(max_attempts):
            bs = bso.next_batch_size()
            arm = model.arms[bs]
            profile = bso.power_limit(bs) is None
            target = arm.sample_target(rng)
            if accounting == "step":
                threshold = bso.cost_threshold
                run = _run(model, arm, target, threshold, profile, profile_steps)
            else:
                run = run_by_epochs(model, arm, target, beta * best_recurrence, profile)
            epochs, t, e, reached, stopped = run
            pl = model.jit_power_limit(bs)
            if profile and epochs > 0:
                bso.set_power_limit(bs, pl)
            cost = bso.report(bs, time=t, energy=e, reached=reached, power_limit=pl)
            spent += cost
            rows.append((rec, attempt, bs, pl, epochs, t, e, cost, reached, stopped, profile))
            if reached:
                best_recurrence = min(best_recurrence, spent)
                break
    history = pd.DataFrame(rows, columns=list(HISTORY_COLUMNS))
    return SimulationResult(model, float(beta), int(seed), n, history, bso)
