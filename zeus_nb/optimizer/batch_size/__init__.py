"""The batch-size optimizer for recurring training jobs (Zeus, NSDI '23, section 4).

Modules: :mod:`.explorer` (the pruning phase), :mod:`.optimizer` (:class:`BatchSizeOptimizer`:
pruning, then Gaussian Thompson sampling over the survivors), :mod:`.paper`
(:class:`PaperBatchSizeOptimizer`, the published policy as a baseline), :mod:`.store` (the job's
observation log, in memory or in SQLite; its settings record is ``store.JobSpec``),
:mod:`.trials`, :mod:`.simulator` (recurrences replayed on the Zeus traces; loaded on first
use), Zeus's client modules: :mod:`.client` (with :mod:`.remote`, its requests to a server),
:mod:`.common` (``JobSpec``, exported here as in Zeus) and :mod:`.exceptions`, and Zeus's
optimizer server, :mod:`.server` (never imported from here: it needs the ``server`` extra).

``BatchSizeOptimizer`` (:mod:`.factory`) builds the optimizer for the call:
``BatchSizeOptimizer(job_name, store, ...)`` the recurrence-level
:class:`.optimizer.LocalBatchSizeOptimizer`; ``BatchSizeOptimizer(monitor, server_url, job,
rank=0)`` (Zeus's call) Zeus's in-training client, :class:`.client.BatchSizeOptimizer`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from zeus_nb.optimizer.batch_size.common import JobSpec
from zeus_nb.optimizer.batch_size.explorer import PruningExplorer
from zeus_nb.optimizer.batch_size.factory import BatchSizeOptimizer
from zeus_nb.optimizer.batch_size.optimizer import VARIANCE_PRIOR_WEIGHT, LocalBatchSizeOptimizer
from zeus_nb.optimizer.batch_size.paper import PaperBatchSizeOptimizer
from zeus_nb.optimizer.batch_size.sqlite_store import SQLiteStore
from zeus_nb.optimizer.batch_size.store import (
    DEFAULT_EXPLORATION,
    MemoryStore,
    Observation,
    StoreError,
)

_SIMULATOR = ("ACCOUNTING", "SimulationResult", "WorkloadModel", "simulate", "workload_model")

if TYPE_CHECKING:
    from zeus_nb.optimizer.batch_size.simulator import ACCOUNTING as ACCOUNTING
    from zeus_nb.optimizer.batch_size.simulator import SimulationResult as SimulationResult
    from zeus_nb.optimizer.batch_size.simulator import WorkloadModel as WorkloadModel
    from zeus_nb.optimizer.batch_size.simulator import simulate as simulate
    from zeus_nb.optimizer.batch_size.simulator import workload_model as workload_model

__all__ = [
    "DEFAULT_EXPLORATION",
    "VARIANCE_PRIOR_WEIGHT",
    "BatchSizeOptimizer",
    "JobSpec",
    "LocalBatchSizeOptimizer",
    "MemoryStore",
    "Observation",
    "PaperBatchSizeOptimizer",
    "PruningExplorer",
    "SQLiteStore",
    "StoreError",
    *_SIMULATOR,
]


def __getattr__(name: str) -> Any:
    if name in _SIMULATOR:
        return getattr(importlib.import_module(f"{__name__}.simulator"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
