"""Real GPUs as NVML shows them, one row per GPU model, for the fake ``pynvml`` beside this file.

Each row holds what was measured on that GPU and names where each number comes from; a number no
measurement gives is listed under ``assumptions`` with the reason it was chosen, so a test that
leans on it knows it leans on a guess. ``tests/test_fake_nvml.py`` checks the rows against the
shipped traces and ``docs/real_gpus.md``.

Sources:

- ``h100``: an NVIDIA H100 80GB HBM3, driver 580.159.04, in a Firecracker VM, read with
  nvidia-ml-py on 2026-11-26 (the table in ``docs/real_gpus.md``).
- ``a40``, ``v100``: the Zeus power traces shipped in ``zeus_nb/resources/zeus_traces``
  (``summary_power_<gpu>.csv``, Zeus NSDI '23 artifacts, Apache-2.0): the range of power limits
  traced and the average power of ImageNet/ResNet-50 at batch size 256 at each limit. The traces
  say nothing of NVML's timing, so the counter's period and the read costs are the H100's.

Below the rows: the model the fake runs them with (the power drawn at a limit and load, the
counter that moves in steps of its period, the time each read costs).
"""

from __future__ import annotations

import copy
import math
import random
import time

# The per-limit power of the A40 and V100 rows: ImageNet/ResNet-50, batch size 256, one epoch at
# each limit (summary_power_a40.csv, summary_power_v100.csv). At 100 W the A40 drew 120.7 W on
# average: above its limit, as measured; the fake keeps it.
TRACE_WORKLOAD = ("imagenet", "resnet50", 256)
A40_BUSY_W = {
    100: 120.738482,
    125: 125.508699,
    150: 144.608187,
    175: 160.229882,
    200: 177.583083,
    225: 196.409097,
    250: 214.629124,
    275: 230.848669,
    300: 235.205379,
}
V100_BUSY_W = {
    100: 98.382406,
    125: 121.966019,
    150: 144.594749,
    175: 166.372175,
    200: 184.944273,
    225: 205.438299,
    250: 220.250295,
}

# Read costs (s): energy counter (median, min, max of 200 reads), power, field values, the
# power limit and the temperature, as measured on the H100.
H100_COSTS = {
    "energy": [2.8e-3, 2.6e-3, 16.8e-3],
    "power": 0.9e-6,
    "field": 2.4e-6,
    "limit": 140e-6,
    "temperature": 1.1e-6,
}

ROWS: dict[str, dict] = {
    "h100": {
        "name": "NVIDIA H100 80GB HBM3",
        "driver": "580.159.04",
        "nvml": "13.580.159.04",
        "min_w": 200.0,
        "max_w": 700.0,
        "default_w": 700.0,
        "idle_w": 127.0,
        # power under load by limit: bf16 matmuls drew 693 W at the 700 W limit; below 693 W
        # the card is taken to draw its limit (see assumptions)
        "busy_w": {200: 200.0, 693: 693.0, 700: 693.0},
        "memory_busy_w": 386.0,  # device-to-device copies at the 700 W limit
        "counter_period_s": 0.1,
        "costs_s": H100_COSTS,
        "power_fields": True,  # POWER_INSTANT and POWER_AVERAGE answer (2.4 us a read)
        "architecture": 9,  # NVML_DEVICE_ARCH_HOPPER
        "source": "docs/real_gpus.md: an H100 80GB HBM3 read through NVML on 2026-11-26",
        "assumptions": {
            "busy_w": "only the 700 W limit was loaded (693 W); below 693 W the card is taken "
            "to draw its limit",
            "graphics_clocks_mhz": "not read on the H100; the A40-like list of the generic fake",
            "energy read cost between min and max": "only the median, min and max of 200 reads "
            "were recorded: 1 read in 200 costs the max, the others spread evenly around the "
            "median",
            "counter sample time": "the value returned is the counter as of the end of the read",
            "temperature_c": "readable (1.1 us a read), but the value was not recorded: "
            "45 C, the generic fake's",
        },
    },
    "a40": {
        "name": "NVIDIA A40",
        "driver": "550.54.15",
        "nvml": "12.550.54.15",
        "min_w": 100.0,
        "max_w": 300.0,
        "default_w": 300.0,
        "idle_w": 79.931403,
        "busy_w": A40_BUSY_W,
        "memory_busy_w": None,
        "counter_period_s": 0.1,
        "costs_s": H100_COSTS,
        "power_fields": False,
        "architecture": 7,  # NVML_DEVICE_ARCH_AMPERE
        "source": "summary_power_a40.csv (Zeus traces): limits 100-300 W, "
        "ImageNet/ResNet-50 at batch size 256",
        "assumptions": {
            "default_w": "the traces' highest limit",
            "idle_w": "idle was not traced: the lowest average any traced workload drew "
            "(79.9 W, an upper bound on idle)",
            "counter_period_s": "not in the traces: the H100's 100 ms",
            "costs_s": "not in the traces: the H100's read costs",
            "power_fields": "not in the traces: field values answer NOT_SUPPORTED, so "
            "nvmlDeviceGetPowerUsage stands in",
            "driver": "not in the traces: the generic fake's",
        },
    },
    "v100": {
        "name": "Tesla V100-PCIE-32GB",
        "driver": "550.54.15",
        "nvml": "12.550.54.15",
        "min_w": 100.0,
        "max_w": 250.0,
        "default_w": 250.0,
        "idle_w": 34.751585,
        "busy_w": V100_BUSY_W,
        "memory_busy_w": None,
        "counter_period_s": 0.1,
        "costs_s": H100_COSTS,
        "power_fields": False,
        "architecture": 5,  # NVML_DEVICE_ARCH_VOLTA
        "source": "summary_power_v100.csv (Zeus traces): limits 100-250 W, "
        "ImageNet/ResNet-50 at batch size 256",
        "assumptions": {
            "name": "the traces do not name the card; 250 W is the PCIe card's maximum",
            "default_w": "the traces' highest limit",
            "idle_w": "idle was not traced: the lowest average any traced workload drew "
            "(34.8 W, an upper bound on idle)",
            "counter_period_s": "not in the traces: the H100's 100 ms",
            "costs_s": "not in the traces: the H100's read costs",
            "power_fields": "not in the traces: field values answer NOT_SUPPORTED",
            "driver": "not in the traces: the generic fake's",
        },
    },
}

