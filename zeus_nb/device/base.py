"""The GPU interface every backend implements.

Code above the device layer (monitor, optimizers, sweeps, notebooks) talks to a :class:`GPUSystem`
and its :class:`GPU` objects only, and never asks which backend it has.
"""

from __future__ import annotations

import functools
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from zeus_nb.errors import InputError

if TYPE_CHECKING:
    from zeus_nb.device.cpu.packages import CPU

#: Power domains a GPU may report, with Zeus's names: the instantaneous board power, the board
#: power averaged by the driver (over about a second on NVIDIA), and the memory's average power.
POWER_DOMAINS = ("device_instant", "device_average", "memory_average")


class GPU(ABC):
    """One GPU. Power in watts, energy in joules, whatever the backend's native units."""

    index: int
    #: Whether settings changed here outlive this process (real GPUs' do; a replay's do not),
    #: i.e. whether a settings guard writes a state file for ``zeus-nb restore``.
    persistent: bool = True

    @property
    @abstractmethod
    def name(self) -> str: ...

    @abstractmethod
    def power_limit_constraints(self) -> tuple[float, float]:
        """(minimum, maximum) power limit in W."""

    @abstractmethod
    def default_power_limit(self) -> float: ...

    @abstractmethod
    def get_power_limit(self) -> float: ...

    @abstractmethod
    def set_power_limit(self, watts: float) -> None:
        """Set the power limit; raises PowerLimitPermissionError without the privilege."""

    @abstractmethod
    def supports_energy_counter(self) -> bool: ...

    @abstractmethod
    def energy(self) -> float:
        """Energy counter in J since an arbitrary origin; differences are what matter."""

    @abstractmethod
    def power(self) -> float:
        """Instantaneous (or latest) power draw in W."""

    @abstractmethod
    def can_set_power_limit(self) -> tuple[bool, str]:
        """Whether this process may change the power limit, and why not. Changes nothing."""

    def power_domains(self) -> tuple[str, ...]:
        """The :data:`POWER_DOMAINS` this GPU reports (every GPU has ``device_instant``)."""
        return ("device_instant",)

    def read_power(self, domain: str = "device_instant") -> float:
        """Power in W of one of :meth:`power_domains`."""
        if domain == "device_instant":
            return self.power()
        from zeus_nb.errors import UnsupportedError

        raise UnsupportedError(
            f"GPU {self.index} ({self.name}) does not report the {domain!r} power domain; "
            f"it has {', '.join(self.power_domains())}"
        )

    def temperature(self) -> float:
        """GPU core temperature in degrees Celsius."""
        from zeus_nb.errors import UnsupportedError

        raise UnsupportedError(f"GPU {self.index} ({self.name}) reports no temperature")

    # --- SM clocks (pipeline frequency planning); backends without them raise UnsupportedError
    def supported_clocks(self) -> list[int]:
        """Supported SM (graphics) clocks in MHz, highest first."""
        from zeus_nb.errors import UnsupportedError

        raise UnsupportedError(f"GPU {self.index}: this backend cannot list SM clocks")

    def set_locked_clocks(self, min_mhz: int, max_mhz: int) -> None:
        """Keep the SM clock within [min_mhz, max_mhz]; raises ClockPermissionError."""
        from zeus_nb.errors import UnsupportedError

        raise UnsupportedError(f"GPU {self.index}: this backend cannot lock SM clocks")

    def reset_locked_clocks(self) -> None:
        """Let the driver choose SM clocks again (undo :meth:`set_locked_clocks`)."""
        from zeus_nb.errors import UnsupportedError

        raise UnsupportedError(f"GPU {self.index}: this backend cannot reset SM clocks")

    def locked_clocks(self) -> tuple[int, int] | None:
        """The (min, max) SM clocks this GPU is locked to, or None when the driver chooses."""
        from zeus_nb.errors import UnsupportedError

        raise UnsupportedError(f"GPU {self.index}: this backend cannot lock SM clocks")

    def _no_memory_clocks(self):
        from zeus_nb.errors import UnsupportedError

        return UnsupportedError(
            f"GPU {self.index} ({self.name}): this backend does not model memory clocks; "
            "list SM clocks without naming a memory clock"
        )

    def supported_clocks_at(self, memory_mhz: int) -> list[int]:
        """Supported SM clocks in MHz at memory clock ``memory_mhz``, highest first."""
        raise self._no_memory_clocks()

    # --- memory clocks and persistence mode (Zeus's device API) ------------------------------
    def supported_memory_clocks(self) -> list[int]:
        """Supported memory clocks in MHz, highest first."""
        raise self._no_memory_clocks()

    def set_memory_locked_clocks(self, min_mhz: int, max_mhz: int) -> None:
        """Keep the memory clock within [min_mhz, max_mhz]; raises ClockPermissionError."""
        raise self._no_memory_clocks()

    def reset_memory_locked_clocks(self) -> None:
        """Let the driver choose memory clocks again."""
        raise self._no_memory_clocks()

    def persistence_mode(self) -> bool:
        """Whether the driver stays loaded with no client (a flag where there is no driver)."""
        return bool(getattr(self, "_persistence_mode", False))

    def set_persistence_mode(self, enabled: bool) -> None:
        """Turn persistence mode on or off (a flag where there is no driver to keep loaded)."""
        self._persistence_mode = bool(enabled)

    def check_clock(self, mhz: int) -> int:
        """Validate a requested SM clock against :meth:`supported_clocks`; returns it as int."""
        from zeus_nb.utils.validate import integer

        f = integer(mhz, f"SM clock of GPU {self.index} (MHz)", 0, 10**6, text_ok=False)
        clocks = self.supported_clocks()
        if f not in clocks:
            near = min(clocks, key=lambda c: abs(c - f))
            raise InputError(
                f"{f} MHz is not a supported SM clock of GPU {self.index} "
                f"(range {clocks[-1]}-{clocks[0]} MHz; nearest: {near} MHz)"
            )
        return f

    def check_power_limit(self, watts: float) -> float:
        """Validate a requested limit against the constraints; returns it as float."""
        from zeus_nb.utils.validate import POWER_LIMIT, number

        w = number(watts, f"power limit of GPU {self.index}", text_ok=False)  # finite, a number
        lo, hi = self.power_limit_constraints()
        if not lo <= w <= hi:
            unit = POWER_LIMIT.likely_unit(w)
            raise InputError(
                f"power limit {w:g} W is outside GPU {self.index}'s range [{lo:g}, {hi:g}] W"
                + (f"; {unit}" if unit else "")
            )
        return w


