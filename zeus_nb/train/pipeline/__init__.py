"""Pipeline-parallel training: ``torchrun ... -m zeus_nb.train.pipeline``.

``trainer`` (configuration, the per-rank ``Trainer``, the command line), ``models`` and
``stages`` (the model cut into stages), ``layout`` (ranks and process groups), ``clock`` and
``cost`` (per-instruction measurement, modelled instruction time on simulated GPUs), ``profile``
and ``profiling`` (the instruction profile CSV), ``plan`` (frequency plans applied per rank) and
``launch`` (start a run from Python).
"""

from __future__ import annotations

import importlib
from typing import Any

# names of the command line and the trainer, loaded on first use (the package imports nothing)
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


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.trainer"), name)
