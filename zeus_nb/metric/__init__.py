"""Energy and power as Prometheus metrics, pushed to a Pushgateway, with Zeus's ``zeus.metric`` API.

- :class:`EnergyHistogram`: each ``begin_window``/``end_window`` pair is measured with a
  :class:`~zeus_nb.monitor.ZeusMonitor` and observed in the histograms
  ``energy_monitor_{gpu,cpu,dram}_energy_joules``, then pushed.
- :class:`EnergyCumulativeCounter`: while a window is open, the counters
  ``energy_monitor_{gpu,cpu,dram}_energy_joules`` grow by the energy measured and are pushed every
  ``update_period`` seconds, and once more at ``end_window``.
- :class:`PowerGauge`: while a window is open, the gauge ``power_monitor_gpu_power_watts`` is set
  to the latest :class:`~zeus_nb.monitor.power.PowerMonitor` reading and pushed every
  ``update_period`` seconds, and once more at ``end_window``.

Series carry the labels ``window`` (the window's name) and ``index`` (the device index), and the
gateway adds ``job``. As in Zeus, each periodic window runs its loop
(:func:`energy_monitoring_loop`, :func:`power_monitoring_loop`) started through
``mp.get_context(...).Process``; here the context
is :mod:`zeus_nb.utils.multiprocessing`'s ``"thread"`` one, a daemon thread of this process,
because a child process would open its own GPU system: on the simulated GPU it would not see this
process's ``zeus_nb.step()`` calls (virtual clock) or power limits (wall clock) and would push 0 J
or the wrong power. A thread sees exactly what this process's ``ZeusMonitor`` sees, never imports
the user's ``__main__`` again, and reports a first push that fails from ``begin_window``. Loops
pushing under the same gateway and job share one registry, so concurrent windows do not
overwrite each other's series and a window name used again keeps counting up.
"""

from __future__ import annotations

import abc
import logging
import queue
import threading
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

from zeus_nb import device
from zeus_nb.device.cpu import get_cpus
from zeus_nb.errors import WindowError
from zeus_nb.metric.loops import energy_monitoring_loop, power_monitoring_loop
from zeus_nb.metric.push import (
    PUSH_TIMEOUT,
    Pusher,
    PushgatewayError,
    check_buckets,
    check_period,
    resolve_url,
    shared_pusher,
)
from zeus_nb.metric.windows import (  # Counter, Gauge, Histogram: Zeus's module has them
    Counter,  # noqa: F401
    Gauge,  # noqa: F401
    Histogram,  # noqa: F401
    energy_counters,
)
from zeus_nb.monitor import ZeusMonitor
from zeus_nb.monitor.power import PowerMonitor  # noqa: F401 (Zeus's module has this name)
from zeus_nb.utils import multiprocessing as mp

__all__ = [
    "EnergyCumulativeCounter",
    "EnergyHistogram",
    "Metric",
    "MonitoringProcessState",
    "PowerGauge",
    "PushgatewayError",
    "energy_monitoring_loop",
    "power_monitoring_loop",
]

log = logging.getLogger(__name__)

#: How long ``end_window`` waits for a window's thread to take its last reading and push.
JOIN_TIMEOUT = PUSH_TIMEOUT + 5.0
#: Where the periodic loops run (see the module docstring).
START_METHOD = "thread"


@dataclass
class MonitoringProcessState:
    """An open periodic window: ``queue`` stops it, ``proc`` runs it (a thread here)."""

    queue: queue.Queue
    proc: threading.Thread


class Metric(abc.ABC):
    """A metric measured over named windows: ``begin_window(name)`` ... ``end_window(name)``."""

    @abc.abstractmethod
    def begin_window(self, name: str, sync_execution: bool = True) -> None:
        """Open window ``name``; ``sync_execution`` waits for queued GPU work first."""

    @abc.abstractmethod
    def end_window(self, name: str, sync_execution: bool = True) -> None:
        """Close window ``name`` and push its metrics."""


