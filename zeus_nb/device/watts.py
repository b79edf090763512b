"""zeus-nb's helpers of every GPU, in watts and joules, defined once over Zeus's methods.

:class:`zeus_nb.device.base.GPU` mixes them in: a backend implements Zeus's methods (mW, mJ, MHz)
and gets these (W, J, checked arguments) for free, so zeus-nb's own code reads any backend the
same way.
"""

from __future__ import annotations

import warnings

from zeus_nb.device.gpu.common import ZeusGPUInvalidArgError, ZeusGPUNotSupportedError
from zeus_nb.device.sampling import PowerIntegrator
from zeus_nb.errors import DeviceError, UnsupportedError
from zeus_nb.inputs.validate import POWER_LIMIT, integer, number

__all__ = ["POWER_DOMAINS", "WattHelpers"]

#: Power domains a GPU may report, with Zeus's names: the instantaneous board power, the board
#: power averaged by the driver (over about a second on NVIDIA), and the memory's average power.
POWER_DOMAINS = ("device_instant", "device_average", "memory_average")

#: Zeus's method (mW) behind each power domain.
_DOMAIN_READERS = {
    "device_instant": "get_instant_power_usage",
    "device_average": "get_average_power_usage",
    "memory_average": "get_average_memory_power_usage",
}


class WattHelpers:
    """Watts, joules and checked settings over the Zeus methods of the class it is mixed into."""

    index: int

    @property
    def name(self) -> str:
        return str(self.get_name())

    def power_limit_constraints(self) -> tuple[float, float]:
        """(minimum, maximum) power limit in W."""
        lo, hi = self.get_power_management_limit_constraints()
        return lo / 1000.0, hi / 1000.0

    def default_power_limit(self) -> float:
        return self.get_default_power_management_limit() / 1000.0

    def get_power_limit(self) -> float:
        return self.get_power_management_limit() / 1000.0

    def set_power_limit(self, watts: float) -> None:
        """Set the power limit in W after checking it against the GPU's range (no guard).

        The limit the GPU already has is not a change: nothing is written, so asking for it
        never fails, not even on a GPU this process may not change."""
        mw = int(round(self.check_power_limit(watts) * 1000))
        if self.get_power_management_limit() != mw:
            self._write_power_limit(mw)

    def check_power_limit(self, watts: float) -> float:
        """Validate a requested limit against the constraints; returns it as float."""

        w = number(watts, f"power limit of GPU {self.index}", text_ok=False)  # finite, a number
        lo, hi = self.power_limit_constraints()
        if not lo <= w <= hi:
            unit = POWER_LIMIT.likely_unit(w)
            raise ZeusGPUInvalidArgError(
                f"power limit {w:g} W is outside GPU {self.index}'s range [{lo:g}, {hi:g}] W"
                + (f"; {unit}" if unit else "")
            )
        return w

    def supports_energy_counter(self) -> bool:
        return self.supports_get_total_energy_consumption()

    def energy(self) -> float:
        """Energy in J since an arbitrary origin (differences are what matter): the counter, or
        integrated power on GPUs without one."""
        if self.supports_energy_counter():
            try:
                return self.get_total_energy_consumption() / 1000.0
            except ZeusGPUNotSupportedError:
                self._no_energy_counter()
        integrator = self.__dict__.get("_integrator")
        if integrator is None:
            integrator = self._integrator = PowerIntegrator(self.power)
        return integrator.energy()

    def _no_energy_counter(self) -> None:
        """The counter said it is not supported after all: integrate power from now on."""

    def power(self) -> float:
        """Instant board power in W, as Zeus's monitors read it (NVML's plain reading is a 1 s
        average on Ampere and newer, which lags a change of load by a second)."""
        return self.get_instant_power_usage() / 1000.0

    def power_domains(self) -> tuple[str, ...]:
        """The :data:`POWER_DOMAINS` this GPU reports (every GPU has ``device_instant``)."""
        domains = self.__dict__.get("_domains")
        if domains is None:
            found = []
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for domain, reader in _DOMAIN_READERS.items():
                    try:
                        getattr(self, reader)()
                        found.append(domain)
                    except (UnsupportedError, DeviceError):
                        pass
            # Without the instant reading (older drivers), the cheapest power reading stands in.
            self._instant_from_usage = "device_instant" not in found
            domains = self._domains = tuple(["device_instant"] * self._instant_from_usage + found)
        return domains

    def read_power(self, domain: str = "device_instant") -> float:
        """Power in W of one of :meth:`power_domains`."""
        if domain not in self.power_domains():
            raise ZeusGPUNotSupportedError(
                f"GPU {self.index} ({self.name}) does not report the {domain!r} power domain; "
                f"it has {', '.join(self.power_domains())}"
            )
        if domain == "device_instant" and self._instant_from_usage:
            return self.power()
        return getattr(self, _DOMAIN_READERS[domain])() / 1000.0

    def temperature(self) -> float:
        """GPU core temperature in degrees Celsius."""
        return float(self.get_gpu_temperature())

    def supported_clocks(self) -> list[int]:
        """Supported SM (graphics) clocks in MHz, highest first."""
        return sorted({int(c) for c in self.get_supported_graphics_clocks()}, reverse=True)

    def supported_clocks_at(self, memory_mhz: int) -> list[int]:
        """Supported SM clocks in MHz at memory clock ``memory_mhz``, highest first."""
        clocks = self.get_supported_graphics_clocks(int(memory_mhz))
        return sorted({int(c) for c in clocks}, reverse=True)

    def supported_memory_clocks(self) -> list[int]:
        """Supported memory clocks in MHz, highest first."""
        return sorted({int(c) for c in self.get_supported_memory_clocks()}, reverse=True)

    def check_clock(self, mhz: int) -> int:
        """Validate a requested SM clock against :meth:`supported_clocks`; returns it as int."""

        f = integer(mhz, f"SM clock of GPU {self.index} (MHz)", 0, 10**6, text_ok=False)
        clocks = self.supported_clocks()
        if f not in clocks:
            near = min(clocks, key=lambda c: abs(c - f))
            raise ZeusGPUInvalidArgError(
                f"{f} MHz is not a supported SM clock of GPU {self.index} "
                f"(range {clocks[-1]}-{clocks[0]} MHz; nearest: {near} MHz)"
            )
        return f

    def _checked_clocks(self, min_mhz: int, max_mhz: int) -> tuple[int, int]:
        lo, hi = self.check_clock(min_mhz), self.check_clock(max_mhz)
        if lo > hi:
            raise ZeusGPUInvalidArgError(f"locked clock range is empty: {lo} MHz > {hi} MHz")
        return lo, hi

    def set_locked_clocks(self, min_mhz: int, max_mhz: int) -> None:
        """Keep the SM clock within [min_mhz, max_mhz] (checked; no guard); the lock the GPU
        already has is not a change."""
        wanted = self._checked_clocks(min_mhz, max_mhz)
        if self.locked_clocks() != wanted:
            self._write_locked_clocks(*wanted)

    def reset_locked_clocks(self) -> None:
        """Let the driver choose SM clocks again (undo :meth:`set_locked_clocks`; no guard)."""
        self._write_reset_locked_clocks()

    def persistence_mode(self) -> bool:
        """Whether the driver stays loaded with no client (a flag where there is no driver)."""
        return self.get_persistence_mode()
