"""``BatchSizeOptimizer``: one name for the optimizer's two forms, chosen by the call's shape.

zeus-nb's own call, ``BatchSizeOptimizer(job, store, batch_sizes=..., default_batch_size=...)``,
builds the recurrence-level :class:`~.optimizer.LocalBatchSizeOptimizer`, which runs the bandit in
this process on a store. Zeus's call, ``BatchSizeOptimizer(monitor, server_url, job, rank=0)``,
builds Zeus's in-training client, :class:`~.client.BatchSizeOptimizer` (a Callback that asks a
server or a store URL). Zeus exports the client under this name; zeus-nb's notebooks use the
recurrence-level form. A function decides, so neither class has to construct the other.
"""

from __future__ import annotations

from typing import Any

from zeus_nb.optimizer.batch_size.client import BatchSizeOptimizer as ClientBatchSizeOptimizer
from zeus_nb.optimizer.batch_size.optimizer import LocalBatchSizeOptimizer
from zeus_nb.optimizer.batch_size.store import JobSpec

__all__ = ["BatchSizeOptimizer", "is_zeus_call"]


def is_zeus_call(args: tuple, kwargs: dict) -> bool:
    """Whether the arguments are Zeus's client call shape ``(monitor, server_url, job, rank)``.

    The recurrence-level shape starts with a job name or a store ``JobSpec``; Zeus's with a
    monitor (or names ``monitor=``, ``server_url=``, ``rank=``).
    """
    if {"monitor", "server_url", "rank"} & set(kwargs):
        return True
    first = args[0] if args else kwargs.get("job")
    return first is not None and not isinstance(first, (str, JobSpec))


def BatchSizeOptimizer(  # noqa: N802 (Zeus's public name for what it builds)
    *args: Any, **kwargs: Any
) -> LocalBatchSizeOptimizer | ClientBatchSizeOptimizer:
    """The batch-size optimizer for this call: Zeus's client or the recurrence-level bandit.

    ``BatchSizeOptimizer(monitor, server_url, job, rank=0)`` (Zeus's shape) returns
    :class:`zeus_nb.optimizer.batch_size.client.BatchSizeOptimizer`;
    ``BatchSizeOptimizer(job_name_or_spec, store, ...)`` returns
    :class:`zeus_nb.optimizer.batch_size.optimizer.LocalBatchSizeOptimizer` (see its help for
    the arguments).
    """
    if is_zeus_call(args, kwargs):
        return ClientBatchSizeOptimizer(*args, **kwargs)
    return LocalBatchSizeOptimizer(*args, **kwargs)
