"""What the energy tooling adds to a training step, and the training steps themselves.

1. Hooks only: the per-step calls the training loop makes besides compute
   (``plo.on_step_begin``, ``zeus_nb.step``, ``plo.on_step_end``, with the ZeusMonitor windows the
   optimizer opens), on the simulated GPU, through profiling and after it.
2. End to end: ``zeus_nb.train.single`` on synthetic data with and without the optimizer, runs
   interleaved so machine load hits both alike; best of ``--repeat``.

    python benchmarks/bench_train.py [--steps 200] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time


def hooks_only(steps: int) -> float:
    """Seconds per step spent in the optimizer hooks and zeus_nb.step()."""
    import zeus_nb
    from zeus_nb import device
    from zeus_nb.monitor import ZeusMonitor
    from zeus_nb.optimizer import GlobalPowerLimitOptimizer
    from zeus_nb.optimizer.power_limit import MaxSlowdownConstraint

    device.use_simulated(gpu="a40", workload="imagenet")
    monitor = ZeusMonitor(gpu_indices=[0])
    plo = GlobalPowerLimitOptimizer(
        monitor, MaxSlowdownConstraint(1.1), warmup_steps=2, profile_steps=5, verbose=False
    )
    t0 = time.perf_counter()
    plo.on_epoch_begin()
    for _ in range(steps):
        plo.on_step_begin()
        zeus_nb.step()
        plo.on_step_end()
    plo.on_epoch_end()
    elapsed = time.perf_counter() - t0
    plo.close()
    device.reset()
    return elapsed / steps


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench-train-")
    os.environ.setdefault("ZEUS_NB_STATE_DIR", os.path.join(tmp, "state"))

    per_step = min(hooks_only(2000) for _ in range(a.repeat))
    print(f"hooks only: {per_step * 1e6:.1f} us/step (2000 steps, profiling included)")

    from zeus_nb.train import single

    common = dict(
        data="synthetic",
        backend="sim",
        epochs=1,
        batch_size=8,
        image_size=16,
        train_size=8 * a.steps,
        val_size=8,
        progress=False,
        results=os.path.join(tmp, "r.json"),
        warmup_steps=2,
        profile_steps=5,
    )
    single.train(**{**common, "train_size": 64})  # warm imports and allocator
    times: dict[str, list[float]] = {"with optimizer": [], "without": []}
    for _ in range(a.repeat):
        for label, on in (("with optimizer", True), ("without", False)):
            t0 = time.perf_counter()
            single.train(power_limit_optimizer=on, **common)
            times[label].append((time.perf_counter() - t0) / a.steps)
    for label, ts in times.items():
        print(
            f"end to end, {label}: {min(ts) * 1e3:.2f} ms/step "
            f"(tiny CNN, batch 8, 16 px, CPU; best of {a.repeat})"
        )


if __name__ == "__main__":
    main()
