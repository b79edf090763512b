"""Load-sensitive results, idle and beside busy processes, side by side.

Run: python benchmarks/bench_load.py [--busy N] [--runs R] [--json]

A result that changes with machine load is a bug. Each result is computed idle, then beside
``--busy`` CPU-bound processes (default 4; the development machine has 2 cores), and printed with
the tolerance it must meet:

- the power limit unmodified Zeus code chooses on the simulated wall clock (``GlobalPowerLimit
  Optimizer`` + ``MaxSlowdownConstraint``, 10 steps of ``time.sleep(0.01)`` per epoch, with and
  without ``on_step_end``, warm-up 0 and 2): every run must choose the trace's limit, exactly;
- the cost the batch-size optimizer compares (an unmarked wall-clock window, as Zeus's MNIST
  example measures each epoch): one epoch of the same torch training per batch size (8, 64, 512);
  the batch sizes must keep their order by cost, and each cost must stay within 50 % of idle
  (the wall clock charges the process's own time, not the time it waited for a CPU).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import zeus_nb  # noqa: F401
from zeus_nb import device
from zeus_nb.monitor import ZeusMonitor
from zeus_nb.optimizer.power_limit import GlobalPowerLimitOptimizer, MaxSlowdownConstraint

BUSY = "import time\nend = time.monotonic() + 900\nwhile time.monotonic() < end:\n    pass\n"
BATCH_SIZES = (8, 64, 512)


def implied(system, factor: float) -> float:
    limits = sorted({float(x) for x in system.trace["power_limit"]})
    return min(w for w in limits if system.slowdown(w) <= factor)


def plo_choice(factor: float, step_ends: bool, warmup: int) -> float:
    device.use_simulated(gpu="a40", workload="imagenet", clock="wall")
    plo = GlobalPowerLimitOptimizer(
        ZeusMonitor(gpu_indices=[0]),
        MaxSlowdownConstraint(factor),
        warmup_steps=warmup,
        profile_steps=5,
        verbose=False,
    )
    for _ in range(60):
        plo.on_epoch_begin()
        for _ in range(10):
            plo.on_step_begin()
            time.sleep(0.01)
            if step_ends:
                plo.on_step_end()
        plo.on_epoch_end()
        if plo.done:
            break
    plo.close()
    return plo.optimal_power_limit if plo.done else float("nan")


def bso_costs() -> dict[int, float]:
    """Seconds of the wall clock one epoch of the MNIST-shaped training takes per batch size."""
    import torch
    from torch import nn

    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(1024, 16, generator=g), torch.randint(0, 2, (1024,), generator=g)
    device.use_simulated(gpu="a40", workload="imagenet", clock="wall")
    monitor = ZeusMonitor(gpu_indices=[0])
    out = {}
    for bs in BATCH_SIZES:
        torch.manual_seed(1)
        model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        monitor.begin_window(f"bs{bs}")
        for _ in range(3):
            for i in range(0, len(x), bs):
                opt.zero_grad()
                nn.functional.cross_entropy(model(x[i : i + bs]), y[i : i + bs]).backward()
                opt.step()
        out[bs] = monitor.end_window(f"bs{bs}").time
    return out


def measure(runs: int) -> dict:
    system = device.use_simulated(gpu="a40", workload="imagenet", clock="wall")
    plo = {}
    for factor in (1.0, 1.5):
        for step_ends in (True, False):
            for warmup in (0, 2):
                key = f"x{factor:g} {'4 hooks' if step_ends else '3 hooks'} warmup {warmup}"
                chosen = [plo_choice(factor, step_ends, warmup) for _ in range(runs)]
                plo[key] = {"expected": implied(system, factor), "chosen": chosen}
    costs = [bso_costs() for _ in range(runs)]
    bso = {bs: min(c[bs] for c in costs) for bs in BATCH_SIZES}
    return {"plo": plo, "bso": bso}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--busy", type=int, default=4, help="CPU-bound processes beside (default 4)")
    ap.add_argument("--runs", type=int, default=3, help="runs of each result (default 3)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()
    idle = measure(args.runs)
    procs = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(args.busy)]
    try:
        time.sleep(1.0)
        busy = measure(args.runs)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    ok = True
    print(f"power limit chosen on the wall clock (W): idle | beside {args.busy} busy processes")
    for key, a in idle["plo"].items():
        b = busy["plo"][key]
        good = set(a["chosen"]) == set(b["chosen"]) == {a["expected"]}
        ok &= good
        print(
            f"  {key:26} {a['chosen']} | {b['chosen']}  trace {a['expected']:g} W (must equal): "
            + ("ok" if good else "FAIL")
        )
    print("batch-size optimizer: wall-clock seconds of 3 epochs per batch size: idle | busy")
    order = sorted(BATCH_SIZES, key=idle["bso"].get) == sorted(BATCH_SIZES, key=busy["bso"].get)
    for bs in BATCH_SIZES:
        a, b = idle["bso"][bs], busy["bso"][bs]
        good = abs(b / a - 1) <= 0.5
        ok &= good
        print(
            f"  batch {bs:4}: {a:.3f} s | {b:.3f} s  ({b / a:.2f}x; within 1.5x): "
            + ("ok" if good else "FAIL")
        )
    ok &= order
    print(f"  order by cost the same idle and busy: {'ok' if order else 'FAIL'}")
    if args.json:
        print(json.dumps({"idle": idle, "busy": busy, "ok": ok}, default=str))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
