"""On a lent GPU: every NVML energy and power read (average and instant) of runs of per-step
windows, timed, to replay on the CPU (``CounterReader.observe`` with the recorded clock).

1. ``step_response``: no monitor; one thread reads the counter back to back and power between,
   over 0.5 s idle, 1 s of bf16 matmuls, 0.5 s idle (how each source follows the load);
2. ``runs``: three runs of 30 steps of about 30 ms of matmuls with a window around each step and
   one around the run (as ``per_step.py``), each window's edges and energy as returned at once,
   the run's window also waited for the counter; every read the monitor made, with its thread.

Writes argv[1] (JSON). Read-only: run it only under the guard. ``PROBE_DEVICE=cpu``: a dry run
on the tests' H100-shaped fake NVML.
"""

import json
import os
import sys
import threading
import time

import torch

DEV = os.environ.get("PROBE_DEVICE", "cuda")
if DEV != "cuda":
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests"))
    import timed_nvml

    timed_nvml.configure(phases=[(0.024, 693.0), (0.005, 127.0)], reading_period=0.05)
    sys.modules["pynvml"] = timed_nvml
import pynvml  # noqa: E402 - after the dry run's fake

KW = {} if DEV == "cuda" else {"sync_execution": False}
clock = time.perf_counter
LOG: list = []  # (kind, thread, t_before, t_after, value)
_energy, _power = pynvml.nvmlDeviceGetTotalEnergyConsumption, pynvml.nvmlDeviceGetPowerUsage
_fields = pynvml.nvmlDeviceGetFieldValues


def _logged(kind, fn):
    def read(handle, *args):
        a = clock()
        v = fn(handle, *args)
        b = clock()
        x = v[0].value.uiVal if kind == "F" and v and v[0].nvmlReturn == 0 else v
        LOG.append((kind, threading.current_thread().name[:12], a, b, x))
        return v

    return read


pynvml.nvmlDeviceGetTotalEnergyConsumption = _logged("E", _energy)
pynvml.nvmlDeviceGetPowerUsage = _logged("P", _power)
pynvml.nvmlDeviceGetFieldValues = _logged("F", _fields)


def sync():
    if DEV == "cuda":
        torch.cuda.synchronize()


def main():
    out: dict = {"clock": "time.perf_counter", "device": DEV}
    n = 8192 if DEV == "cuda" else 128
    a = torch.randn(n, n, device=DEV, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=DEV, dtype=torch.bfloat16)

    def step(reps):
        for _ in range(reps):
            torch.mm(a, b)
        sync()

    reps = 1
    while True:
        t0 = clock()
        step(reps)
        if clock() - t0 > 0.01:
            break
        reps *= 2
    t0 = clock()
    step(reps)
    reps = max(1, round(reps * 0.03 / (clock() - t0)))
    out["reps"] = reps

    # 1. step response, no monitor
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    stop = threading.Event()

    def reader():
        while not stop.is_set():
            pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
            pynvml.nvmlDeviceGetPowerUsage(h)
            pynvml.nvmlDeviceGetFieldValues(h, [(pynvml.NVML_FI_DEV_POWER_INSTANT, 0)])

    LOG.clear()
    th = threading.Thread(target=reader, name="probe")
    th.start()
    time.sleep(0.5)
    t_busy = clock()
    while clock() - t_busy < 1.0:
        step(reps)
    t_idle = clock()
    time.sleep(0.5)
    stop.set()
    th.join()
    out["step_response"] = {"busy": [t_busy, t_idle], "reads": list(LOG)}

    # 2. runs of per-step windows
    from zeus_nb.monitor import ZeusMonitor

    runs = []
    for _ in range(3):
        time.sleep(0.3)
        LOG.clear()
        t_made = clock()
        m = ZeusMonitor(gpu_indices=[0], cpu_indices=[])
        for _ in range(3):
            m.begin_window("settle", **KW)
            m.end_window("settle", **KW)
        time.sleep(0.5)
        windows = []
        m.begin_window("run", **KW)
        t_run = clock()
        for _ in range(30):
            t0 = clock()
            m.begin_window("step", **KW)
            step(reps)
            t1 = clock()
            r = m.end_window("step", **KW)
            windows.append((t0, t1, clock(), r.total_energy, r.energy_method))
        t_end = clock()
        r = m.end_window("run", **KW)
        run_now = r.total_energy
        m.begin_window("tail", **KW)
        time.sleep(0.3)
        m.end_window("tail", **KW)
        runs.append(
            {
                "made": t_made,
                "run": [t_run, t_end, run_now, r.energy_method],
                "windows": windows,
                "reads": list(LOG),
            }
        )
        del m
    out["runs"] = runs
    with open(sys.argv[1], "w") as f:
        json.dump(out, f)
    for r in runs:
        s = sum(w[3] for w in r["windows"])
        print(f"steps sum {s:.1f} J, run window {r['run'][2]:.1f} J, {len(r['reads'])} reads")


if __name__ == "__main__":
    main()
