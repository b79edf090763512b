"""Profile power limits on a replayed Zeus log (real A40 measurements), for the fault tests."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

LOG = resources.files("zeus_nb") / "resources" / "zeus_profiles" / "A40+resnet50+gpu0.csv"


def profile_on_replayed_log(profile_path: Path, max_steps: int = 2000):
    """A GlobalPowerLimitOptimizer run over the log until it chose (at most ``max_steps``)."""
    from zeus_nb.device.replay import ReplaySystem
    from zeus_nb.monitor import ZeusMonitor
    from zeus_nb.optimizer.power_limit import GlobalPowerLimitOptimizer

    system = ReplaySystem(str(LOG), steps_per_window=40)
    plo = GlobalPowerLimitOptimizer(
        ZeusMonitor(system=system),
        wait_steps=0,
        profile_steps=40,
        profile_path=profile_path,
        verbose=False,
    )
    for _ in range(max_steps):
        if plo.done:
            break
        plo.on_step_begin()
        system.step()
        plo.on_step_end()
    return plo
