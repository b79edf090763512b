"""On a lent GPU: what a window around every training step adds to the step, measured directly.

Runs of real steps, paired: a run with ``begin_window``/``end_window`` around each step (a
monitor built and settled first, as a training run's monitor is long before its steps) beside
a run of the same steps with no monitor alive (so the reader's thread counts against windows);
pairs alternate which runs first. Two kinds of step, about 30 ms each:

- ``gpu``: bf16 matmuls, then ``torch.cuda.synchronize()`` (the caller waits, GIL released);
- ``launch``: thousands of tiny kernels launched from Python (the caller holds the GIL nearly
  all the step, which delays the reader's reads).

Zeus 0.16's monitor runs beside on every fourth pair, for scale. Also: the reader's counter
reads per 100 ms counter step, and the per-step windows' sum against one window around the
run. Prints one JSON object per result and keeps them all in argv[1]. Read-only: run it only
under the guard (``benchmarks/real_gpu/run.sh`` does). ``PROBE_DEVICE=cpu`` is a dry run on a
fake NVML (no CUDA).
"""

import gc
import os
import random
import statistics
import sys
import threading
import time
import warnings

import torch
from emit import emit  # beside this script

warnings.filterwarnings("ignore")
DEV = os.environ.get("PROBE_DEVICE", "cuda")
if DEV != "cuda":  # the dry run: the H100-shaped fake NVML of the tests, as zeus-nb's and Zeus's
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests"))
    import timed_nvml

    timed_nvml.configure(phases=[(0.024, 693.0), (0.005, 127.0)], reading_period=0.05)
    sys.modules["pynvml"] = timed_nvml
import pynvml  # noqa: E402 - after the dry run's fake

PAIRS = int(os.environ.get("PER_STEP_PAIRS", "16"))
STEPS = 30  # steps a run
KW = {} if DEV == "cuda" else {"sync_execution": False}  # no CUDA to synchronize in a dry run


# Count the counter reads made off the main thread (the reader's), by wrapping the NVML call
# every zeus-nb and Zeus read goes through (looked up on the module at each call).
_reads = [0]
_main = threading.main_thread()
_energy = pynvml.nvmlDeviceGetTotalEnergyConsumption


def _counted(handle):
    if threading.current_thread() is not _main:
        _reads[0] += 1
    return _energy(handle)


pynvml.nvmlDeviceGetTotalEnergyConsumption = _counted


def sync():
    if DEV == "cuda":
        torch.cuda.synchronize()


def make_steps():
    n = 8192 if DEV == "cuda" else 128
    a = torch.randn(n, n, device=DEV, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=DEV, dtype=torch.bfloat16)
    small = torch.zeros(16, device=DEV)

    def timed(fn, reps):
        sync()
        t0 = time.perf_counter()
        fn(reps)
        sync()
        return time.perf_counter() - t0

    def gpu(reps):
        for _ in range(reps):
            torch.mm(a, b)
        sync()

    def launch(reps):
        for _ in range(reps):
            small.add_(1.0)
        sync()

    steps = {}
    for name, fn in (("gpu", gpu), ("launch", launch)):
        for _ in range(5):  # warm: CUDA's first launches are slow (launch steps came out 2 ms)
            fn(8)
        reps = 1
        while timed(fn, reps) < 0.01:
            reps *= 2
        reps = max(1, round(reps * 0.03 / timed(fn, reps)))
        steps[name] = (fn, reps)
    return steps


def settled_monitor():
    from zeus_nb.monitor import ZeusMonitor

    m = ZeusMonitor(gpu_indices=[0], cpu_indices=[])
    for _ in range(3):
        m.begin_window("settle")
        m.end_window("settle")
    time.sleep(0.5)  # the reader has seen a few counter steps and the grid
    return m


def run(fn, reps, monitor=None):
    """Mean step time (s) of STEPS steps; with a monitor, also the per-step windows' energy sum
    and a window around the run (J), and the reader's reads during the run."""
    reads0 = _reads[0]
    total = 0.0
    if monitor is not None:
        monitor.begin_window("run", **KW)
    t0 = time.perf_counter()
    for _ in range(STEPS):
        if monitor is not None:
            monitor.begin_window("step", **KW)
        fn(reps)
        if monitor is not None:
            total += monitor.end_window("step", **KW).total_energy
    dt = (time.perf_counter() - t0) / STEPS
    out = {"step_s": dt, "reads": _reads[0] - reads0}
    if monitor is not None:
        out["steps_J"] = total
        out["run_J"] = monitor.end_window("run", **KW).total_energy
    return out


def interval(values, rounds=2000):
    rng = random.Random(0)
    meds = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(rounds))
    return meds[int(0.025 * rounds)], meds[int(0.975 * rounds) - 1]


def main():
    try:
        from zeus.monitor import ZeusMonitor as ZMon
    except ImportError:
        ZMon = None
    steps = make_steps()
    emit("steps", {k: {"reps": r} for k, (_, r) in steps.items()})
    for name, (fn, reps) in steps.items():
        for _ in range(3):  # warm
            fn(reps)
        added, zeus_added, reads_per_100ms, sums = [], [], [], []
        step_ms = []
        for i in range(PAIRS):
            out = {}
            for with_windows in (False, True) if i % 2 == 0 else (True, False):
                if with_windows:
                    m = settled_monitor()
                    out[True] = run(fn, reps, m)
                    del m
                else:
                    gc.collect()
                    time.sleep(0.2)  # the last monitor's reader has stopped
                    out[False] = run(fn, reps)
            gc.collect()
            w, b = out[True], out[False]
            added.append(w["step_s"] / b["step_s"] - 1)
            step_ms.append(b["step_s"] * 1e3)
            reads_per_100ms.append(w["reads"] / (w["step_s"] * STEPS / 0.1))
            if w["run_J"] > 0:
                sums.append(w["steps_J"] / w["run_J"] - 1)
            if ZMon is not None and i % 4 == 0:
                zm = ZMon(gpu_indices=[0], cpu_indices=[])
                zb = run(fn, reps)["step_s"]
                zw = run(fn, reps, zm)["step_s"]
                zeus_added.append(zw / zb - 1)
                del zm
        lo, hi = interval(added)
        emit(
            f"per_step_{name}",
            {
                "step_ms_median": round(statistics.median(step_ms), 2),
                "pairs": PAIRS,
                "steps_a_run": STEPS,
                "zeus_nb_added_pct_median": round(100 * statistics.median(added), 3),
                "zeus_nb_added_pct_95": [round(100 * lo, 3), round(100 * hi, 3)],
                "zeus_nb_added_pct_all": [round(100 * x, 3) for x in added],
                "reader_reads_per_counter_step_median": round(
                    statistics.median(reads_per_100ms), 2
                ),
                "step_windows_sum_vs_run_window_pct": [
                    round(100 * min(sums), 3) if sums else None,
                    round(100 * max(sums), 3) if sums else None,
                ],
                "zeus_added_pct": [round(100 * x, 2) for x in zeus_added],
            },
        )
    print("per_step done", flush=True)


if __name__ == "__main__":
    main()
