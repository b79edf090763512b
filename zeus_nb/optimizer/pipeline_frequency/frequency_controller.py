"""Locks one GPU's SM clock to the frequency of the instruction about to run (Zeus's name).

Zeus's controller runs in a child process so that the NVML call does not stall the training
loop. Here the clock is set in the calling process: the simulated GPU lives in this process
(a child could not change it), and zeus-nb's device layer is what sets clocks on every backend.
Before the first change a :class:`~zeus_nb.device.guard.SettingsGuard` records the GPU's clocks
(and power limit), so they come back on :meth:`FrequencyController.end`, at exit, on errors and
signals, and through ``zeus-nb restore`` after a crash.
"""

from __future__ import annotations

import logging

from zeus_nb import device
from zeus_nb.device.base import GPU
from zeus_nb.device.guard import SettingsGuard

logger = logging.getLogger(__name__)


class FrequencyController:
    """Sets ``device_id``'s SM clock; ``set_frequency(0)`` changes nothing.

    As Zeus's controller does when it starts, it puts the power limit back to the default and
    locks the SM clock at the highest supported one. With ``start_at_max=False`` nothing is
    touched until the first :meth:`set_frequency` (zeus-nb's plan-driven optimizer).

    Args:
        device_id: index of the GPU in zeus-nb's current GPU system.
        gpu: the device-layer GPU to drive instead of looking ``device_id`` up.
        backend: the GPU system's backend name (also for ``zeus-nb restore``).
        start_at_max: lock the highest clock (and the default power limit) right away.
    """

    def __init__(
        self,
        device_id: int = 0,
        gpu: GPU | None = None,
        backend: str = "auto",
        start_at_max: bool = True,
    ) -> None:
        if gpu is None:
            gpu = device.current(backend).gpu(device_id)
        self.device_id = device_id
        self.gpu = gpu
        self.current: int | None = None
        kinds = ("power_limit", "locked_clocks") if start_at_max else ("locked_clocks",)
        self._guard = SettingsGuard([gpu], kinds, backend=backend)
        if start_at_max:
            self._guard.record()
            if gpu.get_power_limit() != gpu.default_power_limit():
                gpu.set_power_limit(gpu.default_power_limit())
            self.set_frequency(max(gpu.supported_clocks()))

    def set_frequency(self, frequency: int) -> None:
        """Lock the SM clock at ``frequency`` MHz (0: leave it as it is)."""
        frequency = int(frequency)
        if frequency == 0 or frequency == self.current:
            return
        self._guard.record()  # once: the original settings, before the first change
        self.gpu.set_locked_clocks(frequency, frequency)
        self.current = frequency

    def end(self) -> None:
        """Give the GPU its original clocks (and power limit) back."""
        self._guard.restore()
        self.current = None
