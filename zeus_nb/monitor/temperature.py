"""GPU temperature over time, with Zeus's ``TemperatureMonitor`` call shapes.

Sampled on a daemon thread of this process (like :class:`~zeus_nb.monitor.power.PowerMonitor`),
with Unix timestamps. The simulated GPU has no temperature (the Zeus traces hold none), so this
needs GPUs that report one (real NVIDIA GPUs).
"""

from __future__ import annotations

import collections
import threading
import weakref

from zeus_nb import device
from zeus_nb.device.base import GPUSystem
from zeus_nb.errors import InputError
from zeus_nb.monitor.power import Sampler, in_range, nearest, stop_sampling

_KEY = "temperature"


class TemperatureMonitor:
    """GPU core temperatures (degrees C), sampled every ``update_period`` seconds.

    Args:
        gpu_indices: GPUs to watch (default: all).
        update_period: seconds between samples (default 1 s: temperature changes slowly).
        max_samples_per_gpu: keep at most this many samples per GPU.
        backend, system: which GPUs, as for :class:`~zeus_nb.monitor.ZeusMonitor`.

    Raises:
        UnsupportedError: a GPU reports no temperature (e.g. the simulated GPU).
    """

    def __init__(
        self,
        gpu_indices: list[int] | None = None,
        update_period: float = 1.0,
        max_samples_per_gpu: int | None = None,
        *,
        backend: str | None = None,
        system: GPUSystem | None = None,
    ):
        self.system = system if system is not None else device.current(backend)
        if gpu_indices is None:
            gpu_indices = [g.index for g in self.system.gpus]
        if not gpu_indices:
            raise InputError("gpu_indices is empty: give at least one GPU index")
        if update_period <= 0:
            raise InputError(f"update_period must be > 0 s, got {update_period}")
        self.gpu_indices = list(gpu_indices)
        self.update_period = float(update_period)
        gpus = [self.system.gpu(i) for i in self.gpu_indices]
        self._lock = threading.Lock()
        self._samples = {
            _KEY: {i: collections.deque(maxlen=max_samples_per_gpu) for i in self.gpu_indices}
        }
        self._thread = Sampler(
            gpus,
            [_KEY],
            lambda g, _: g.temperature(),
            self._samples,
            self.update_period,
            self._lock,
            "zeus-nb-temperature-monitor",
        )
        self._thread.sample()  # raises UnsupportedError here, not later on the thread
        self._thread.start()
        self._finalizer = weakref.finalize(self, stop_sampling, self._thread)

    def stop(self) -> None:
        """Stop sampling (samples taken so far stay queryable)."""
        if self._finalizer.alive:
            self._finalizer()

    def get_temperature_timeline(
        self,
        gpu_index: int | None = None,
        start_time: float | None = None,
        end_time: float | None = None,
    ) -> dict[int, list[tuple[float, float]]]:
        """``{gpu: [(unix time, degrees C), ...]}``, optionally within [start, end]."""
        if gpu_index is not None and gpu_index not in self.gpu_indices:
            raise InputError(f"GPU {gpu_index} is not monitored (monitored: {self.gpu_indices})")
        targets = [gpu_index] if gpu_index is not None else self.gpu_indices
        with self._lock:
            return {i: in_range(self._samples[_KEY][i], start_time, end_time) for i in targets}

    def get_temperature(self, time: float | None = None) -> dict[int, float] | None:
        """Temperature per GPU at the sample nearest ``time`` (default: the latest)."""
        timelines = self.get_temperature_timeline()
        if not all(timelines.values()):
            return None
        return {i: nearest(pts, time) for i, pts in timelines.items()}
