"""What a pipeline run reports: its description, each rank's record, the results JSON.

Training (:mod:`~zeus_nb.train.pipeline.trainer`) and instruction profiling
(:mod:`~zeus_nb.train.pipeline.profiling`) both end here. The trainer runs the profiler (it
imports :mod:`.profiling` when a run profiles); the profiler never imports the trainer, and
this module imports neither (the trainer only as a type).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zeus_nb.train.pipeline.models import table_parameters
from zeus_nb.utils.files import atomic_write

if TYPE_CHECKING:
    from zeus_nb.train.pipeline.trainer import Trainer

log = logging.getLogger("zeus_nb.train.pipeline.trainer")  # one logger for the run's lines


def describe(trainer: Trainer) -> dict[str, Any]:
    """The run's model, layout, partition and configuration: the head of its results JSON."""

    config, layout = trainer.config, trainer.layout
    return {
        "mode": "pipeline",
        "model": config.model,
        "parameters": table_parameters(trainer.model_config),
        "schedule": config.schedule,
        "pp": layout.pp,
        "dp": layout.dp,
        "world_size": layout.world_size,
        "microbatch_size": config.microbatch_size,
        "num_microbatches": config.num_microbatches,
        "partition_method": config.partition_method,
        "partition": [[r.start, r.stop] for r in trainer.partition],
        "gpu_backend": trainer.system.backend,
        "gpu_name": trainer.clock.gpu.name,
        "config": asdict(config),
    }


def rank_record(trainer: Trainer, iterations: int) -> dict[str, Any]:
    """This rank's per-iteration time and energy by instruction, for rank 0 to gather."""
    rec = trainer.clock.record
    out: dict[str, Any] = {
        "rank": trainer.layout.rank,
        "stage": trainer.layout.stage,
        "replica": trainer.layout.replica,
        "flops": {"forward": trainer.work.forward, "backward": trainer.work.backward},
        # replicas of a stage must hold the same weights: data parallelism averages gradients
        "parameter_sum": float(sum(p.detach().double().sum() for p in trainer.module.parameters())),
        "blocking_time_s": rec.blocking_time / iterations,
        "blocking_energy_j": rec.blocking_energy / iterations,
    }
    for name in ("forward", "backward"):
        out[f"{name}_time_s"] = rec.time[name] / iterations
        out[f"{name}_energy_j"] = rec.energy[name] / iterations
    out["energy_j"] = out["forward_energy_j"] + out["backward_energy_j"] + out["blocking_energy_j"]
    return out


def write_results(trainer: Trainer, results: dict[str, Any]) -> None:
    """Rank 0 writes the results JSON and logs one line about it."""
    if trainer.layout.rank != 0:
        return
    path = Path(trainer.config.results_json or f"runs/pipeline_{trainer.config.model}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(results, indent=2) + "\n")
    if trainer.config.profile:
        what = f"{len(results.get('clocks_profiled', []))} clock(s) profiled"
    else:
        what = f"iteration {results['iteration_time_s']:.6g} s, {results['energy_j']:.6g} J"
    kind = "profile" if trainer.config.profile else "training"
    log.info(
        "zeus-nb pipeline %s: %s, %d stages x %d replicas; %s; results in %s",
        kind,
        trainer.config.model,
        trainer.layout.pp,
        trainer.layout.dp,
        what,
        path,
    )
