"""Offline instruction profiling: every stage's forward and backward at each SM clock.

For each clock still missing from the profile file, every rank locks its GPU at that clock, runs
``num_warmup_steps`` iterations, then averages its instructions over ``num_prof_steps``
iterations (one microbatch each, so no two instructions overlap). Rank 0 gathers the rows of all
stages (averaging data-parallel replicas) and appends them to the CSV before the next clock, so an
interrupted run loses at most one clock and a rerun picks up where it stopped.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from zeus_nb.device.guard import SettingsGuard
from zeus_nb.train.pipeline.profile import append_rows, clocks_to_profile, parse_clocks
from zeus_nb.train.pipeline.results import describe, write_results
from zeus_nb.utils.framework import gather

log = logging.getLogger(__name__)

PROBE_SECONDS = 1.0  # a GPU that never waited idles this long to measure its blocking power


def profile_path(trainer) -> Path:
    config = trainer.config
    default = f"runs/profile_{config.model}_mb{config.microbatch_size}.csv"
    return Path(config.profile_path or default)


def _rows_at(trainer, clock: int, steps: int) -> list[dict[str, Any]]:
    stage = trainer.layout.stage
    rec = trainer.clock.record
    rows = []
    for name in ("forward", "backward"):
        t, e = rec.mean(name)
        rows.append(
            {"stage": stage, "instruction": name, "frequency": clock, "time": t, "energy": e}
        )
    t_block, e_block = rec.blocking_time, rec.blocking_energy
    if t_block <= 0:  # a lone stage never waits: measure the blocking power directly
        t0, e0 = trainer.system.clock(), trainer.clock.gpu.energy()
        if trainer.clock.simulated:
            trainer.clock.wait_until(t0 + PROBE_SECONDS)
        else:
            import time

            time.sleep(PROBE_SECONDS)
        t_block = trainer.system.clock() - t0
        e_block = trainer.clock.gpu.energy() - e0
    rows.append(
        {
            "stage": stage,
            "instruction": "blocking",
            "frequency": clock,
            "time": t_block / steps,
            "energy": e_block / steps,
        }
    )
    return rows


def _average_replicas(gathered: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    by_key: dict[tuple, list[dict[str, Any]]] = {}
    for rows in gathered:
        for r in rows:
            by_key.setdefault((r["stage"], r["instruction"], r["frequency"]), []).append(r)
    out = []
    for key in sorted(
        by_key, key=lambda k: (k[0], ("forward", "backward", "blocking").index(k[1]))
    ):
        rs = by_key[key]
        out.append(
            {
                **rs[0],
                "time": sum(r["time"] for r in rs) / len(rs),
                "energy": sum(r["energy"] for r in rs) / len(rs),
            }
        )
    return out


def _save(path: Path, rows: list, metadata: dict, written: int) -> tuple[int, list]:
    """Append ``rows``; on an I/O error warn and keep them for the next clock's write."""
    try:
        return written + append_rows(path, rows, metadata), []
    except OSError as e:
        log.warning(
            "could not write %d profile row(s) to %s (%s); profiling goes on and tries again "
            "after the next clock (rows still unwritten at the end go into the results JSON)",
            len(rows),
            path,
            e.strerror or e,
        )
        return written, rows


def profile(trainer) -> dict[str, Any]:
    """Profile the clocks still missing from the CSV; rank 0 returns a summary and writes it."""
    import torch.distributed as dist

    config, layout = trainer.config, trainer.layout
    path = profile_path(trainer)
    clocks = parse_clocks(config.profile_clocks, trainer.clock.gpu.supported_clocks())
    todo: list[Any] = [clocks_to_profile(path, clocks, layout.pp) if layout.rank == 0 else None]
    dist.broadcast_object_list(todo, src=0)
    metadata = {
        "model": config.model,
        "microbatch_size": config.microbatch_size,
        "stages": layout.pp,
        "partition": config.partition_method,
        "gpu": trainer.clock.gpu.name.replace(" ", "_"),
        "steps": config.num_prof_steps,
    }
    written = 0
    pending: list[dict[str, Any]] = []  # rows a failed write kept for the next try
    step = 0
    # the original clocks come back at the end, on errors and signals, or by `zeus-nb restore`
    guard = SettingsGuard([trainer.clock.gpu], ("locked_clocks",), backend=trainer.system.backend)
    guard.record()
    try:
        for clock in todo[0]:
            trainer.clock.lock_clock(clock)
            for _ in range(config.num_warmup_steps):
                trainer.step(step)
                step += 1
            trainer.clock.reset()
            for _ in range(config.num_prof_steps):
                trainer.step(step)
                step += 1
            gathered = gather(_rows_at(trainer, clock, config.num_prof_steps))
            if layout.rank == 0:
                pending += _average_replicas(gathered)
                written, pending = _save(path, pending, metadata, written)
    finally:
        guard.restore()
    results = describe(trainer)
    results.update(
        profile_path=str(path),
        clocks_requested=clocks,
        clocks_profiled=todo[0],
        rows_written=written,
    )
    if pending:  # never lost: the results JSON carries the rows the profile could not take
        results["unsaved_rows"] = pending
    write_results(trainer, results)
    return results
