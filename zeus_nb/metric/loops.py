"""The loops a periodic :mod:`zeus_nb.metric` window runs (on its thread).

:func:`energy_monitoring_loop` and :func:`power_monitoring_loop` take Zeus's arguments. Each
reports to the :class:`~zeus_nb.utils.multiprocessing.ThreadProcess` running it once its first
push is done (or failed), then pushes every period until its queue gets a message.
"""

from __future__ import annotations

import logging
import queue
from typing import Any

from zeus_nb.metric.push import Pusher, check_period, shared_pusher
from zeus_nb.metric.windows import (
    KINDS,
    TIMED_OUT,
    Totals,
    add_energy,
    energy_counters,
    power_gauge,
    set_power,
    wait,
)
from zeus_nb.monitor import ZeusMonitor
from zeus_nb.monitor.power import PowerMonitor
from zeus_nb.utils import multiprocessing as mp

log = logging.getLogger("zeus_nb.metric")


def _count_energy(name, stop, totals: Totals, counters, pusher: Pusher, period, start) -> None:
    last = start
    while True:
        message = wait(stop, period)
        try:
            now = message if isinstance(message, dict) else totals.read()
        except Exception as e:  # a device that fails must not kill the thread silently
            log.warning("EnergyCumulativeCounter window %r: reading failed, it stops: %s", name, e)
            return
        add_energy(counters, name, last, now)
        last = now
        pusher.push_logged(period)
        if message is not TIMED_OUT:
            totals.warn_if_idle(name, start, last)
            return


def _gauge_power(name, stop, monitor: PowerMonitor, gauge, pusher: Pusher, period, seen) -> None:
    while True:
        message = wait(stop, period)
        try:
            seen = set_power(gauge, name, monitor) or seen
        except Exception as e:
            log.warning("PowerGauge window %r: reading power failed, it stops: %s", name, e)
            return
        pusher.push_logged(period)
        if message is not TIMED_OUT:
            if not seen:
                hint = monitor.system.window_hint(0.0) or "the PowerMonitor took no sample"
                log.warning("PowerGauge window %r pushed no power: %s", name, hint)
            return


def _with_power_gauge(pusher: Pusher):
    def update(known: dict[str, Any]) -> dict[str, Any]:
        if "power" not in known:
            known["power"] = power_gauge(pusher.registry)
        return known

    return update


def energy_monitoring_loop(
    name: str,
    pipe: queue.Queue,
    cpu_indices: list,
    gpu_indices: list,
    update_period: float,
    pushgateway_url: str,
    job: str,
) -> None:
    """Count energy into ``energy_monitor_*_energy_joules`` and push every ``update_period`` s.

    Runs until anything is put into ``pipe`` (a ``queue.Queue`` or ``multiprocessing.Queue``),
    then pushes once more and returns: the loop of an :class:`EnergyCumulativeCounter` window.
    The counters are those of the gateway and job in this process.
    """
    try:
        pusher = shared_pusher(pushgateway_url, job)
        period = check_period(update_period)
        totals = Totals(ZeusMonitor(cpu_indices=cpu_indices, gpu_indices=gpu_indices))
        kinds = totals.kinds()
        families = pusher.families(
            lambda known: energy_counters(pusher.registry, kinds, None, known)
        )
        counters = {k: families[k] for k in KINDS if k in families}
        start = totals.read()
        add_energy(counters, name, start, start)
        pusher.push()
    except Exception as e:  # noqa: BLE001 (raised by the caller's begin_window)
        if not mp.started(e):
            raise
        return
    mp.started()
    _count_energy(name, pipe, totals, counters, pusher, period, start)


def power_monitoring_loop(
    name: str,
    pipe: queue.Queue,
    gpu_indices: list[int],
    update_period: float,
    pushgateway_url: str,
    job: str,
) -> None:
    """Set ``power_monitor_gpu_power_watts`` from a PowerMonitor and push every ``update_period`` s.

    Runs until anything is put into ``pipe``, then pushes once more and returns: the loop of a
    :class:`PowerGauge` window.
    """
    monitor = None
    try:
        pusher = shared_pusher(pushgateway_url, job)
        period = check_period(update_period)
        gauge = pusher.families(_with_power_gauge(pusher))["power"]
        monitor = PowerMonitor(
            gpu_indices=gpu_indices,
            update_period=min(0.1, period),
            max_samples_per_gpu=64,  # the gauge only ever needs the latest sample
        )
        seen = set_power(gauge, name, monitor)
        pusher.push()
    except Exception as e:  # noqa: BLE001 (raised by the caller's begin_window)
        if monitor is not None:
            monitor.stop()
        if not mp.started(e):
            raise
        return
    mp.started()
    try:
        _gauge_power(name, pipe, monitor, gauge, pusher, period, seen)
    finally:
        monitor.stop()
