"""Speed of the tradeoff analysis and of sweep bookkeeping; prints its figures.

Run: python benchmarks/tradeoff.py
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import zeus_nb
from zeus_nb.data.traces import load_power_trace, load_train_trace, tta_eta
from zeus_nb.runner.sweep import run_sweep, trace_train_fn
from zeus_nb.tradeoff import pareto_front, potential_savings


def timed(label: str, fn, repeat: int = 5) -> None:
    fn()  # warm caches
    t0 = time.perf_counter()
    for _ in range(repeat):
        fn()
    print(f"{label:<48} {(time.perf_counter() - t0) / repeat * 1e3:8.1f} ms")


def main() -> None:
    load_power_trace("v100")
    load_train_trace()
    timed("potential_savings('v100'), six workloads", lambda: potential_savings("v100"))
    timed("tta_eta('librispeech', 'v100')", lambda: tta_eta("librispeech", "v100"))
    table = tta_eta("librispeech", "v100")
    timed("pareto_front of 105 configurations", lambda: pareto_front(table), repeat=50)

    with tempfile.TemporaryDirectory() as d:
        zeus_nb.use_simulated("v100", workload="imagenet")
        batches, limits = [128, 192, 256, 360], [100, 125, 150, 175, 200, 225, 250]
        n = len(batches) * len(limits)

        def sweep() -> float:
            t0 = time.perf_counter()
            run_sweep(
                trace_train_fn("imagenet"),
                batches,
                limits,
                workload="imagenet",
                results_path=Path(d) / "r.jsonl",
                progress=False,
            )
            return time.perf_counter() - t0

        label = f"trace-replay sweep, {n} configurations"
        print(f"{label:<48} {sweep() * 1e3:8.1f} ms ({n} fsynced appends)")
        # the same call again finds every configuration in the results file
        print(f"{'resume of a finished sweep (all skipped)':<48} {sweep() * 1e3:8.1f} ms")


if __name__ == "__main__":
    main()
