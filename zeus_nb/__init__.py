"""zeus-nb: measure and optimize the energy of deep-learning training, from notebooks.

Importing this package is cheap: it imports neither torch nor matplotlib. Public names are
loaded on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> module that defines it
_LAZY = {
    "ZeusMonitor": "zeus_nb.monitor",
    "Measurement": "zeus_nb.monitor",
    "step": "zeus_nb.device",
    "use_simulated": "zeus_nb.device",
    "ZeusNbError": "zeus_nb.errors",
    "run_sweep": "zeus_nb.runner.sweep",
    "BatchSizeOptimizer": "zeus_nb.optimizer.batch_size",
    "record": "zeus_nb.runner.records",
    "collect": "zeus_nb.runner.records",
    "notebook_setup": "zeus_nb.runner.setup",
}

if TYPE_CHECKING:
    from zeus_nb.device import step as step
    from zeus_nb.device import use_simulated as use_simulated
    from zeus_nb.errors import ZeusNbError as ZeusNbError
    from zeus_nb.monitor import Measurement as Measurement
    from zeus_nb.monitor import ZeusMonitor as ZeusMonitor
    from zeus_nb.optimizer.batch_size import BatchSizeOptimizer as BatchSizeOptimizer
    from zeus_nb.runner.records import collect as collect
    from zeus_nb.runner.records import record as record
    from zeus_nb.runner.setup import notebook_setup as notebook_setup
    from zeus_nb.runner.sweep import run_sweep as run_sweep

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'zeus_nb' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
