"""Optimizers that change how training runs to save energy.

``GlobalPowerLimitOptimizer`` and the optimum selectors live in :mod:`.power_limit`;
``HFGlobalPowerLimitOptimizer`` (needs ``pip install 'zeus-nb[hf]'``) is loaded on first use;
``BatchSizeOptimizer`` (recurring jobs) lives in :mod:`.batch_size`.
"""

from __future__ import annotations

from zeus_nb.optimizer.batch_size import BatchSizeOptimizer
from zeus_nb.optimizer.power_limit import (
    Energy,
    GlobalPowerLimitOptimizer,
    MaxSlowdownConstraint,
    OptimumSelector,
    PowerLimitMeasurement,
    ProfileError,
    Time,
    ZeusCost,
)

__all__ = [
    "BatchSizeOptimizer",
    "Energy",
    "GlobalPowerLimitOptimizer",
    "HFGlobalPowerLimitOptimizer",
    "MaxSlowdownConstraint",
    "OptimumSelector",
    "PowerLimitMeasurement",
    "ProfileError",
    "Time",
    "ZeusCost",
]


def __getattr__(name: str):
    if name == "HFGlobalPowerLimitOptimizer":
        from zeus_nb.optimizer.hf import HFGlobalPowerLimitOptimizer

        return HFGlobalPowerLimitOptimizer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
