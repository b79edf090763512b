"""On a lent GPU: what each NVML read costs, how often the energy counter and the power reading
change, and whether reads from a background thread stall the caller. Read-only."""

import json
import statistics
import sys
import threading
import time

import pynvml

pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
res = {}


def cost(name, fn, n=200):
    s = []
    for _ in range(n):
        t = time.perf_counter_ns()
        fn()
        s.append(time.perf_counter_ns() - t)
    res[name + "_us"] = [
        round(statistics.median(s) / 1e3, 1),
        round(min(s) / 1e3, 1),
        round(max(s) / 1e3, 1),
    ]


cost("energy_counter", lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(h))
cost("power_usage", lambda: pynvml.nvmlDeviceGetPowerUsage(h))
cost("power_limit", lambda: pynvml.nvmlDeviceGetPowerManagementLimit(h))
cost("temperature", lambda: pynvml.nvmlDeviceGetTemperature(h, 0))
cost("sm_clock", lambda: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM))
for fid in (
    "NVML_FI_DEV_POWER_INSTANT",
    "NVML_FI_DEV_POWER_AVERAGE",
    "NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
):
    if hasattr(pynvml, fid):
        f = getattr(pynvml, fid)
        cost("field_" + fid[12:].lower(), lambda f=f: pynvml.nvmlDeviceGetFieldValues(h, [f]))


def changes(name, fn, sec=2.0):
    t0 = time.monotonic()
    last, stamps = fn(), []
    while time.monotonic() - t0 < sec:
        v = fn()
        if v != last:
            stamps.append(time.monotonic())
            last = v
    gaps = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    res[name + "_update_ms"] = (
        [round(statistics.median(gaps) * 1e3, 2), round(min(gaps) * 1e3, 2)] if gaps else None
    )


changes("energy_counter", lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(h))
changes("power_usage", lambda: pynvml.nvmlDeviceGetPowerUsage(h))

# does a reader thread stall a Python loop in the main thread (GIL released in the C call)?
stop = False


def reader():
    while not stop:
        pynvml.nvmlDeviceGetTotalEnergyConsumption(h)


def spin(sec=1.0):
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < sec:
        n += 1
    return n


alone = spin()
th = threading.Thread(target=reader, daemon=True)
th.start()
shared = spin()
stop = True
th.join()
res["main_loop_rate_with_reader_thread"] = round(shared / alone, 3)
print(json.dumps(res, indent=1))
with open(sys.argv[1], "w") as f:
    json.dump(res, f, indent=1)
