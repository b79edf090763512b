"""Work is sized in steps, never in seconds: a run finishes profiling on any machine load."""

from __future__ import annotations

import pytest

from zeus_nb import device
from zeus_nb.monitor import ZeusMonitor
from zeus_nb.optimizer.power_limit import GlobalPowerLimitOptimizer, MaxSlowdownConstraint
from zeus_nb.optimizer.power_limit.states import steps_to_profile
from zeus_nb.train.config import TrainConfig, steps_per_epoch, train_size_to_profile


def run_steps(steps: int, **knobs) -> GlobalPowerLimitOptimizer:
    """``steps`` training steps in one epoch with the (non-adaptive) optimizer."""
    system = device.use_simulated(gpu="a40", workload="imagenet")
    plo = GlobalPowerLimitOptimizer(
        ZeusMonitor(gpu_indices=[0]), MaxSlowdownConstraint(1.1), **knobs
    )
    plo.on_epoch_begin()
    for _ in range(steps):
        plo.on_step_begin()
        system.step()
        plo.on_step_end()
    plo.on_epoch_end()
    plo.close()
    return plo


@pytest.mark.parametrize(
    "knobs",
    [
        {},
        {"wait_steps": 1, "warmup_steps": 1, "profile_steps": 2, "pl_step": 50},
        {"wait_steps": 0, "warmup_steps": 0, "profile_steps": 3, "pl_step": 30},
    ],
)
def test_steps_to_profile_is_exactly_what_the_optimizer_needs(knobs):
    probe = run_steps(1, **knobs)
    needed = steps_to_profile(probe.min_limit, probe.max_limit, **knobs)
    assert (
        len(probe.power_limits) * (knobs.get("warmup_steps", 10) + knobs.get("profile_steps", 40))
        < needed
    )
    assert run_steps(needed, **knobs).done
    short = run_steps(needed - 1, **knobs)
    assert not short.done and short.optimal_power_limit is None


@pytest.mark.parametrize(
    "world_size,limits", [(1, (200.0, 700.0)), (2, (100.0, 300.0)), (4, (100.0, 300.0))]
)
def test_a_training_run_is_sized_to_finish_profiling(world_size, limits):
    config = TrainConfig(epochs=2, train_size=512, warmup_steps=1, profile_steps=2, pl_step=50)
    size = train_size_to_profile(config, world_size, *limits)
    sized = TrainConfig(epochs=2, train_size=size, warmup_steps=1, profile_steps=2, pl_step=50)
    needed = steps_to_profile(*limits, 50, 1, 1, 2)
    assert sized.epochs * steps_per_epoch(sized, world_size) >= needed
    # and no larger than it must be: one epoch step fewer would not do
    assert sized.epochs * (steps_per_epoch(sized, world_size) - 1) < needed or size == 512


def test_a_run_too_short_to_profile_says_so_and_names_no_limit(tmp_path, caplog):
    """The FSDP example once printed "power limit 100 W" with profiling unfinished: the GPU's
    limit at the end was one being profiled, not a choice."""
    import logging

    from zeus_nb.train.loop import run

    system = device.create("sim")
    config = TrainConfig(
        epochs=1,
        train_size=64,
        val_size=32,
        backend="sim",
        progress=False,
        results=str(tmp_path / "r.json"),
        threads=1,
    )
    with caplog.at_level(logging.INFO, logger="zeus_nb.train.loop"):
        r = run("single", config, system=system)
    assert not r["profiling_done"] and r["optimal_power_limit_w"] is None
    (done,) = [m for m in caplog.messages if m.startswith("done:")]
    assert "no power limit chosen: profiling did not finish" in done
    assert "W chosen" not in done
