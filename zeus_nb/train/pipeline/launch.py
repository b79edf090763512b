"""Start a pipeline run from Python or a notebook and get its results back.

A notebook kernel cannot be one rank of a pipeline, so :func:`launch` runs ``python -m
zeus_nb.train.forkrun --nproc_per_node N zeus_nb.train.pipeline ...`` (torchrun's job, its ranks
forked from a process that imported PyTorch once) as a subprocess (the same streaming runner as
:func:`zeus_nb.train.launch.launch`), echoes its output and returns rank 0's results JSON as a
dictionary::

    from zeus_nb.train.pipeline.launch import launch
    r = launch(4, model="tiny-gpt", backend="sim", num_microbatches=8, plan="plan.json")
    r["iteration_time_s"], r["energy_j"]
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import fields
from pathlib import Path
from typing import Any

from zeus_nb.errors import InputError
from zeus_nb.train.launch import run_for_results
from zeus_nb.train.pipeline.trainer import PipelineConfig


def command(nproc: int, **options: Any) -> list[str]:
    """The command line for ``options`` (:class:`PipelineConfig` field names)."""

    if nproc < 1:
        raise InputError(f"nproc must be >= 1, got {nproc}")
    known = {f.name for f in fields(PipelineConfig)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise InputError(f"unknown pipeline options {unknown}; see PipelineConfig for the fields")
    PipelineConfig(**options)  # validate here, with a clear error, not in the subprocess
    flags: list[str] = []
    for name, value in options.items():
        if value is None:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        flags += ["--" + name.replace("_", "-"), str(value)]
    return [
        sys.executable,
        "-m",
        "zeus_nb.train.forkrun",
        "--nproc_per_node",
        str(nproc),
        "zeus_nb.train.pipeline",
        *flags,
    ]


def launch(
    nproc: int = 4,
    echo: bool = True,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Run the pipeline in ``nproc`` processes and return rank 0's results dictionary.

    Args:
        nproc: processes: stages x data-parallel replicas.
        echo: print the run's output as it comes.
        env: extra environment variables (e.g. ``{"ZEUS_NB_SIM_GPU": "v100"}``).
        timeout: seconds before the run is stopped with ``TrainingTimedOut``; None: no limit.
        **options: :class:`~zeus_nb.train.pipeline.PipelineConfig` fields, e.g.
            ``model="tiny-gpt", backend="sim", profile=True, num_microbatches=1``.
    """
    with tempfile.TemporaryDirectory(prefix="zeus-nb-pipeline-") as tmp:
        results = Path(options.get("results_json") or Path(tmp) / "results.json")
        options["results_json"] = str(results)
        cmd = command(nproc, **options)
        return run_for_results(cmd, results, env, echo, timeout, "pipeline run")
