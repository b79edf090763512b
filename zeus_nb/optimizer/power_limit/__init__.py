"""The power-limit optimizer: profile GPU power limits while training, keep the optimum.

Modules: :mod:`.selectors` (how to choose among profiled limits), :mod:`.registry` (selectors by
name with their knobs' ranges, for the CLI and widgets), :mod:`.policy` (when adaptive profiling
may skip work), :mod:`.optimizer` (the training-loop state machine), :mod:`.profile_file` (saved
profiles), :mod:`.hf` (the Hugging Face ``TrainerCallback``; importable without transformers,
usable with ``pip install 'zeus-nb[hf]'``)
and :mod:`.synthetic` (synthetic profiles to evaluate adaptive profiling on).

Names load on first use, so importing a selector imports neither the optimizer's device code nor
transformers.
"""

from __future__ import annotations

import atexit  # noqa: F401 - the optimizer registers its exit hook through this name, as Zeus's
import importlib
from typing import TYPE_CHECKING, Any

# public name -> submodule that defines it; the one place HFGlobalPowerLimitOptimizer is exported
_LAZY = {
    "PowerLimitMeasurement": "selectors",
    "OptimumSelector": "selectors",
    "Energy": "selectors",
    "Time": "selectors",
    "ZeusCost": "selectors",
    "MaxSlowdownConstraint": "selectors",
    "ProfileError": "profile_file",
    "GlobalPowerLimitOptimizer": "optimizer",
    "AdaptivePolicy": "policy",
    "Ready": "states",
    "Warmup": "states",
    "Profiling": "states",
    "Done": "states",
    "Phase": "states",
    "HFGlobalPowerLimitOptimizer": "hf",
}

if TYPE_CHECKING:
    from zeus_nb.optimizer.power_limit.hf import (
        HFGlobalPowerLimitOptimizer as HFGlobalPowerLimitOptimizer,
    )
    from zeus_nb.optimizer.power_limit.optimizer import (
        GlobalPowerLimitOptimizer as GlobalPowerLimitOptimizer,
    )
    from zeus_nb.optimizer.power_limit.policy import AdaptivePolicy as AdaptivePolicy
    from zeus_nb.optimizer.power_limit.profile_file import ProfileError as ProfileError
    from zeus_nb.optimizer.power_limit.selectors import Energy as Energy
    from zeus_nb.optimizer.power_limit.selectors import (
        MaxSlowdownConstraint as MaxSlowdownConstraint,
    )
    from zeus_nb.optimizer.power_limit.selectors import OptimumSelector as OptimumSelector
    from zeus_nb.optimizer.power_limit.selectors import (
        PowerLimitMeasurement as PowerLimitMeasurement,
    )
    from zeus_nb.optimizer.power_limit.selectors import Time as Time
    from zeus_nb.optimizer.power_limit.selectors import ZeusCost as ZeusCost

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
