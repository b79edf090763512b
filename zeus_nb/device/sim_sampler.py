"""Power samples of the simulated GPUs on a grid of virtual time."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from zeus_nb.device.base import PowerSampler, PowerTimeline

if TYPE_CHECKING:
    from zeus_nb.device.sim import SimulatedSystem


class SimSampler(PowerSampler):
    """Samples the piecewise-constant simulated power on a grid of virtual time."""

    MAX_SAMPLES_PER_STEP = 10_000

    def __init__(self, system: SimulatedSystem, indices: list[int], period: float):
        super().__init__(indices, period)
        for i in indices:
            system.gpu(i)
        self._system = system
        self._next = 0.0

    def start(self) -> SimSampler:
        self._next = self._system.clock()
        self._system._listeners.append(self._on_advance)
        return self

    def _on_advance(self, t0: float, t1: float, powers: dict[int, float]) -> None:
        count = 0
        while self._next < t1 and count < self.MAX_SAMPLES_PER_STEP:
            for i, pts in self.timeline.samples.items():
                pts.append((self._next, powers.get(i, 0.0)))
            self._next += self.timeline.period
            count += 1
        if self._next < t1:  # skip ahead rather than flood memory
            skipped = math.ceil((t1 - self._next) / self.timeline.period)
            self._next += skipped * self.timeline.period

    def stop(self) -> PowerTimeline:
        if self._on_advance in self._system._listeners:
            self._system._listeners.remove(self._on_advance)
        return self.timeline
