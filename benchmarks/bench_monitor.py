"""Median cost of one begin_window + end_window pair, per backend.

Run: python benchmarks/bench_monitor.py [--pairs N]
Prints one line per backend: "<backend>: <median> us per window pair".
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from zeus_nb import device
from zeus_nb.device.replay import ReplaySystem
from zeus_nb.monitor import ZeusMonitor

FAKE_NVML = Path(__file__).resolve().parents[1] / "tests" / "fake_nvml"


def median_pair_us(monitor: ZeusMonitor, pairs: int) -> float:
    samples = []
    for _ in range(pairs):
        t0 = time.perf_counter_ns()
        monitor.begin_window("bench")
        monitor.end_window("bench")
        samples.append(time.perf_counter_ns() - t0)
    return statistics.median(samples) / 1000.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5000)
    args = parser.parse_args()

    device.use_simulated(gpu="a40", workload="imagenet")
    sim_us = median_pair_us(ZeusMonitor(gpu_indices=[0]), args.pairs)
    print(f"simulated: {sim_us:.1f} us per window pair (1 GPU, virtual clock)")

    log = (
        Path(__file__).resolve().parents[1]
        / "zeus_nb/resources/zeus_profiles/A40+resnet50+gpu0.csv"
    )
    replay_us = median_pair_us(ZeusMonitor(system=ReplaySystem(log)), args.pairs)
    print(f"replay: {replay_us:.1f} us per window pair (1 GPU, {log.name})")

    # The fake pynvml keeps its state in a JSON file, so this measures zeus-nb plus file I/O.
    sys.path.insert(0, str(FAKE_NVML))
    import pynvml

    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp) / "state.json"
        state.write_text(json.dumps(pynvml.default_state(1)))
        os.environ["ZEUS_NB_FAKE_NVML_STATE"] = str(state)
        device.reset()
        nvml_us = median_pair_us(ZeusMonitor(gpu_indices=[0], backend="nvml"), args.pairs // 10)
    print(f"fake NVML: {nvml_us:.1f} us per window pair (1 GPU, file-backed test double)")


if __name__ == "__main__":
    main()
