"""The pieces :mod:`zeus_nb.metric` windows are made of: metric families, readings, waiting.

The energy counter reads *cumulative* energy (the counters of the devices a
:class:`~zeus_nb.monitor.ZeusMonitor` opened) and adds differences of consecutive readings, so
the sum of its increments is exactly the energy between the first and the last reading: no
energy falls into the gap between one measurement window and the next, however late the
window's thread runs.
"""

from __future__ import annotations

import logging
import queue
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from zeus_nb.monitor import ZeusMonitor
from zeus_nb.monitor.power import PowerMonitor

log = logging.getLogger("zeus_nb.metric")

KINDS = ("gpu", "cpu", "dram")
LABELS = ("window", "index")
POWER_GAUGE = "power_monitor_gpu_power_watts"

#: What :func:`wait` returns when the period passed without a message.
TIMED_OUT = object()

Reading = dict[str, Any]  # {"time": s, "gpu"/"cpu"/"dram": {index: J}}


def energy_name(kind: str) -> str:
    return f"energy_monitor_{kind}_energy_joules"


def energy_counters(
    registry: CollectorRegistry,
    kinds: dict[str, bool],
    buckets: dict[str, list[float]] | None,
    existing: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One histogram (``buckets`` given) or counter per measured kind, registered once each."""
    families = dict(existing or {})
    for kind in KINDS:
        if not kinds.get(kind) or kind in families:
            continue
        name, doc = energy_name(kind), f"{kind.upper()} energy consumption"
        if buckets is None:
            families[kind] = Counter(name, doc, LABELS, registry=registry)
        else:
            families[kind] = Histogram(name, doc, LABELS, buckets=buckets[kind], registry=registry)
    return families


def power_gauge(registry: CollectorRegistry) -> Gauge:
    return Gauge(
        POWER_GAUGE, "Records power consumption for GPU over time", LABELS, registry=registry
    )


class Totals:
    """Cumulative energy of a monitor's GPUs, CPU packages and DRAM, read at one instant.

    CPU packages are read through Zeus's CPU manager (:func:`zeus_nb.device.cpu.get_cpus`,
    the current system's, as the monitor's own).
    """

    def __init__(self, monitor: ZeusMonitor):
        self.monitor = monitor
        metered = monitor.cpus.supports_get_dram_energy_consumption  # Zeus's CPUs: mJ by index
        self._dram = [i for i in monitor.cpu_indices if metered(i)]

    def kinds(self) -> dict[str, bool]:
        m = self.monitor
        return {"gpu": bool(m.gpu_indices), "cpu": bool(m.cpu_indices), "dram": bool(self._dram)}

    def sync(self) -> None:
        """Wait for queued GPU work (real GPUs), as ``sync_execution=True`` asks."""
        self.monitor.system.sync(self.monitor.gpu_indices)

    def read(self) -> Reading:
        m = self.monitor
        now, gpu = m.system.snapshot(list(m.gpus))
        packages = {i: m.cpus.get_total_energy_consumption(i) for i in m.cpu_indices}
        return {
            "time": now,
            "gpu": dict(zip(m.gpu_indices, gpu, strict=True)),
            "cpu": {i: p.cpu_mj / 1000 for i, p in packages.items()},
            "dram": {i: (packages[i].dram_mj or 0.0) / 1000 for i in self._dram},
        }

    def warn_if_idle(self, name: str, start: Reading, end: Reading) -> None:
        """Say why a window counted 0 J where the backend knows (the simulated virtual clock)."""
        if any(end["gpu"][i] != start["gpu"][i] for i in end["gpu"]):
            return
        hint = self.monitor.system.window_hint(end["time"] - start["time"])
        if hint:
            log.warning("EnergyCumulativeCounter window %r counted 0 J: %s", name, hint)


def add_energy(counters: dict[str, Any], name: str, last: Reading, now: Reading) -> None:
    """Add the energy between two readings to window ``name``'s counters (0 J creates them)."""
    for kind, family in counters.items():
        before = last.get(kind, {})
        for index, joules in now.get(kind, {}).items():
            delta = max(0.0, joules - before.get(index, joules))
            family.labels(window=name, index=index).inc(delta)


def set_power(gauge: Gauge, name: str, monitor: PowerMonitor) -> bool:
    """Set window ``name``'s gauges to the latest power sample; False if there is none yet."""
    power = monitor.get_power()
    if not power:
        return False
    for index, watts in power.items():
        gauge.labels(window=name, index=index).set(watts)
    return True


def wait(stop: queue.Queue, period: float) -> Any:
    """The next message on ``stop`` within ``period`` seconds, else :data:`TIMED_OUT`."""
    try:
        return stop.get(timeout=period)
    except queue.Empty:
        return TIMED_OUT
