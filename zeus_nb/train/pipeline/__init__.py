"""Pipeline-parallel training: ``torchrun ... -m zeus_nb.train.pipeline``.

``trainer`` (configuration, the per-rank ``Trainer``, the command line), ``models`` and
``stages`` (the model cut into stages), ``layout`` (ranks and process groups), ``clock`` and
``cost`` (per-instruction measurement, modelled instruction time on simulated GPUs), ``profile``
and ``profiling`` (the instruction profile CSV), ``plan`` (frequency plans applied per rank) and
``launch`` (start a run from Python).
"""

from __future__ import annotations

from zeus_nb.train.pipeline.trainer import (
    SCHEDULES,
    PipelineConfig,
    Trainer,
    config_from_args,
    main,
    parser,
    run,
    train,
)

__all__ = [
    "SCHEDULES",
    "PipelineConfig",
    "Trainer",
    "config_from_args",
    "main",
    "parser",
    "run",
    "train",
]
