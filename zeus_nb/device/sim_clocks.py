"""SM clocks of the simulated GPUs: the frequency model runs pipeline instructions.

Mixed into :class:`~zeus_nb.device.sim.SimulatedSystem`: an instruction (:class:`Work`) costs
the time and power the calibrated :class:`FrequencyModel` gives at each GPU's clock, and waiting on
communication costs the blocking power, on the same virtual clock as training steps.
"""

from __future__ import annotations

from zeus_nb.device.frequency import CLOCKS as SM_CLOCKS
from zeus_nb.device.frequency import ClockSpec, FrequencyModel, Work, frequency_model
from zeus_nb.errors import InputError, UnsupportedError


class SimulatedClocks:
    """Clock data and instruction execution for a simulated system (``source``, ``gpus``)."""

    @property
    def clock_spec(self) -> ClockSpec:
        """The SM clocks of this GPU model (bundled traces only)."""
        key = self.source.lower()
        if key not in SM_CLOCKS:
            raise UnsupportedError(
                f"the simulated GPU {self.source!r} has no frequency model; SM clocks are "
                f"modelled for the bundled GPUs only: {', '.join(SM_CLOCKS)}"
            )
        return SM_CLOCKS[key]

    @property
    def frequency_model(self) -> FrequencyModel:
        """The calibrated clock/power model of this GPU (fitted on first use, then cached)."""
        self.clock_spec  # noqa: B018 - raises for GPUs without clock data
        return frequency_model(self.source.lower())

    def run_work(self, work: Work, indices: list[int] | None = None) -> float:
        """Run ``work`` on the given GPUs (all by default) at each one's clock; returns seconds.

        Virtual time advances by the slowest GPU's time; each GPU is charged its own energy.
        """
        model = self.frequency_model
        gpus = self.gpus if indices is None else [self.gpu(i) for i in indices]
        t0, dt, powers = self._now, 0.0, {}
        for g in gpus:
            f = g.clock_for(work)
            busy, watts = model.time(work, f), model.power(work, f)
            g._energy += watts * busy
            g._power = watts
            powers[g.index] = watts
            dt = max(dt, busy)
        self._now = t0 + dt
        for listener in self._listeners:
            listener(t0, self._now, powers)
        return dt

    def block(self, seconds: float, indices: list[int] | None = None) -> None:
        """Let ``seconds`` pass while the GPUs wait on communication, at blocking power."""
        if seconds < 0:
            raise InputError("cannot go back in time")
        watts = self.frequency_model.blocking_power()
        gpus = self.gpus if indices is None else [self.gpu(i) for i in indices]
        t0 = self._now
        for g in gpus:
            g._energy += watts * seconds
            g._power = watts
        self._now += seconds
        for listener in self._listeners:
            listener(t0, self._now, {g.index: watts for g in gpus})
