"""The power-limit optimizer as a Hugging Face ``TrainerCallback``.

Trainer users have no loop of their own, so this callback also calls the GPU system's ``step()``
after every optimizer step: that advances a simulated GPU (one training step per Trainer step) and
does nothing on real GPUs. Training's end restores the GPUs' original power limits.
"""

from __future__ import annotations

try:
    from transformers import TrainerCallback
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "HFGlobalPowerLimitOptimizer needs Hugging Face transformers: pip install 'zeus-nb[hf]'"
    ) from e

from zeus_nb.optimizer.power_limit.optimizer import GlobalPowerLimitOptimizer
from zeus_nb.optimizer.power_limit.selectors import OptimumSelector


class HFGlobalPowerLimitOptimizer(TrainerCallback):
    """``GlobalPowerLimitOptimizer`` for ``transformers.Trainer(callbacks=[...])``.

    Takes the same arguments as :class:`GlobalPowerLimitOptimizer`; the wrapped optimizer is
    ``self.optimizer`` (its ``measurements`` and ``optimal_power_limit`` are there).
    """

    def __init__(
        self,
        monitor,
        optimum_selector: OptimumSelector | None = None,
        wait_steps: int = 1,
        warmup_steps: int = 10,
        profile_steps: int = 40,
        pl_step: int = 25,
        profile_path=None,
        **kwargs,
    ):
        self.optimizer = GlobalPowerLimitOptimizer(
            monitor,
            optimum_selector,
            wait_steps=wait_steps,
            warmup_steps=warmup_steps,
            profile_steps=profile_steps,
            pl_step=pl_step,
            profile_path=profile_path,
            **kwargs,
        )
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
