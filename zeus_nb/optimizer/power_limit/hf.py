"""The power-limit optimizer as a Hugging Face ``TrainerCallback``.

Importable without transformers, as Zeus's is: the class derives from ``TrainerCallback`` where
transformers is installed and from ``object`` where it is not, and constructing it then raises
an error that names the extra to install. Its constructor takes exactly
:class:`GlobalPowerLimitOptimizer`'s arguments (the same signature, Zeus's test compares them).

Trainer users have no loop of their own, so this callback also calls the GPU system's ``step()``
after every optimizer step: that advances a simulated GPU (one training step per Trainer step) and
does nothing on real GPUs. Training's end restores the GPUs' original power limits.
"""

from __future__ import annotations

import inspect

from zeus_nb.errors import ExtraMissingError
from zeus_nb.optimizer.power_limit.optimizer import GlobalPowerLimitOptimizer

try:
    from transformers import TrainerCallback

    transformers_available = True
except ImportError:  # pragma: no cover - depends on the environment
    TrainerCallback = object  # type: ignore[misc, assignment]
    transformers_available = False


class HFGlobalPowerLimitOptimizer(TrainerCallback):  # type: ignore[misc, valid-type]
    """``GlobalPowerLimitOptimizer`` for ``transformers.Trainer(callbacks=[...])``.

    Takes the same arguments as :class:`GlobalPowerLimitOptimizer`; the wrapped optimizer is
    ``self.optimizer`` (its ``measurements`` and ``optimal_power_limit`` are there).
    """

    def __init__(self, monitor, *args, **kwargs):
        if not transformers_available:
            raise ExtraMissingError(
                "HFGlobalPowerLimitOptimizer needs Hugging Face transformers: "
                "pip install 'zeus-nb[hf]'"
            )
        self.optimizer = GlobalPowerLimitOptimizer(monitor, *args, **kwargs)
        self._system = getattr(monitor, "system", None)

    def on_epoch_begin(self, args, state, control, **kwargs):
        self.optimizer.on_epoch_begin()

    def on_epoch_end(self, args, state, control, **kwargs):
        self.optimizer.on_epoch_end()

    def on_step_begin(self, args, state, control, **kwargs):
        self.optimizer.on_step_begin()

    def on_step_end(self, args, state, control, **kwargs):
        if self._system is not None:
            self._system.step()  # simulated GPUs advance; real GPUs ignore it
        self.optimizer.on_step_end()

    def on_train_end(self, args, state, control, **kwargs):
        self.optimizer.close()


# The same parameters as the optimizer's, defaults and annotations included.
HFGlobalPowerLimitOptimizer.__init__.__signature__ = inspect.signature(  # type: ignore[attr-defined]
    GlobalPowerLimitOptimizer.__init__
)
