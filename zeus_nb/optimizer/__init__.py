"""Optimizers that change how training runs to save energy.

``GlobalPowerLimitOptimizer``, its selectors and ``HFGlobalPowerLimitOptimizer`` (needs
``pip install 'zeus-nb[hf]'``) live in :mod:`.power_limit`; ``BatchSizeOptimizer`` (recurring
jobs) lives in :mod:`.batch_size`. Every name loads on first use: importing ``ZeusCost`` loads
neither sqlite3 nor numpy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_POWER_LIMIT = "zeus_nb.optimizer.power_limit"
# public name -> package that exports it
_LAZY = {
    "BatchSizeOptimizer": "zeus_nb.optimizer.batch_size",
    "Energy": _POWER_LIMIT,
    "GlobalPowerLimitOptimizer": _POWER_LIMIT,
    "HFGlobalPowerLimitOptimizer": _POWER_LIMIT,
    "MaxSlowdownConstraint": _POWER_LIMIT,
    "OptimumSelector": _POWER_LIMIT,
    "PowerLimitMeasurement": _POWER_LIMIT,
    "ProfileError": _POWER_LIMIT,
    "Time": _POWER_LIMIT,
    "ZeusCost": _POWER_LIMIT,
}

if TYPE_CHECKING:
    from zeus_nb.optimizer.batch_size import BatchSizeOptimizer as BatchSizeOptimizer
    from zeus_nb.optimizer.power_limit import Energy as Energy
    from zeus_nb.optimizer.power_limit import GlobalPowerLimitOptimizer as GlobalPowerLimitOptimizer
    from zeus_nb.optimizer.power_limit import (
        HFGlobalPowerLimitOptimizer as HFGlobalPowerLimitOptimizer,
    )
    from zeus_nb.optimizer.power_limit import MaxSlowdownConstraint as MaxSlowdownConstraint
    from zeus_nb.optimizer.power_limit import OptimumSelector as OptimumSelector
    from zeus_nb.optimizer.power_limit import PowerLimitMeasurement as PowerLimitMeasurement
    from zeus_nb.optimizer.power_limit import ProfileError as ProfileError
    from zeus_nb.optimizer.power_limit import Time as Time
    from zeus_nb.optimizer.power_limit import ZeusCost as ZeusCost

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    package = _LAZY.get(name)
    if package is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(package), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
