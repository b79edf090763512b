"""OpenMP's wait policy for torch on a machine other work shares, side by side.

Run: python benchmarks/bench_omp_wait.py [--busy N] [--repeat R]

The test suite runs three workers on two cores and sets ``OMP_WAIT_POLICY=PASSIVE`` for itself
and every process it starts (``tests/conftest.py``). This measures why: the live sweep of
docs/tradeoff.md (ResNet-18 on 8-px synthetic images, two batch sizes by two power limits on
the simulated GPU, torch's own thread count) in a fresh process, with OpenMP's default wait
policy and with ``PASSIVE``, idle and beside ``--busy`` CPU-bound processes (default 2: the
suite's other two workers). It prints each run's wall time and CPU time, their ratios, and
whether the two policies recorded the same sweep (they must: the thread count, and so the
arithmetic, is the same; only how an idle thread waits differs).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SWEEP = """
import json, sys
import torchvision
import zeus_nb
from zeus_nb.runner.sweep import run_sweep
from zeus_nb.train.sweep_fn import synthetic_images, torch_train_fn

zeus_nb.use_simulated("v100", workload="cifar100")
train, val = synthetic_images(num_samples=512, image_size=8, noise=0.6)
train_fn = torch_train_fn(lambda: torchvision.models.resnet18(num_classes=10), train, val)
results = run_sweep(train_fn, batch_sizes=[32, 128], power_limits=[100, 250], target_metric=0.85,
                    max_epochs=3, results_path=sys.argv[1], progress=False)
"""
KEYS = ("batch_size", "power_limit", "epochs", "metric", "time", "energy")


def run(policy: str | None, folder: Path) -> tuple[float, float, list]:
    """(wall s, CPU s, the sweep's records) of one sweep in a fresh process."""
    env = dict(os.environ, ZEUS_NB_BACKEND="sim", MPLBACKEND="Agg")
    env.pop("OMP_WAIT_POLICY", None)
    if policy:
        env["OMP_WAIT_POLICY"] = policy
    path = folder / f"sweep-{policy or 'default'}-{time.monotonic_ns()}.jsonl"
    before = os.times()
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", SWEEP, str(path)], env=env, check=True)
    wall = time.perf_counter() - start
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return wall, cpu, [[r[k] for k in KEYS] for r in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--busy", type=int, default=2, help="busy processes beside (default 2)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each (default 1)")
    args = parser.parse_args()
    print(f"{'load':>8} {'policy':>8} {'wall s':>8} {'CPU s':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        results = {}
        for load in ("idle", f"busy {args.busy}"):
            hogs = []
            if load != "idle":
                hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                        for _ in range(args.busy)]  # fmt: skip
            try:
                for _ in range(args.repeat):
                    for policy in (None, "PASSIVE"):
                        wall, cpu, rows = run(policy, folder)
                        results.setdefault((load, policy), []).append((wall, cpu, rows))
                        print(f"{load:>8} {policy or 'default':>8} {wall:8.1f} {cpu:8.1f}")
            finally:
                for hog in hogs:
                    hog.kill()
                    hog.wait()
        print()
        for load in ("idle", f"busy {args.busy}"):
            d = min(results[(load, None)])
            p = min(results[(load, "PASSIVE")])
            print(f"{load}: PASSIVE / default, best of {args.repeat}: wall {p[0] / d[0]:.2f}x, "
                  f"CPU {p[1] / d[1]:.2f}x")  # fmt: skip
        same = len({json.dumps(r[2]) for runs in results.values() for r in runs}) == 1
        print("the same sweep recorded by every run:", "yes" if same else "NO")
        if not same:
            sys.exit(1)


if __name__ == "__main__":
    main()
