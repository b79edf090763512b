"""The results of a training run: one dictionary for the whole job, written by rank 0 as JSON."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zeus_nb.utils.files import atomic_write
from zeus_nb.utils.framework import gather

if TYPE_CHECKING:
    from zeus_nb.device import GPU
    from zeus_nb.monitor import Measurement
    from zeus_nb.train.config import TrainConfig
    from zeus_nb.train.distributed import Context


def rank_summary(ctx: Context, gpu: GPU, plo: Any, total: Measurement) -> dict[str, Any]:
    """What this rank's GPU ended at and spent over the whole run."""
    return {
        "rank": ctx.rank,
        "local_rank": ctx.local_rank,
        "gpu_index": ctx.gpu_index,
        "power_limit_w": gpu.get_power_limit(),
        "optimal_power_limit_w": plo.optimal_power_limit,
        "time_s": total.time,
        "energy_j": total.total_energy,
    }


def profile(plo: Any) -> list[dict[str, float]]:
    """What the optimizer measured per limit (all ranks aggregated)."""
    return [
        {
            "power_limit_w": m.power_limit,
            "time_s": m.time,
            "energy_j": m.energy,
            "num_gpus": m.num_gpus,
        }
        for m in plo.measurements
    ]


def job_results(
    config: TrainConfig,
    ctx: Context,
    *,
    backend: str,
    gpu: GPU,
    plo: Any,
    num_classes: int,
    steps: int,
    factor: float,
    history: list[dict[str, Any]],
    total: Measurement,
    wall: float,
) -> dict[str, Any]:
    """The job's results: every rank's totals gathered, time the slowest's, energy the sum.

    A collective: every rank calls it.
    """
    ranks = gather(rank_summary(ctx, gpu, plo, total))
    return {
        "mode": ctx.mode,
        "world_size": ctx.world_size,
        "arch": config.arch,
        "data": str(config.data),
        "num_classes": num_classes,
        "device": ctx.device.type,
        "gpu_backend": backend,
        "gpu_name": gpu.name,
        "max_slowdown": factor,
        "steps_per_epoch": steps,
        "epochs": history,
        "accuracy": history[-1]["val_accuracy"],
        "time_s": max(r["time_s"] for r in ranks),
        "energy_j": sum(r["energy_j"] for r in ranks),
        "wall_time_s": wall,
        "power_limit_w": ranks[ctx.rank]["power_limit_w"],
        "optimal_power_limit_w": plo.optimal_power_limit,
        "profiling_done": plo.optimal_power_limit is not None,
        "profile": profile(plo),
        "profile_skipped_w": sorted(plo.abandoned, reverse=True),
        "profiling_time_s": plo.profiling_time,
        "profiling_energy_j": plo.profiling_energy,
        "ranks": ranks,
        "config": asdict(config),
    }


def results_path(config: TrainConfig, mode: str) -> Path:
    """Where rank 0 writes the results: ``config.results``, else ``runs/train_<mode>.json``."""
    return Path(config.results or f"runs/train_{mode}.json")


def write(results: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(results, indent=2) + "\n")