class EnergyHistogram(Metric):
    """Energy per window (J) of GPUs, CPUs and DRAM as Prometheus histograms.

    Args:
        cpu_indices: CPU packages to measure (as for :class:`~zeus_nb.monitor.ZeusMonitor`).
        gpu_indices: GPUs to measure.
        pushgateway_url: the Pushgateway, e.g. ``"http://localhost:9091"`` (Zeus's documentation
            calls it ``prometheus_url=``; both names are accepted).
        job: the Prometheus job the series are pushed under.
        gpu_bucket_range, cpu_bucket_range, dram_bucket_range: bucket upper bounds in J;
            non-empty and strictly increasing.
    """

    def __init__(
        self,
        cpu_indices: list | None,
        gpu_indices: list | None,
        pushgateway_url: str | None = None,
        job: str | None = None,
        gpu_bucket_range: Sequence[float] = (50.0, 100.0, 200.0, 500.0, 1000.0),
        cpu_bucket_range: Sequence[float] = (10.0, 50.0, 100.0, 500.0, 1000.0),
        dram_bucket_range: Sequence[float] = (5.0, 10.0, 20.0, 50.0, 150.0),
        *,
        prometheus_url: str | None = None,
    ) -> None:
        self.pushgateway_url = resolve_url(pushgateway_url, prometheus_url, "EnergyHistogram")
        buckets = {
            "gpu": check_buckets(gpu_bucket_range, "gpu_bucket_range"),
            "cpu": check_buckets(cpu_bucket_range, "cpu_bucket_range"),
            "dram": check_buckets(dram_bucket_range, "dram_bucket_range"),
        }
        self._pusher = Pusher(self.pushgateway_url, job)  # type: ignore[arg-type]
        self.job = self._pusher.job
        self.registry = self._pusher.registry
        self.gpu_bucket_range, self.cpu_bucket_range, self.dram_bucket_range = buckets.values()
        self.energy_monitor = ZeusMonitor(cpu_indices=cpu_indices, gpu_indices=gpu_indices)
        self.gpu_indices = self.energy_monitor.gpu_indices
        self.cpu_indices = self.energy_monitor.cpu_indices
        kinds = {"gpu": bool(self.gpu_indices), "cpu": bool(self.cpu_indices)}
        kinds["dram"] = bool(self.cpu_indices) and any(
            get_cpus().supports_get_dram_energy_consumption(i) for i in self.cpu_indices
        )
        families = energy_counters(self.registry, kinds, buckets)
        self.gpu_histograms = families.get("gpu")
        self.cpu_histograms = families.get("cpu")
        self.dram_histograms = families.get("dram")
        self._buckets = buckets
        self._open: set[str] = set()

    def _key(self, name: str) -> str:
        return f"__EnergyHistogram_{name}"

    def begin_window(self, name: str, sync_execution: bool = True) -> None:
        """Start measuring window ``name`` (names may nest and overlap, as in ZeusMonitor)."""
        if name in self._open:
            raise WindowError(f"EnergyHistogram window {name!r} is already open; end it first")
        self.energy_monitor.begin_window(self._key(name), sync_execution=sync_execution)
        self._open.add(name)

    def end_window(self, name: str, sync_execution: bool = True) -> None:
        """Measure window ``name``, observe its energy in the histograms and push them.

        Raises :class:`PushgatewayError` if the push fails; the observation stays in the
        registry and goes out with the next push that works.
        """
        if name not in self._open:
            opened = ", ".join(repr(k) for k in sorted(self._open)) or "none"
            raise WindowError(
                f"EnergyHistogram window {name!r} was never begun (open windows: {opened}); "
                "call begin_window first"
            )
        m = self.energy_monitor.end_window(self._key(name), sync_execution=sync_execution)
        self._open.discard(name)
        for kind, family, energies in (
            ("gpu", self.gpu_histograms, m.gpu_energy),
            ("cpu", self.cpu_histograms, m.cpu_energy),
            ("dram", self.dram_histograms, m.dram_energy),
        ):
            for index, joules in (energies or {}).items():
                if family is not None:
                    family.labels(window=name, index=index).observe(joules)
                    self._check_range(kind, index, joules)
        self._pusher.push()

    def _check_range(self, kind: str, index: int, joules: float) -> None:
        """Warn (as Zeus does) when a value falls outside the buckets it was given."""
        bounds = self._buckets[kind]
        if bounds[0] <= joules <= bounds[-1]:
            return
        above = joules > bounds[-1]
        side = "above the largest" if above else "below the smallest"
        edge = bounds[-1] if above else bounds[0]
        warnings.warn(
            f"{kind.upper()} {index} energy {joules:.6g} J is {side} bucket ({edge:g} J) of "
            f"{kind}_bucket_range; choose buckets that span your windows' energy",
            UserWarning,
            stacklevel=3,
        )


