"""On a lent GPU: zeus-nb against Zeus 0.16 on the same real NVML, in one process.

1. what zeus-nb's device layer reads (name, limits, counter);
2. energy of the same windows measured by both ZeusMonitors (counter) and both PowerMonitors
   (sampled power, integrated), over an idle, a compute-bound and a memory-bound phase;
3. cost of a begin/end window pair, ABBA blocks, beside the raw counter read (the floor).
Prints one JSON object per result and keeps them all in argv[1].
PROBE_DEVICE=cpu is a dry run of this script on a fake NVML (no CUDA)."""

import os
import statistics
import time
import warnings

from emit import emit  # beside this script

warnings.filterwarnings("ignore")
DEV = os.environ.get("PROBE_DEVICE", "cuda")
SYNC = DEV == "cuda"


def device_info():
    import zeus_nb
    from zeus_nb import device

    sysm = device.current()
    g = sysm.gpu(0)
    emit(
        "device",
        {
            "backend": sysm.backend,
            "name": g.name,
            "limits_W": list(g.power_limit_constraints()),
            "limit_W": g.get_power_limit(),
            "default_W": g.default_power_limit(),
            "counter": g.supports_energy_counter(),
            "zeus_nb": zeus_nb.__version__,
        },
    )


def energy_agreement(nb, zm):
    import torch
    from zeus.monitor import PowerMonitor as ZPower

    from zeus_nb.monitor import PowerMonitor as NPower

    npw = NPower(gpu_indices=[0], update_period=0.05)
    try:
        zpw = ZPower(gpu_indices=[0], update_period=0.05)
    except Exception as e:  # noqa: BLE001 - record it and go on without
        emit("zeus_power_monitor_error", repr(e))
        zpw = None
    time.sleep(1.0)
    n = 8192 if DEV == "cuda" else 256
    a = torch.randn(n, n, device=DEV, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=DEV, dtype=torch.bfloat16)
    big = torch.empty(
        (2 * 1024**3 if DEV == "cuda" else 2**20) // 2, device=DEV, dtype=torch.float16
    )
    big2 = torch.empty_like(big)

    def sync():
        if DEV == "cuda":
            torch.cuda.synchronize()

    def compute(sec):
        t = time.time()
        while time.time() - t < sec:
            for _ in range(20):
                a @ b
            sync()

    def memory(sec):
        t = time.time()
        while time.time() - t < sec:
            for _ in range(20):
                big2.copy_(big)
            sync()

    compute(1.0)
    rows = []
    for name, fn, sec in (
        ("idle", time.sleep, 3.0),
        ("compute", compute, 5.0),
        ("memory", memory, 5.0),
    ):
        sync()
        t0 = time.time()
        nb.begin_window(name, sync_execution=SYNC)
        zm.begin_window(name, sync_execution=SYNC)
        fn(sec)
        mz = zm.end_window(name, sync_execution=SYNC)
        mn = nb.end_window(name, sync_execution=SYNC)
        t1 = time.time()
        time.sleep(0.3)
        en = npw.get_energy(t0, t1) or {}
        ez = (zpw.get_energy(t0, t1) if zpw else None) or {}
        rows.append(
            {
                "phase": name,
                "time_s": round(mn.time, 4),
                "zeus_time_s": round(mz.time, 4),
                "nb_counter_J": round(mn.gpu_energy[0], 3),
                "zeus_counter_J": round(mz.gpu_energy[0], 3),
                "nb_power_J": round(en.get(0, float("nan")), 3),
                "zeus_power_J": round(ez.get(0, float("nan")), 3),
                "avg_W": round(mn.gpu_energy[0] / max(mn.time, 1e-9), 1),
            }
        )
        emit("energy", rows)
    for m in (npw, zpw):
        if m is not None and hasattr(m, "stop"):
            m.stop()


def overhead(nb, zm):
    import pynvml

    h = pynvml.nvmlDeviceGetHandleByIndex(0)

    def raw(n):
        t = time.perf_counter_ns()
        for _ in range(n):
            pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
        return (time.perf_counter_ns() - t) / n / 1000

    def pairs(mon, n):
        s = []
        for _ in range(n):
            t = time.perf_counter_ns()
            mon.begin_window("w", sync_execution=False)
            mon.end_window("w", sync_execution=False)
            s.append(time.perf_counter_ns() - t)
        return statistics.median(s) / 1000

    over = {"raw_counter_read_us": [], "nb_pair_us": [], "zeus_pair_us": []}
    for r in range(6):
        order = [("nb_pair_us", nb), ("zeus_pair_us", zm)]
        if r % 2:
            order.reverse()
        over["raw_counter_read_us"].append(round(raw(300), 2))
        for k, m in order:
            over[k].append(round(pairs(m, 300), 2))
    ratios = [x / y for x, y in zip(over["nb_pair_us"], over["zeus_pair_us"], strict=True)]
    over["ratio_nb_over_zeus_median"] = round(statistics.median(ratios), 3)
    emit("overhead", over)


def main():
    device_info()
    from zeus.monitor import ZeusMonitor as ZMon

    from zeus_nb.monitor import ZeusMonitor as NMon

    nb = NMon(gpu_indices=[0], cpu_indices=[])
    zm = ZMon(gpu_indices=[0], cpu_indices=[])
    for part in (energy_agreement, overhead):
        try:
            part(nb, zm)
        except Exception as e:  # noqa: BLE001 - one part failing leaves the others
            emit(f"{part.__name__}_error", repr(e))
    print("probe done", flush=True)


if __name__ == "__main__":
    main()
