"""Pluggable policies of the legacy simulator (Zeus's ``zeus._legacy.policy``).

:class:`BatchSizeOptimizer` and :class:`PowerLimitOptimizer` are the interfaces;
:class:`PruningGTSBatchSizeOptimizer` and :class:`JITPowerLimitOptimizer` the Zeus paper's
policies.
"""

from zeus_nb._legacy.policy.interface import BatchSizeOptimizer, PowerLimitOptimizer
from zeus_nb._legacy.policy.optimizer import (
    JITPowerLimitOptimizer,
    PruningGTSBatchSizeOptimizer,
)

__all__ = [
    "BatchSizeOptimizer",
    "JITPowerLimitOptimizer",
    "PowerLimitOptimizer",
    "PruningGTSBatchSizeOptimizer",
]