class _PeriodicMetric(Metric):
    """Windows that each run a loop pushing every ``update_period`` seconds."""

    kind = "metric"

    def __init__(self, update_period: float, pushgateway_url, job, prometheus_url) -> None:
        who = type(self).__name__
        self.update_period = check_period(update_period)
        self.pushgateway_url = resolve_url(pushgateway_url, prometheus_url, who)
        self._pusher = shared_pusher(self.pushgateway_url, job)
        self.job = self._pusher.job
        self.registry = self._pusher.registry
        self.window_state: dict[str, MonitoringProcessState] = {}

    def _check_new(self, name: str) -> None:
        if name in self.window_state:
            raise WindowError(
                f"{type(self).__name__} window {name!r} is already open; end it first"
            )

    def _start(self, name: str, target, args: tuple) -> None:
        """Run ``target(name, queue, *args)`` for window ``name``; its first push is done (or
        its failure raised) when this returns."""
        context = mp.get_context(START_METHOD)
        stop = context.Queue()
        proc = context.Process(target=target, args=(name, stop, *args))
        proc.start()
        self.window_state[name] = MonitoringProcessState(queue=stop, proc=proc)

    def _stop(self, name: str, sync_execution: bool) -> None:
        """Tell window ``name``'s loop to take its last reading and push, and wait for it."""
        if name not in self.window_state:
            opened = ", ".join(repr(k) for k in self.window_state) or "none"
            raise WindowError(
                f"{type(self).__name__} window {name!r} was never begun (open windows: "
                f"{opened}); call begin_window first"
            )
        if sync_execution:
            device.current().sync(self._gpus())
        state = self.window_state.pop(name)
        state.queue.put("stop")
        state.proc.join(timeout=JOIN_TIMEOUT)
        if state.proc.is_alive():
            log.warning(
                "the %s loop of window %r did not finish in %g s; it is left to stop at exit",
                self.kind,
                name,
                JOIN_TIMEOUT,
            )
            state.proc.terminate()

    def _gpus(self) -> list[int] | None:
        return getattr(self, "gpu_indices", None)


class EnergyCumulativeCounter(_PeriodicMetric):
    """Energy (J) of GPUs, CPUs and DRAM as Prometheus counters that only grow.

    While a window is open, its loop adds the energy measured since its last reading to the
    counters and pushes them every ``update_period`` seconds; ``end_window`` has it add the rest
    up to that moment and push once more, so a window's counters end at exactly the energy
    measured between ``begin_window`` and ``end_window``. Counters live as long as this process:
    a window name used again under the same gateway and job keeps counting up.

    Args:
        cpu_indices, gpu_indices: what to measure (as for :class:`~zeus_nb.monitor.ZeusMonitor`).
        update_period: seconds between pushes.
        pushgateway_url: the Pushgateway (``prometheus_url=`` is accepted too).
        job: the Prometheus job the series are pushed under.
    """

    kind = "energy-counter"

    def __init__(
        self,
        cpu_indices: list | None,
        gpu_indices: list | None,
        update_period: float,
        pushgateway_url: str | None = None,
        job: str | None = None,
        *,
        prometheus_url: str | None = None,
    ) -> None:
        super().__init__(update_period, pushgateway_url, job, prometheus_url)
        self.cpu_indices = cpu_indices
        self.gpu_indices = gpu_indices

    def begin_window(self, name: str, sync_execution: bool = False) -> None:
        """Start counting window ``name``: the counters appear at once (pushed at 0 J more).

        Raises :class:`PushgatewayError` if that first push fails (nothing is left running).
        """
        self._check_new(name)
        if sync_execution:
            device.current().sync(self.gpu_indices)
        args = (
            self.cpu_indices,
            self.gpu_indices,
            self.update_period,
            self.pushgateway_url,
            self.job,
        )
        self._start(name, energy_monitoring_loop, args)

    def end_window(self, name: str, sync_execution: bool = False) -> None:
        """Add the energy up to now to window ``name``'s counters, push them and stop."""
        self._stop(name, sync_execution)


class PowerGauge(_PeriodicMetric):
    """GPU power (W) as a Prometheus gauge, set from a :class:`~zeus_nb.monitor.power.PowerMonitor`.

    Args:
        gpu_indices: GPUs to watch.
        update_period: seconds between pushes.
        pushgateway_url: the Pushgateway (``prometheus_url=`` is accepted too).
        job: the Prometheus job the series are pushed under.
    """

    kind = "power-gauge"

    def __init__(
        self,
        gpu_indices: list | None,
        update_period: float,
        pushgateway_url: str | None = None,
        job: str | None = None,
        *,
        prometheus_url: str | None = None,
    ) -> None:
        super().__init__(update_period, pushgateway_url, job, prometheus_url)
        self.gpu_indices = gpu_indices

    def begin_window(self, name: str, sync_execution: bool = False) -> None:
        """Start sampling power for window ``name`` and push the first reading.

        Raises :class:`PushgatewayError` if that first push fails (nothing is left running).
        """
        self._check_new(name)
        if sync_execution:
            device.current().sync(self.gpu_indices)
        args = (self.gpu_indices, self.update_period, self.pushgateway_url, self.job)
        self._start(name, power_monitoring_loop, args)

    def end_window(self, name: str, sync_execution: bool = False) -> None:
        """Set and push window ``name``'s last power reading, then stop sampling."""
        self._stop(name, sync_execution)