@dataclass
class PowerTimeline:
    """Power samples of some GPUs: ``samples[gpu_index]`` is a list of (time s, power W)."""

    period: float
    samples: dict[int, list[tuple[float, float]]] = field(default_factory=dict)

    def to_frame(self):
        """Tidy DataFrame with columns time, gpu, power."""
        import pandas as pd

        rows = [(t, i, p) for i, pts in self.samples.items() for t, p in pts]
        return pd.DataFrame(rows, columns=["time", "gpu", "power"])


class PowerSampler(ABC):
    """Collects a power timeline while running; a context manager."""

    def __init__(self, indices: list[int], period: float):
        from zeus_nb.utils.validate import DURATION, number

        # NaN once passed "period <= 0" and sampled without end
        period = number(period, "sampling period", DURATION, "give seconds, e.g. 0.1", False)
        self.timeline = PowerTimeline(period, {i: [] for i in indices})
        self._lock = threading.Lock()

    @abstractmethod
    def start(self) -> PowerSampler: ...

    @abstractmethod
    def stop(self) -> PowerTimeline: ...

    def __enter__(self) -> PowerSampler:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class GPUSystem(ABC):
    """The GPUs one process sees, with the clock that measurement windows use."""

    backend: str
    gpus: list[GPU]
    #: Seconds between updates of the GPUs' energy counters: a window longer than this that
    #: measures 0 J points at a stuck or coarse counter. 0.1 s is an assumption for real GPUs
    #: (not measured here); inf where the counter is exact (simulated).
    energy_update_period: float = 0.1
    #: Whether :meth:`clock` is virtual, i.e. moves only when :meth:`step` runs.
    virtual_clock: bool = False

    @abstractmethod
    def clock(self) -> float:
        """Seconds on this backend's clock (virtual time for the simulated GPU)."""

    def snapshot(self, gpus: list[GPU]) -> tuple[float, list[float]]:
        """The clock and the energy counters of ``gpus``, read as close together as possible."""
        return self.clock(), [g.energy() for g in gpus]

    def snapshot_reader(self, gpus: list[GPU]) -> Callable[[], tuple[float, list[float]]]:
        """A function that returns :meth:`snapshot` of ``gpus``, built once for repeated reads.

        Measurement windows read snapshots on their hot path; backends whose reads can skip
        per-call dispatch (NVML) return a faster function with the same result.
        """
        return functools.partial(self.snapshot, list(gpus))

    def wall_time(self, t: float | None = None) -> float:
        """Unix time (comparable with ``time.time()``) of the clock reading ``t`` (default: now).

        Real clocks are monotonic, so the offset to Unix time is read now; simulated clocks
        override this with a fixed epoch.
        """
        now = self.clock()
        return time.time() - now + (now if t is None else t)

    def cpus(self) -> list[CPU]:
        """The CPU packages whose energy this system can measure (default: Linux RAPL).

        Raises the errors of :func:`zeus_nb.device.cpu.rapl_cpus` (no RAPL, no permission).
        """
        from zeus_nb.device.cpu.packages import rapl_cpus

        return rapl_cpus()

    def window_hint(self, elapsed: float) -> str | None:
        """Why a window of ``elapsed`` s measured nothing, where the backend knows (else None)."""
        return None

    def sync(self, indices: list[int] | None = None) -> None:
        """Wait for queued GPU work before reading counters (no-op where nothing is queued)."""
        return None

    def sync_function(self, indices: list[int]) -> Callable[[], None]:
        """A function that does :meth:`sync` of ``indices``, built once for repeated calls."""
        return functools.partial(self.sync, list(indices))

    def step(self, n: int = 1, batch_size: int | None = None) -> None:
        """Account for ``n`` training steps. Advances simulated GPUs; no-op on real GPUs."""
        return None

    def mark_step(self) -> None:
        """A training step ended (the power-limit optimizer says so from ``on_step_end``).

        A clock that follows real time paces steps by it (the simulated wall clock); a no-op
        elsewhere. Unlike :meth:`step` it never advances a virtual clock, so loops that also call
        ``zeus_nb.step()`` are not counted twice.
        """
        return None

    @abstractmethod
    def info(self) -> dict[str, str]:
        """Backend facts for ``zeus-nb doctor`` (driver and library versions, trace...)."""

    @abstractmethod
    def power_sampler(self, indices: list[int], period: float) -> PowerSampler: ...

    #: The system that replaced this one as the process's current system (``use_simulated``),
    #: and its step count then: see :meth:`check_current`.
    replaced_by: GPUSystem | None = None
    _steps_when_replaced: int = 0

    def retire(self, new: GPUSystem) -> None:
        """Mark this system as replaced by ``new`` as the process's current system."""
        self.replaced_by = new
        self._steps_when_replaced = getattr(self, "steps_taken", 0)

    def check_current(self) -> None:
        """Refuse to be measured after another system replaced this one, unless this one was
        stepped since: ``zeus_nb.step()`` advances the new system, so a monitor left on this
        one would measure nothing (0 s, 0 J) and say nothing."""
        if self.replaced_by is None or getattr(self, "steps_taken", 0) != self._steps_when_replaced:
            return
        from zeus_nb.errors import SimulationError

        raise SimulationError(
            f"this {self.backend} GPU system was replaced as the current one (use_simulated(), "
            "use_replay() or another backend), and zeus_nb.step() now advances the new one: "
            "create the ZeusMonitor (and any optimizer using it) again after replacing it"
        )

    def gpu(self, index: int) -> GPU:
        from zeus_nb.utils.validate import integer

        index = integer(index, "GPU index", 0, 1 << 16, text_ok=False)
        for g in self.gpus:
            if g.index == index:
                return g
        have = ", ".join(str(g.index) for g in self.gpus) or "none"
        raise InputError(f"no GPU with index {index} on the {self.backend} backend (have: {have})")

    def __len__(self) -> int:
        return len(self.gpus)
