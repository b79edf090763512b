"""Cost and accuracy of measurement windows, zeus-nb beside Zeus 0.16's own ZeusMonitor.

Run: python benchmarks/bench_monitor.py [--pairs N] [--rounds R] [--seconds S] [--zeus DIR]
     [--only h100|side-by-side]

Zeus is timed where ``zeus`` is importable. Install its wheel into a folder of its own, never into
the project's environment (where ``zeus`` would shadow the test suite's zeus -> zeus_nb alias):
``pip install --no-deps --target /tmp/zeus016 zeus==0.16.0`` (or the wheel file), then pass
``--zeus /tmp/zeus016``. Its dependencies are zeus-nb's own.

1. Window pairs on the simulated and replayed GPUs, and on the smooth fake pynvml of the tests
   (file-backed, then state in memory beside Zeus), as before: a pair there costs microseconds.
2. An H100-shaped fake (``tests/timed_nvml.py``, from the measurements of docs/measuring.md: a
   counter read costs 2.8 ms, 2.6-16.8 ms; the counter moves every 100 ms; power reads are cheap),
   drawing a bursty load (24 ms at 693 W, 5 ms at 127 W: the H100's measured matmul and idle
   power, in a notebook-01-sized 29 ms step; the shape is an assumption). Both monitors run in
   this process on it, and the lines print each figure beside its target: the cost of a window
   pair and its ratio to Zeus's; the error of 2 s windows against what the counter counts; the
   error of 50 back-to-back 20 ms windows against the window around them; how many of those
   read 0 J; and how much per-step windows add to a 29 ms step of Python work (the reader's
   thread included), judged within each run (its time against its steps that no counter read
   reached) and checked by paired runs without windows.

The CPU share of PowerMonitor's sampling thread (target under 2 % of a core) is printed too.
zeus-nb runs with ``sync_execution=True`` (nothing to wait for here); Zeus with
``sync_execution=False``, since its torch synchronization raises on a machine without CUDA.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

from zeus_nb import device
from zeus_nb.device.replay import ReplaySystem
from zeus_nb.monitor import ZeusMonitor

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_monitor_h100 import h100_section  # noqa: E402

TESTS = Path(__file__).resolve().parents[1] / "tests"
FAKE_NVML = TESTS / "fake_nvml"


def median_pair_us(monitor, pairs: int, **kwargs) -> float:
    """Median cost of an empty window pair (its 0 s on the virtual clock is expected here)."""
    warnings.filterwarnings("ignore", message="the window measured 0 s")
    begin, end = monitor.begin_window, monitor.end_window
    samples = []
    for _ in range(pairs):
        t0 = time.perf_counter_ns()
        begin("bench", **kwargs)
        end("bench", **kwargs)
        samples.append(time.perf_counter_ns() - t0)
    return statistics.median(samples) / 1000.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=9, help="interleaved rounds beside Zeus")
    parser.add_argument("--seconds", type=float, default=5.0, help="per sampling-cost run")
    parser.add_argument("--zeus", help="folder Zeus 0.16 was installed into (pip --target)")
    parser.add_argument(
        "--only",
        choices=["h100", "side-by-side"],
        help="run one section alone: the H100-shaped fake, or the window pair beside Zeus",
    )
    args = parser.parse_args()
    if args.zeus:
        sys.path.append(args.zeus)
    if args.only == "h100":
        h100_section(args)
        return
    if args.only == "side-by-side":
        fake_nvml_lines(args, side_by_side_only=True)
        return

    device.use_simulated(gpu="a40", workload="imagenet")
    sim_us = median_pair_us(ZeusMonitor(gpu_indices=[0]), args.pairs)
    print(f"simulated: {sim_us:.1f} us per window pair (1 GPU, virtual clock)")

    log = (
        Path(__file__).resolve().parents[1]
        / "zeus_nb/resources/zeus_profiles/A40+resnet50+gpu0.csv"
    )
    replay_us = median_pair_us(ZeusMonitor(system=ReplaySystem(log)), args.pairs)
    print(f"replay: {replay_us:.1f} us per window pair (1 GPU, {log.name})")

    fake_nvml_lines(args)

    device.use_simulated(gpu="a40", workload="imagenet", clock="wall")
    share = sampling_share(args.seconds)
    print(
        f"PowerMonitor thread, simulated (wall clock): {share:.2f} % of one core at a 100 ms "
        "period (1 GPU, 2 domains; target < 2 %)"
    )
    h100_section(args)


def fake_nvml_lines(args: argparse.Namespace, side_by_side_only: bool = False) -> None:
    """The NVML backend on the fake pynvml: file-backed as in the tests, then beside Zeus."""
    sys.path.insert(0, str(FAKE_NVML))
    sys.path.insert(0, str(TESTS))
    import fake_powercap
    import pynvml

    import zeus_nb.device.gpu.nvidia as nvidia

    nvidia.pynvml = pynvml  # zeus-nb's NVML module name, imported before this fake was on the path

    # Removed at exit, after Zeus's RAPL polling processes (atexit runs last-registered first).
    tmp = Path(tempfile.mkdtemp(prefix="bench_monitor_"))
    atexit.register(shutil.rmtree, tmp, True)
    state = tmp / "state.json"
    state.write_text(json.dumps(pynvml.default_state(1)))
    os.environ["ZEUS_NB_FAKE_NVML_STATE"] = str(state)
    # its reads stand for instant ones (a JSON round trip is no driver's cost): read them as Zeus
    os.environ["ZEUS_NB_ENERGY_READS"] = "sync"
    # the fake CPUs before any system looks CPUs up (a machine without /sys/class/powercap
    # would otherwise have none, or fewer than the two measured here)
    root = fake_powercap.make_tree(tmp / "powercap", packages=2)
    os.environ["ZEUS_NB_POWERCAP_ROOT"] = str(root)
    device.reset()
    if side_by_side_only:
        in_memory_side_by_side(pynvml, root, args)
        return
    # The file-backed fake keeps its state in a JSON file: zeus-nb plus file I/O.
    nvml_us = median_pair_us(
        ZeusMonitor(gpu_indices=[0], cpu_indices=[], backend="nvml"), args.pairs // 10
    )
    print(f"fake NVML: {nvml_us:.1f} us per window pair (1 GPU, file-backed test double)")

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
    in_memory_side_by_side(pynvml, root, args)


def in_memory_side_by_side(pynvml, root: Path, args: argparse.Namespace) -> None:
    """Side by side, the fake's state in memory: its reads cost microseconds, as a driver call's
    do, and zeus-nb runs as shipped (energy_reads="auto" times the first reads and decides)."""
    pynvml.keep_state_in_memory(pynvml.load_state())
    del os.environ["ZEUS_NB_ENERGY_READS"]
    side_by_side(root, args.pairs, args.rounds)


def side_by_side(powercap: Path, pairs: int, rounds: int) -> None:
    """zeus-nb's and Zeus's window pairs on the same fake GPU (and CPUs), interleaved; then
    each with a log file (a row per window, as a window per training step writes)."""
    logs = powercap.parent
    ours = {
        "gpu": ZeusMonitor(gpu_indices=[0], cpu_indices=[], backend="nvml"),
        "cpu": ZeusMonitor(gpu_indices=[0], cpu_indices=[0, 1], backend="nvml"),
        "log": ZeusMonitor(
            gpu_indices=[0], cpu_indices=[], backend="nvml", log_file=logs / "ours.csv"
        ),
    }
    zeus = zeus_monitors(powercap, logs / "zeus.csv")
    if zeus is None:
        print(
            "side by side with Zeus: skipped, zeus is not importable "
            "(pip install 'zeus-nb[bench]'); zeus-nb alone, state in memory: "
            + ", ".join(f"{k} {median_pair_us(m, pairs):.2f} us" for k, m in ours.items())
        )
        return
    version, theirs = zeus
    cases = [
        (f"{side} {k}", m, kw)
        for k in ours
        for side, m, kw in (
            ("ours", ours[k], {}),
            ("zeus", theirs[k], {"sync_execution": False}),
        )
    ]
    per_round: dict[str, list[float]] = {name: [] for name, _, _ in cases}
    for r in range(rounds):
        for name, mon, kw in cases[r % len(cases) :] + cases[: r % len(cases)]:
            per_round[name].append(median_pair_us(mon, pairs, **kw))
    ours["gpu"].begin_window("how")
    how = ours["gpu"].end_window("how").energy_method[0]
    print(
        f"side by side with Zeus {version} (same fake NVML, state in memory; {rounds} "
        f"interleaved rounds x {pairs} pairs, medians; zeus-nb's default energy_reads="
        f"{ours['gpu'].energy_reads!r} read GPU 0 as: {how}):"
    )
    targets = {
        "gpu": ("1 GPU", 0.6, "<="),
        "cpu": ("1 GPU + 2 CPUs with DRAM", 1.0, "<"),
        "log": ("1 GPU, a log_file row per window", None, ""),
    }
    for k, (what, target, op) in targets.items():
        a, b = per_round[f"ours {k}"], per_round[f"zeus {k}"]
        ratio = statistics.median(x / y for x, y in zip(a, b, strict=True))
        if target is None:  # no target: what zeus-nb's checks of each row cost beside Zeus's
            verdict = "no target: each row checked as its replay reads it, fsynced once a second"
        else:
            met = ratio <= target if op == "<=" else ratio < target
            verdict = f"target {op} {target:g}: {'met' if met else 'NOT met'}"
        print(
            f"  {what}: zeus-nb {statistics.median(a):.2f} us, Zeus {statistics.median(b):.2f} "
            f"us per window pair: ratio {ratio:.2f} ({verdict})"
        )


def zeus_monitors(powercap: Path, log_file: Path) -> tuple[str, dict] | None:
    """Zeus's monitors over the fake pynvml already imported and the fake powercap tree (one
    of them writing ``log_file``)."""
    try:
        import zeus
        import zeus.device.cpu.rapl as zeus_rapl
        from zeus.monitor import ZeusMonitor as Zeus
    except ImportError:
        return None
    zeus_rapl.RAPL_DIR = str(powercap)  # Zeus reads /sys/class/powercap/intel-rapl
    monitors = {
        "gpu": Zeus(gpu_indices=[0], cpu_indices=[]),
        "cpu": Zeus(gpu_indices=[0], cpu_indices=[0, 1]),
        "log": Zeus(gpu_indices=[0], cpu_indices=[], log_file=str(log_file)),
    }
    for m in monitors.values():  # starts Zeus's RAPL wrap-around processes before any timing
        median_pair_us(m, 1, sync_execution=False)
    return getattr(zeus, "__version__", "?"), monitors


def median_rapl_us(monitor: ZeusMonitor, pairs: int) -> float:
    """What a window pair spends on CPU counters: package and DRAM of each CPU, read twice."""
    samples = []
    for _ in range(pairs):
        t0 = time.perf_counter_ns()
        for _ in range(2):
            for i in monitor.cpu_indices:
                monitor.cpus.get_total_energy_consumption(i)
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