GPU_COUNTS = (1, 2, 4, 8)


def row(name: str) -> dict:
    """A copy of the row ``name`` (``h100``, ``a40``, ``v100``)."""
    try:
        return copy.deepcopy(ROWS[name])
    except KeyError:
        raise KeyError(f"no fake GPU row {name!r}; rows: {', '.join(ROWS)}") from None


def busy_mw_at(table: list[list[float]], limit_mw: float) -> float:
    """Power under load at ``limit_mw``: the row's table, linear between its limits."""
    points = sorted(table)
    if limit_mw <= points[0][0]:
        return points[0][1]
    for (l0, p0), (l1, p1) in zip(points, points[1:], strict=False):
        if limit_mw <= l1:
            return p0 + (p1 - p0) * (limit_mw - l0) / (l1 - l0)
    return points[-1][1]


def device_fields(name: str) -> dict:
    """The fake device's fields (in NVML's units, mW) that the row ``name`` decides."""
    r = row(name)
    mw = lambda w: int(round(w * 1000))  # noqa: E731
    return {
        "name": r["name"],
        "row": name,
        "min_mw": mw(r["min_w"]),
        "max_mw": mw(r["max_w"]),
        "default_mw": mw(r["default_w"]),
        "limit_mw": mw(r["default_w"]),
        "counter": "periodic",
        "counter_period_s": r["counter_period_s"],
        "costs_s": r["costs_s"],
        "busy_mw": [[mw(lim), mw(p)] for lim, p in sorted(r["busy_w"].items())],
        "idle_mw": mw(r["idle_w"]),
        "memory_busy_mw": None if r["memory_busy_w"] is None else mw(r["memory_busy_w"]),
        "load": "busy",
        "power_mw": None,  # None: from the load and the limit; a number overrides both
        "power_fields": r["power_fields"],
        "architecture": r["architecture"],
    }


# --- the power a device draws and its energy counter -------------------------------------------
def power_mw(d: dict) -> float:
    """What the device draws now: ``power_mw`` if set, else by its load and limit (rows)."""
    if d.get("power_mw") is not None:
        return d["power_mw"]
    load = d.get("load", "busy")
    if load == "idle":
        return d["idle_mw"]
    if load == "memory" and d.get("memory_busy_mw") is not None:
        return min(d["memory_busy_mw"], busy_mw_at(d["busy_mw"], d["limit_mw"]))
    return busy_mw_at(d["busy_mw"], d["limit_mw"])


def counter_mj(d: dict, now: float) -> float:
    """A periodic counter's value at ``now``: the energy as of its last update."""
    period = d["counter_period_s"]
    update = math.floor(now / period) * period
    if update <= d["anchor_t"]:
        return d["boundary_mj"]
    return d["energy_mj"] + power_mw(d) * (update - d["anchor_t"])


def settle(d: dict, now: float) -> None:
    """Bank a periodic counter's energy up to ``now``, before its power changes."""
    if d.get("counter") != "periodic":
        return
    d["boundary_mj"] = counter_mj(d, now)
    d["energy_mj"] += power_mw(d) * (now - d["anchor_t"])
    d["anchor_t"] = now


# --- what reads cost ----------------------------------------------------------------------------
_rng = random.Random(0)


def cost_s(d: dict, kind: str) -> float:
    """Seconds a read of ``kind`` costs on this device (0 on smooth devices)."""
    cost = (d.get("costs_s") or {}).get(kind)
    if cost is None:
        return 0.0
    if not isinstance(cost, list):
        return float(cost)
    median, low, high = cost
    if _rng.random() < 1 / 200:  # the measured tail: one read in 200 took the maximum
        return high
    return _rng.uniform(low, 2 * median - low)


def spend(d: dict, kind: str, start: float) -> None:
    """Let the call that began at ``start`` (perf_counter) last what the read costs.

    The fake's own work (a JSON read) counts: only the rest is spent, sleeping from 1 ms up (as
    a driver call releases the GIL) and spinning below, where a sleep would overshoot.
    """
    end = start + cost_s(d, kind)
    left = end - time.perf_counter()
    if left >= 1e-3:
        time.sleep(left)
    while time.perf_counter() < end:
        pass
