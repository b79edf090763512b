"""Figures of the batch-size optimizer: how cost falls across recurrences, and what it believes."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from zeus_nb.errors import InputError
from zeus_nb.plots._common import save_figure


def _runs(source):
    """(per-run history DataFrame, baseline cost or None) from a result, optimizer or frame."""
    history = getattr(source, "history", source)
    if callable(history):  # a BatchSizeOptimizer: runs in order, one recurrence each
        frame = history()
        frame.insert(0, "recurrence", range(len(frame)))
        return frame, None
    baseline = None
    model = getattr(source, "model", None)
    if model is not None:
        a = model.arms[model.default_batch_size]
        top = int(np.argmax(a.power_limits))
        cost = model.epoch_cost(model.default_batch_size)[top]
        epochs = np.where(np.isnan(a.target_epochs), model.max_epochs, a.target_epochs)
        baseline = float(np.minimum(epochs, model.max_epochs).mean() * cost)
    return history, baseline


def bso_costs(source, *, path: str | Path | None = None, ax=None, title: str | None = None):
    """Cost of every recurrence, coloured by the batch size it finished with.

    ``source`` is a :class:`~zeus_nb.optimizer.batch_size.simulator.SimulationResult`, a
    :class:`~zeus_nb.optimizer.batch_size.BatchSizeOptimizer` (each reported run is a point) or
    a history frame with ``recurrence``, ``batch_size``, ``cost`` and ``reached`` columns.
    Failed and early-stopped runs are crosses; their cost is part of their recurrence's bar.
    """
    runs, baseline = _runs(source)
    if runs.empty:
        raise InputError("nothing to plot: no run has been reported yet")
    fig, ax = (ax.figure, ax) if ax is not None else plt.subplots(figsize=(9, 4.2))
    per_rec = runs.groupby("recurrence").agg(cost=("cost", "sum"))
    final = runs.groupby("recurrence").tail(1).set_index("recurrence")
    sizes = sorted(final["batch_size"].unique())
    cmap = plt.get_cmap("viridis", max(len(sizes), 2))
    colour = {b: cmap(i) for i, b in enumerate(sizes)}
    ax.bar(
        per_rec.index,
        per_rec["cost"],
        width=1.0,
        color=[colour[b] for b in final.loc[per_rec.index, "batch_size"]],
        alpha=0.85,
        linewidth=0,
    )
    failed = runs[~runs["reached"].astype(bool)]
    if not failed.empty:
        ax.scatter(
            failed["recurrence"],
            failed["cost"],
            marker="x",
            color="crimson",
            zorder=3,
            label="failed or stopped run",
        )
    if baseline is not None:
        ax.axhline(baseline, color="0.3", ls="--", lw=1, label="default batch size, max limit")
    handles = [plt.Rectangle((0, 0), 1, 1, color=colour[b]) for b in sizes]
    legend1 = ax.legend(
        handles,
        [str(b) for b in sizes],
        title="batch size",
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        fontsize=8,
        ncols=2 if len(sizes) > 8 else 1,
    )
    ax.add_artist(legend1)
    if not failed.empty or baseline is not None:
        ax.legend(loc="lower left", bbox_to_anchor=(1.01, 0.0), fontsize=8)
    ax.set_xlabel("recurrence")
    ax.set_ylabel("cost (J)")
    ax.set_ylim(bottom=0)  # bars: their length is the cost, so the axis starts at zero
    ax.set_title(title or "Cost per recurrence and the batch size that finished it")
    ax.grid(alpha=0.3, axis="y")
    return save_figure(fig, path)


def bso_posterior(
    optimizer, *, path: str | Path | None = None, samples: int = 4000, title: str | None = None
):
    """The bandit's belief: posterior of each batch size's mean cost, and how often each would
    be chosen next (Thompson-sampling probability, estimated by ``samples`` seeded draws).

    ``optimizer`` is a :class:`~zeus_nb.optimizer.batch_size.BatchSizeOptimizer` or a
    simulation result (its optimizer is used).
    """
    bso = getattr(optimizer, "optimizer", optimizer)
    post = bso.posterior()
    seen = post[post["observations"] > 0]
    if seen.empty:
        raise InputError("nothing to plot: no run has been reported yet")
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4), gridspec_kw={"width_ratios": [3, 2]})
    x = np.arange(len(post))
    labels = [str(b) for b in post["batch_size"]]
    surv = post["survivor"].to_numpy(bool) & (post["observations"] > 0).to_numpy()
    mean = post["mean_cost"].to_numpy(float)
    std = np.nan_to_num(post["std"].to_numpy(float))
    ax1.errorbar(
        x[surv],
        mean[surv],
        yerr=1.96 * std[surv],
        fmt="o",
        color="tab:blue",
        capsize=4,
        label="survivor: mean, 95% interval",
    )
    hist = bso.history()
    pruned_label = "pruned: runs only"
    for i, b in enumerate(post["batch_size"]):
        runs = hist[hist["batch_size"] == b]
        ok = runs["reached"].to_numpy(bool)
        c = runs["cost"].to_numpy(float)
        dx = 0.18 if surv[i] else 0.0
        ax1.plot(np.full(ok.sum(), i + dx), c[ok], "_", color="0.45", ms=8)
        ax1.plot(np.full((~ok).sum(), i + dx), c[~ok], "x", color="crimson", ms=5)
        if not surv[i] and c.size:
            ax1.plot([], [], "_", color="0.45", label=pruned_label)
            pruned_label = None
    if not hist["reached"].astype(bool).all():
        ax1.plot([], [], "x", color="crimson", label="failed or stopped run")
    rot = 45 if len(labels) > 8 else 0
    ax1.set_xticks(x, labels, rotation=rot)
    ax1.set_xlabel("batch size")
    ax1.set_ylabel("cost (J)")
    ax1.set_yscale("log")
    ax1.grid(alpha=0.3, axis="y")
    ax1.legend(fontsize=8)
    ax1.set_title("Posterior of the mean cost (ticks: runs)", fontsize=10)

    prob = np.zeros(len(post))
    if surv.any():
        rng = np.random.default_rng([bso.job.seed, 7])
        width = std[surv][:, None] * bso.job.exploration
        draws = mean[surv][:, None] + width * rng.standard_normal((int(surv.sum()), samples))
        wins = np.bincount(draws.argmin(axis=0), minlength=int(surv.sum()))
        prob[surv] = wins / samples
    ax2.bar(x, prob, color=np.where(surv, "tab:blue", "0.8"))
    ax2.set_xticks(x, labels, rotation=rot)
    ax2.set_ylim(0, 1)
    ax2.set_xlabel("batch size")
    ax2.set_ylabel("probability")
    phase = bso.phase
    ax2.set_title(
        "Chance of being chosen next" if phase == "thompson" else "Chance of being cheapest"
    )
    fig.suptitle(
        title
        or f"{bso.job.name}: {bso.num_observations} runs, {phase} phase"
        + ("" if math.isinf(bso.best_cost) else f", best {bso.best_cost:.3g} J")
    )
    fig.tight_layout()
    return save_figure(fig, path)
