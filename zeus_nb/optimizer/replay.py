"""Run the power-limit optimizer over a replayed ZeusMonitor log, without a GPU.

The replayed GPUs are a device backend (:mod:`zeus_nb.device.replay`) that the ordinary
:class:`~zeus_nb.monitor.ZeusMonitor` reads; this module only drives the optimizer over one and
keeps the names older code imports from here.
"""

from __future__ import annotations

from pathlib import Path

from zeus_nb.device.replay import ProfileLog, ReplayGPU, ReplaySystem, load_profile_log
from zeus_nb.monitor import ZeusMonitor
from zeus_nb.optimizer.power_limit import GlobalPowerLimitOptimizer

__all__ = [
    "ProfileLog",
    "ReplayGPU",
    "ReplayMonitor",
    "ReplaySystem",
    "load_profile_log",
    "replay_optimizer",
]


class ReplayMonitor(ZeusMonitor):
    """A :class:`ZeusMonitor` over a fresh :class:`ReplaySystem`, plus :meth:`step`.

    Kept for code written before replay became a backend; new code writes
    ``ZeusMonitor(system=ReplaySystem(log, steps_per_window))``.
    """

    def __init__(
        self, log: str | Path | ProfileLog, steps_per_window: int = 40, gpu_name: str | None = None
    ):
        super().__init__(system=ReplaySystem(log, steps_per_window, gpu_name))
        self.log = self.system.log

    def step(self, n: int = 1) -> None:
        """Advance the replay by ``n`` training steps."""
        self.system.step(n)


def replay_optimizer(
    log: str | Path | ProfileLog,
    optimum_selector=None,
    adaptive: bool = False,
    warmup_steps: int = 10,
    profile_steps: int = 40,
    pl_step: int = 25,
    noise_margin: float = 0.05,
    max_steps: int = 1_000_000,
):
    """Run a :class:`GlobalPowerLimitOptimizer` over a replayed log until it chooses.

    Returns the finished optimizer: ``measurements``, ``optimal_power_limit``, ``abandoned``,
    ``profiling_time`` and ``profiling_energy`` say what it saw and spent.
    """

    system = ReplaySystem(log, steps_per_window=profile_steps)
    plo = GlobalPowerLimitOptimizer(
        ZeusMonitor(system=system),
        optimum_selector,
        wait_steps=0,
        warmup_steps=warmup_steps,
        profile_steps=profile_steps,
        pl_step=pl_step,
        adaptive=adaptive,
        noise_margin=noise_margin,
        verbose=False,
    )
    steps = 0
    while not plo.done:
        if steps >= max_steps:
            raise RuntimeError(f"the optimizer did not finish within {max_steps} steps")
        plo.on_step_begin()
        system.step()
        plo.on_step_end()
        steps += 1
    return plo
