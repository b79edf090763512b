"""Power over time, with Zeus's ``PowerMonitor`` call shapes.

``PowerMonitor`` samples the power of some GPUs in one or more power domains (``device_instant``,
``device_average``, ``memory_average``, where the GPU reports them) and answers timeline, power
and energy queries whose times are Unix timestamps, comparable with ``time.time()`` on every
backend (code can ask for ``start_time=time.time() - 5``).

Sampling happens on a daemon *thread* of this process, not in a spawned process, so the user's
``__main__`` (a script or a notebook) is never imported again; the thread stops with
:meth:`PowerMonitor.stop`, when the monitor is garbage-collected, and at interpreter exit. On the
simulated GPU's virtual clock, samples are taken on a grid of virtual time as
``zeus_nb.step()`` advances it, and stamped with the simulated system's epoch plus virtual time.
"""

from __future__ import annotations

import bisect
import collections
import logging
import threading
import time
import weakref
from enum import Enum

import numpy as np

from zeus_nb import device
from zeus_nb.device.base import POWER_DOMAINS, GPUSystem
from zeus_nb.errors import InputError
from zeus_nb.inputs.api import checked_methods
from zeus_nb.inputs.validate import DURATION, number

log = logging.getLogger(__name__)

#: Sampling period when none is given: Zeus polls at least this often, since GPU power counters
#: update at about 10 Hz or faster.
DEFAULT_UPDATE_PERIOD = 0.1

Timeline = dict[int, list[tuple[float, float]]]


class PowerDomain(str, Enum):
    """Zeus's GPU power domains."""

    DEVICE_INSTANT = "device_instant"
    DEVICE_AVERAGE = "device_average"
    MEMORY_AVERAGE = "memory_average"


def _domain(value: str | PowerDomain) -> str:
    name = value.value if isinstance(value, PowerDomain) else str(value)
    if name not in POWER_DOMAINS:
        raise InputError(f"unknown power domain {name!r}; use one of {', '.join(POWER_DOMAINS)}")
    return name


class Sampler(threading.Thread):
    """Calls ``read(gpu, key)`` for every key and GPU each period, appending (Unix time, value)
    to ``samples[key][gpu index]``; a daemon thread of this process."""

    def __init__(self, gpus, keys, read, samples, period: float, lock: threading.Lock, name: str):
        super().__init__(daemon=True, name=name)
        self.gpus, self.domains, self.read, self.samples = gpus, keys, read, samples
        self.period, self.lock = period, lock
        self.stopped = threading.Event()

    def sample(self) -> None:
        t = time.time()
        readings = [(d, g.index, self.read(g, d)) for d in self.domains for g in self.gpus]
        with self.lock:
            for d, i, watts in readings:
                self.samples[d][i].append((t, watts))

    def run(self) -> None:
        next_t = time.monotonic()
        while not self.stopped.is_set():
            try:
                self.sample()
            except Exception as e:  # a GPU that fails once should not kill the timeline silently
                log.warning("%s: reading failed, sampling stops: %s", self.name, e)
                return
            now, next_t = time.monotonic(), next_t + self.period
            if next_t < now:  # a stall: go on a period from now, not in a burst to catch up
                next_t = now + self.period
            self.stopped.wait(next_t - now)


def in_range(pts, start_time: float | None, end_time: float | None) -> list[tuple[float, float]]:
    """The (time, value) points within [start_time, end_time] (None: unbounded), sorted."""
    lo = -np.inf if start_time is None else start_time
    hi = np.inf if end_time is None else end_time
    return sorted(p for p in pts if lo <= p[0] <= hi)


def area(pts: list[tuple[float, float]], start: float, end: float) -> float | None:
    """Joules under sorted (time, W) ``pts`` between ``start`` and ``end``: the samples joined by
    straight lines (trapezoidal rule), cut at the edges, where the samples on either side are
    interpolated; within the samples' own span only. None if that span misses the window.

    A stall of the sampling thread at an edge (a busy machine, a call holding the GIL) then
    loses no time: the samples inside alone would miss it, and part of a period at each edge.
    """
    if not pts:
        return None
    t, w = np.array(pts, dtype=float).T
    lo, hi = max(start, t[0]), min(end, t[-1])
    if hi < lo:
        return None
    ts = np.concatenate(([lo], t[(t > lo) & (t < hi)], [hi]))
    ws = np.interp(ts, t, w)
    return float(np.sum(np.diff(ts) * (ws[1:] + ws[:-1]) / 2))


