"""Median cost of one begin_window + end_window pair, per backend; PowerMonitor's thread cost.

Run: python benchmarks/bench_monitor.py [--pairs N] [--seconds S]
Prints one line per backend: "<backend>: <median> us per window pair", a line for a window pair
that also reads CPU and DRAM energy (cpu_indices) from a fake powercap tree, and the CPU share of
one core that PowerMonitor's sampling thread uses at a 100 ms period (target: under 2 %).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

from zeus_nb import device
from zeus_nb.device.replay import ReplaySystem
from zeus_nb.monitor import ZeusMonitor

TESTS = Path(__file__).resolve().parents[1] / "tests"
FAKE_NVML = TESTS / "fake_nvml"


def median_pair_us(monitor: ZeusMonitor, pairs: int) -> float:
    """Median cost of an empty window pair (its 0 s on the virtual clock is expected here)."""
    warnings.filterwarnings("ignore", message="the window measured 0 s")
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
    parser.add_argument("--seconds", type=float, default=5.0, help="per sampling-cost run")
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
        nvml_us = median_pair_us(
            ZeusMonitor(gpu_indices=[0], cpu_indices=[], backend="nvml"), args.pairs // 10
        )
        print(f"fake NVML: {nvml_us:.1f} us per window pair (1 GPU, file-backed test double)")

        sys.path.insert(0, str(TESTS))
        import fake_powercap

        root = fake_powercap.make_tree(Path(tmp) / "powercap", packages=2)
        os.environ["ZEUS_NB_POWERCAP_ROOT"] = str(root)
        with_cpus = ZeusMonitor(gpu_indices=[0], cpu_indices=[0, 1], backend="nvml")
        cpu_us = median_pair_us(with_cpus, args.pairs // 10)
        rapl_us = median_rapl_us(with_cpus, args.pairs)
        print(
            f"fake NVML + RAPL: {cpu_us:.1f} us per window pair (1 GPU, cpu_indices=[0, 1] with "
            f"DRAM; of which reading the 4 RAPL counters twice: {rapl_us:.1f} us)"
        )
        share = sampling_share(args.seconds)
        print(
            f"PowerMonitor thread, fake NVML: {share:.2f} % of one core at a 100 ms period "
            "(1 GPU, 1 domain; target < 2 %)"
        )

    device.use_simulated(gpu="a40", workload="imagenet", clock="wall")
    share = sampling_share(args.seconds)
    print(
        f"PowerMonitor thread, simulated (wall clock): {share:.2f} % of one core at a 100 ms "
        "period (1 GPU, 2 domains; target < 2 %)"
    )


def median_rapl_us(monitor: ZeusMonitor, pairs: int) -> float:
    """What a window pair spends on CPU counters: package and DRAM of each CPU, read twice."""
    samples = []
    for _ in range(pairs):
        t0 = time.perf_counter_ns()
        for _ in range(2):
            for c in monitor.cpus:
                c.energy()
                c.dram_energy()
        samples.append(time.perf_counter_ns() - t0)
    return statistics.median(samples) / 1000.0


def sampling_share(seconds: float) -> float:
    """CPU time the sampling thread adds while this thread sleeps, as % of one core."""
    from zeus_nb.monitor.power import PowerMonitor

    pm = PowerMonitor(gpu_indices=[0], update_period=0.1)
    cpu0, wall0 = time.process_time(), time.monotonic()
    time.sleep(seconds)
    cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
    pm.stop()
    return 100.0 * cpu / wall


if __name__ == "__main__":
    main()
