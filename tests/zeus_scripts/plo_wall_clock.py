"""A Zeus-style training loop with the power-limit optimizer; only its imports name zeus_nb.

It is written the way Zeus's documentation writes it (ZEUS_MAX_SLOWDOWN read with get_env, the
four hooks around every step) and does no zeus-nb-specific call: run it with
ZEUS_NB_BACKEND=sim ZEUS_NB_SIM_CLOCK=wall. Its "training step" is CPU work of random length, as
on a busy machine. It prints the chosen limit in W.
"""

import random
import time

from zeus_nb.monitor import ZeusMonitor
from zeus_nb.optimizer.power_limit import GlobalPowerLimitOptimizer, MaxSlowdownConstraint
from zeus_nb.utils.env import get_env


def train_one_step(rng: random.Random) -> None:
    deadline = time.perf_counter() + rng.uniform(0.0005, 0.003)
    while time.perf_counter() < deadline:
        pass


def main() -> None:
    monitor = ZeusMonitor(gpu_indices=[0])
    plo = GlobalPowerLimitOptimizer(
        monitor,
        MaxSlowdownConstraint(factor=get_env("ZEUS_MAX_SLOWDOWN", float, 1.1)),
    )
    rng = random.Random()
    for _epoch in range(2):  # an epoch holds every limit's 50 steps, as Zeus's optimizer needs
        plo.on_epoch_begin()
        for _step in range(400):
            plo.on_step_begin()
            train_one_step(rng)
            plo.on_step_end()
        plo.on_epoch_end()
    print(plo.state.optimal_power_limit // 1000)


if __name__ == "__main__":
    main()