def nearest(pts: list[tuple[float, float]], time: float | None) -> float:
    """Value of the point nearest ``time`` in sorted, non-empty ``pts`` (the last for None)."""
    if time is None:
        return pts[-1][1]
    times = [p[0] for p in pts]
    k = bisect.bisect_left(times, time)
    near = [j for j in (k - 1, k) if 0 <= j < len(pts)]
    return pts[min(near, key=lambda j: abs(times[j] - time))][1]


def stop_sampling(sampler: Sampler | None, virtual=None) -> None:
    if sampler is not None:
        sampler.stopped.set()
        if sampler.is_alive() and sampler is not threading.current_thread():
            sampler.join(timeout=2.0)
    if virtual is not None:
        virtual.stop()


@checked_methods
class PowerMonitor:
    """Power timelines of some GPUs, sampled in the background.

    Args:
        gpu_indices: GPUs to sample (default: all of the current system's).
        update_period: seconds between samples (default 0.1 s).
        max_samples_per_gpu: keep at most this many samples per GPU and domain (oldest dropped).
        power_domains: domains to sample (default: every domain the GPUs report).
        backend, system: which GPUs, as for :class:`~zeus_nb.monitor.ZeusMonitor`.
        gpu_update_period, gpu_power_domains: the same as ``update_period`` and
            ``power_domains``, under the names newer Zeus releases use.
    """

    def __init__(
        self,
        gpu_indices: list[int] | None = None,
        update_period: float | None = None,
        max_samples_per_gpu: int | None = None,
        power_domains: list[str | PowerDomain] | None = None,
        *,
        backend: str | None = None,
        system: GPUSystem | None = None,
        gpu_update_period: float | None = None,
        gpu_power_domains: list[str | PowerDomain] | None = None,
    ):
        self.system = system if system is not None else device.current(backend)
        if gpu_indices is None:
            gpu_indices = [g.index for g in self.system.gpus]
        if not gpu_indices:
            raise InputError("gpu_indices is empty: give at least one GPU index")
        self.gpu_indices = list(gpu_indices)
        self.gpus = [self.system.gpu(i) for i in self.gpu_indices]
        period = update_period if update_period is not None else gpu_update_period
        self.update_period = (
            number(period, "update_period", DURATION, "give seconds, e.g. 0.1", text_ok=False)
            if period is not None
            else DEFAULT_UPDATE_PERIOD
        )  # NaN once passed "<= 0" and sampled without end
        self.power_domains = self._resolve_domains(power_domains or gpu_power_domains)
        self._lock = threading.Lock()
        self.samples: dict[str, dict[int, collections.deque]] = {
            d: {i: collections.deque(maxlen=max_samples_per_gpu) for i in self.gpu_indices}
            for d in self.power_domains
        }
        self._thread: Sampler | None = None
        self._virtual = None
        if self.system.virtual_clock:
            self._virtual = self.system.power_sampler(self.gpu_indices, self.update_period)
            self._virtual.start()
        else:
            self._thread = Sampler(
                self.gpus,
                self.power_domains,
                lambda g, d: g.read_power(d),
                self.samples,
                self.update_period,
                self._lock,
                "zeus-nb-power-monitor",
            )
            self._thread.sample()  # one sample now, so queries right away have data
            self._thread.start()
        self._finalizer = weakref.finalize(self, stop_sampling, self._thread, self._virtual)

    @property
    def gpu_update_period(self) -> float:
        """``update_period`` under newer Zeus's name."""
        return self.update_period

    def _resolve_domains(self, requested) -> list[str]:
        supported = [d for d in POWER_DOMAINS if all(d in g.power_domains() for g in self.gpus)]
        if requested is None:
            return supported
        if not requested:
            raise InputError("power_domains must be None or non-empty")
        out = []
        for d in map(_domain, requested):
            if d not in supported:
                raise InputError(
                    f"power domain {d!r} is not reported by these GPUs; they have "
                    f"{', '.join(supported)}"
                )
            if d not in out:
                out.append(d)
        return out

    def stop(self) -> None:
        """Stop sampling (samples taken so far stay queryable), with one last sample now, so
        that a window that ended before the stop has a sample after its end edge."""
        self._drain()
        if self._finalizer.alive:
            self._finalizer()
            if self._thread is not None:
                try:
                    self._thread.sample()
                except Exception as e:  # the GPU failed on this read: the timeline ends before
                    log.debug("last sample at stop failed: %s", e)

    def __enter__(self) -> PowerMonitor:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _drain(self) -> None:
        """Move the virtual-clock sampler's new samples into the deques, in Unix time."""
        if self._virtual is None:
            return
        with self._lock:
            for i, pts in self._virtual.timeline.samples.items():
                stamped = [(self.system.wall_time(t), w) for t, w in pts]
                pts.clear()
                for d in self.power_domains:
                    self.samples[d][i].extend(stamped)

    def get_power_timeline(
        self,
        power_domain: str | PowerDomain = "device_instant",
        gpu_index: int | None = None,
        start_time: float | None = None,
        end_time: float | None = None,
        *,
        gpu_power_domain: str | PowerDomain | None = None,
    ) -> Timeline:
        """``{gpu: [(unix time, W), ...]}`` of one domain, optionally within [start, end]."""
        domain = _domain(gpu_power_domain or power_domain)
        if domain not in self.samples:
            raise InputError(
                f"power domain {domain!r} is not being sampled; sampled: "
                f"{', '.join(self.power_domains)}"
            )
        if gpu_index is not None and gpu_index not in self.gpu_indices:
            raise InputError(f"GPU {gpu_index} is not monitored (monitored: {self.gpu_indices})")
        self._drain()
        targets = [gpu_index] if gpu_index is not None else self.gpu_indices
        with self._lock:
            return {i: in_range(self.samples[domain][i], start_time, end_time) for i in targets}

    def get_all_power_timelines(
        self,
        gpu_index: int | None = None,
        start_time: float | None = None,
        end_time: float | None = None,
    ) -> dict[str, Timeline]:
        """``{domain: {gpu: [(unix time, W), ...]}}`` for every sampled domain."""
        return {
            d: self.get_power_timeline(d, gpu_index, start_time, end_time)
            for d in self.power_domains
        }

    def get_energy(
        self,
        start_time: float,
        end_time: float,
        power_domain: str | PowerDomain | None = None,
    ) -> dict[int, float] | None:
        """Energy in J per GPU between two Unix times: the area under the power timeline
        (:func:`area`: trapezoidal rule, the edges interpolated from the samples beside them);
        0 J where fewer than two samples reach the window, None if no GPU's samples reach it."""
        if power_domain is None:
            power_domain = next(
                (d for d in ("device_instant", "device_average") if d in self.power_domains),
                self.power_domains[0],
            )
        timelines = self.get_power_timeline(power_domain)
        joules = {i: area(pts, start_time, end_time) for i, pts in timelines.items()}
        if all(j is None for j in joules.values()):
            return None
        return {i: 0.0 if j is None else j for i, j in joules.items()}

    def get_power(
        self, time: float | None = None, power_domain: str | PowerDomain = "device_instant"
    ) -> dict[int, float] | None:
        """Power in W per GPU at the sample nearest ``time`` (default: the latest); None if a
        GPU has no sample yet."""
        timelines = self.get_power_timeline(power_domain)
        if not all(timelines.values()):
            return None
        return {i: nearest(pts, time) for i, pts in timelines.items()}


