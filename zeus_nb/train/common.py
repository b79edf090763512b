"""Former home of the training loop, kept so ``zeus_nb.train.common`` imports keep working.

The pieces now live in :mod:`zeus_nb.train.config` (``TrainConfig``, the command line),
:mod:`zeus_nb.train.distributed` (processes, reductions), :mod:`zeus_nb.train.loaders` (data,
evaluation), :mod:`zeus_nb.train.loop` (``run``) and :mod:`zeus_nb.train.cli` (``main``).
"""

from __future__ import annotations

from zeus_nb.train import MODES
from zeus_nb.train.cli import main
from zeus_nb.train.config import (
    DEFAULT_MAX_SLOWDOWN,
    TrainConfig,
    config_from_args,
    max_slowdown_factor,
    parser,
    with_overrides,
)
from zeus_nb.train.distributed import Context, setup, teardown, wrap_model
from zeus_nb.train.loaders import evaluate, loaders
from zeus_nb.train.loop import run

__all__ = [
    "DEFAULT_MAX_SLOWDOWN",
    "MODES",
    "Context",
    "TrainConfig",
    "config_from_args",
    "evaluate",
    "loaders",
    "main",
    "max_slowdown_factor",
    "parser",
    "run",
    "setup",
    "teardown",
    "with_overrides",
    "wrap_model",
]