def infer_counter_update_period(gpu_indicies: list[int]) -> float:
    """How often to poll the GPUs' power: half their counters' fastest update period, <= 0.1 s.

    Each GPU model's counter is read back to back for up to a second; the median time between
    changes is its update period. Polling faster than half of it only repeats values. A counter
    that never changes in that second (a simulated GPU, an idle one) gives the 0.1 s default.
    (The parameter keeps Zeus's spelling.)
    """
    system = device.current()
    models = {system.gpu(i).name: system.gpu(i) for i in gpu_indicies}
    periods = []
    for name, gpu in models.items():
        domain = next(
            (d for d in ("device_instant", "device_average") if d in gpu.power_domains()), None
        )
        if domain is None:
            continue
        changes, last, deadline = [], None, time.monotonic() + 1.0
        for _ in range(1000):
            now, value = time.monotonic(), gpu.read_power(domain)
            if last is not None and value != last:
                changes.append(now)
            last = value
            if now > deadline:
                break
        if len(changes) >= 3:
            gaps = sorted(b - a for a, b in zip(changes, changes[1:], strict=False))
            periods.append(gaps[len(gaps) // 2])
            log.info("%s: power counter updates every %.3f s", name, periods[-1])
    return min([p / 2 for p in periods] + [0.1])
