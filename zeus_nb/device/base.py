"""The device interface every backend implements: Zeus's GPU API, plus zeus-nb's helpers.

There is one GPU object per device. Its backend (NVML in :mod:`zeus_nb.device.gpu.nvidia`, the
simulated GPU in :mod:`zeus_nb.device.sim`, a replayed log in :mod:`zeus_nb.device.replay`)
implements Zeus's methods (:class:`zeus_nb.device.gpu.common.GPU`: mW, mJ, MHz) and a few
primitives; :class:`GPU` here adds zeus-nb's helpers in watts and joules, each defined once over
those methods, and puts Zeus's setters under the settings guard (changes are put back at exit).
A :class:`GPUSystem` is Zeus's :class:`~zeus_nb.device.gpu.common.GPUs` (the GPUs of one process,
by CUDA index) plus the clock that measurement windows use. Code above the device layer
(monitor, optimizers, sweeps, notebooks) talks to these two classes only, and never asks which
backend it has.
"""

from __future__ import annotations

import functools
import time
import warnings
from abc import abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from zeus_nb.device.gpu.access import DIRECT, Access
from zeus_nb.device.gpu.common import GPU as ZeusGPU
from zeus_nb.device.gpu.common import (
    GPUs,
    ZeusGPUInvalidArgError,
    ZeusGPUNotSupportedError,
)
from zeus_nb.device.sampling import PowerIntegrator, PowerSampler, PowerTimeline
from zeus_nb.device.watts import POWER_DOMAINS, WattHelpers
from zeus_nb.errors import InputError, SimulationError, ZeusNbError
from zeus_nb.inputs.validate import integer

if TYPE_CHECKING:
    from zeus_nb.device.cpu.packages import CPU
    from zeus_nb.device.guard import SettingsGuard

__all__ = ["FROM_ENV", "GPU", "POWER_DOMAINS", "GPUSystem", "PowerIntegrator", "PowerSampler"]
__all__ += ["PowerTimeline"]

#: Sentinel for "read CUDA_VISIBLE_DEVICES from the environment" (a value may be None: all GPUs).
FROM_ENV = "from the environment"


def milli(value: float) -> int:
    """W -> mW or J -> mJ, as Zeus's integers."""
    return int(round(value * 1000))


class GPU(WattHelpers, ZeusGPU):
    """One GPU: Zeus's methods (mW, mJ, MHz) from its backend, zeus-nb's helpers (W, J) here.

    ``gpu_index`` is the backend's own index (NVML's, for real GPUs, as in Zeus); ``index`` is
    the CUDA index zeus-nb uses everywhere (``CUDA_VISIBLE_DEVICES`` applied).

    A backend implements Zeus's getters and primitives that change the GPU unchecked and
    unguarded (``_write_power_limit``, ``get_default_power_management_limit``, and for SM clocks
    ``_write_locked_clocks``, ``_write_reset_locked_clocks``, ``locked_clocks``). Zeus's setters
    are defined here once: they record the original value in a settings guard before the first
    change (put back at exit, on SIGTERM or by ``zeus-nb restore``). zeus-nb's own setters
    (:meth:`set_power_limit`, :meth:`set_locked_clocks`) only validate: their callers hold guards.
    """

    #: Whether settings changed here outlive this process (real GPUs' do; a replay's do not),
    #: i.e. whether a settings guard writes a state file for ``zeus-nb restore``.
    persistent: bool = True
    #: The backend name ``zeus-nb restore`` reopens these GPUs with.
    backend: str = "auto"
    #: The settings guard class recording original values before a change (attached by each
    #: backend, so this interface does not import the guard); a GPU without one changes nothing.
    settings_guard: ClassVar[type[SettingsGuard] | None] = None

    def __init__(self, gpu_index: int, index: int | None = None) -> None:
        super().__init__(gpu_index)
        self.index = gpu_index if index is None else index

    @property
    def device(self) -> GPU:
        """This GPU (earlier releases wrapped a second object; code that reads it still works)."""
        return self

    # --- primitives a backend implements ---------------------------------------------------
    @abstractmethod
    def get_default_power_management_limit(self) -> int:
        """The GPU's default power limit in mW."""

    @abstractmethod
    def _write_power_limit(self, power_limit_mw: int) -> None:
        """Set the power limit in mW: no skip, no guard (the guard's own restore calls this)."""

    def _write_locked_clocks(self, min_mhz: int, max_mhz: int) -> None:
        raise ZeusGPUNotSupportedError(f"GPU {self.index}: this backend cannot lock SM clocks")

    def _write_reset_locked_clocks(self) -> None:
        raise ZeusGPUNotSupportedError(f"GPU {self.index}: this backend cannot reset SM clocks")

    def locked_clocks(self) -> tuple[int, int] | None:
        """The (min, max) SM clocks this GPU is locked to, or None when the driver chooses."""
        raise ZeusGPUNotSupportedError(f"GPU {self.index}: this backend cannot lock SM clocks")

    def supports_get_total_energy_consumption(self) -> bool:
        """Whether the GPU has an energy counter (every backend's but NVML's pre-Volta GPUs)."""
        return True

    def counter_reader(self) -> Callable[[], int]:
        """A function that reads the energy counter (mJ), built once for a monitor's hot path;
        where it raises, :meth:`get_total_energy_consumption` raises the error to show."""
        return self.get_total_energy_consumption

    def power_reader(self) -> Callable[[], float]:
        """A function that reads board power (W), built once for a background counter reader's
        window edges; where it raises, :meth:`power` raises the error to show."""
        return self.power

    def get_power_usage(self) -> int:
        """Board power in mW from the cheapest reading the backend has (NVML: 1 us)."""
        return self.get_instant_power_usage()

    def can_set_power_limit(self) -> tuple[bool, str]:
        """Whether this process may change the power limit, and why not. Changes nothing."""
        return True, f"{self.backend} GPU"

    def settings_access(self) -> Access:
        """Who changes this GPU's settings (:mod:`zeus_nb.device.gpu.access`): this process,
        for every backend but real GPUs that refuse it."""
        return Access(DIRECT, f"a {self.backend} GPU this process changes")

    # --- Zeus's setters: guarded here, once for every backend -------------------------------
    @property
    def supports_nonblocking_setters(self) -> bool:
        return False

    def _warn_sys_admin(self) -> None:
        """Warn once when the backend says this process may not change settings."""
        if getattr(self, "_disable_sys_admin_warning", False):
            return
        ok, why = self.can_set_power_limit()
        if not ok:  # stacklevel: the caller of GPU.<setter> or GPUs.<setter>
            warnings.warn(f"GPU {self.index}: changing settings may fail: {why}", stacklevel=4)
        self._disable_sys_admin_warning = True

    def _record(self, kind: str) -> None:
        """Record the original value of ``kind`` before the first change (restored at exit)."""
        guard_class = type(self).settings_guard
        if guard_class is None:  # never change what nothing would put back
            raise ZeusNbError(
                f"{type(self).__name__} has no settings_guard, so a change could outlive the "
                "process: set the class attribute settings_guard = "
                "zeus_nb.device.guard.SettingsGuard in the backend"
            )
        guards: dict[str, SettingsGuard] = self.__dict__.setdefault("_guards", {})
        guard = guards.get(kind)
        if guard is None:
            guard = guards[kind] = guard_class([self], (kind,), backend=self.backend)
        guard.record()

    def set_power_management_limit(self, power_limit_mw: int, block: bool = True) -> None:
        """Set the limit in mW (nothing happens when it is set already); restored at exit."""
        if self.get_power_management_limit() == power_limit_mw:
            return
        self._warn_sys_admin()
        self._record("power_limit")
        try:
            self._write_power_limit(int(power_limit_mw))
        except ZeusGPUInvalidArgError as e:
            raise ZeusGPUInvalidArgError(f"{e}; Zeus's API takes mW: {power_limit_mw} mW") from e

    def reset_power_management_limit(self, block: bool = True) -> None:
        self.set_power_management_limit(self.get_default_power_management_limit(), block)

    def set_gpu_locked_clocks(
        self, min_clock_mhz: int, max_clock_mhz: int, block: bool = True
    ) -> None:
        """Lock the SM clock to [min, max] MHz; the original state is restored at exit."""
        lo, hi = self._checked_clocks(min_clock_mhz, max_clock_mhz)
        self._warn_sys_admin()
        self._record("locked_clocks")
        self._write_locked_clocks(lo, hi)

    def reset_gpu_locked_clocks(self, block: bool = True) -> None:
        self._warn_sys_admin()
        self._record("locked_clocks")
        self._write_reset_locked_clocks()

    # Persistence mode where there is no driver to keep loaded: a flag (NVML overrides these).
    def get_persistence_mode(self) -> bool:
        return bool(getattr(self, "_persistence_mode", False))

    def set_persistence_mode(self, enabled: bool, block: bool = True) -> None:
        self._persistence_mode = bool(enabled)

    # Memory clocks: only real GPUs have them (NVML overrides these).
    def _no_memory_clocks(self) -> ZeusGPUNotSupportedError:
        return ZeusGPUNotSupportedError(
            f"GPU {self.index} ({self.name}): this backend does not model memory clocks; "
            "list SM clocks without naming a memory clock"
        )

    def get_supported_memory_clocks(self) -> list[int]:
        raise self._no_memory_clocks()

    def set_memory_locked_clocks(
        self, min_clock_mhz: int, max_clock_mhz: int, block: bool = True
    ) -> None:
        raise self._no_memory_clocks()

    def reset_memory_locked_clocks(self, block: bool = True) -> None:
        raise self._no_memory_clocks()

    def get_average_memory_power_usage(self) -> int:
        raise ZeusGPUNotSupportedError(f"GPU {self.index}: no 'memory_average' power domain")

    def get_gpu_temperature(self) -> int:
        raise ZeusGPUNotSupportedError(f"GPU {self.index} ({self.name}) reports no temperature")


class GPUSystem(GPUs):
    """The GPUs one process sees (Zeus's :class:`GPUs`, by CUDA index), with the clock that
    measurement windows use."""

    backend: str
    #: Seconds between updates of the GPUs' energy counters: a window longer than this that
    #: measures 0 J points at a stuck or coarse counter. 0.1 s on real GPUs (an H100 measured
    #: 100 ms steps: docs/real_gpus.md); inf where the counter is exact (simulated).
    energy_update_period: float = 0.1

    @property
    def gpus(self) -> list[GPU]:
        """This system's GPUs, in CUDA index order."""
        return self._gpu_list

    @gpus.setter
    def gpus(self, value: list[GPU]) -> None:
        self._gpu_list = list(value)

    def _gpu(self, gpu_index: int) -> GPU:
        """Zeus's per-index calls find their GPU by CUDA index, as :meth:`gpu` does."""
        try:
            return self.gpu(gpu_index)
        except InputError as e:
            if isinstance(e, ZeusGPUInvalidArgError):
                raise
            raise ZeusGPUInvalidArgError(str(e)) from e

    #: Whether :meth:`clock` is virtual, i.e. moves only when :meth:`step` runs.
    virtual_clock: bool = False
    #: Whether a monitor's window reads the wall clock and each GPU's counter (Zeus's way, real
    #: GPUs); else it reads :meth:`snapshot`, the system's own clock and counters in one go.
    windows_read_counters: bool = False

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

        raise SimulationError(
            f"this {self.backend} GPU system was replaced as the current one (use_simulated(), "
            "use_replay() or another backend), and zeus_nb.step() now advances the new one: "
            "create the ZeusMonitor (and any optimizer using it) again after replacing it"
        )

    def gpu(self, index: int) -> GPU:
        index = integer(index, "GPU index", 0, 1 << 16, text_ok=False)
        for g in self.gpus:
            if g.index == index:
                return g
        have = ", ".join(str(g.index) for g in self.gpus) or "none"
        raise InputError(f"no GPU with index {index} on the {self.backend} backend (have: {have})")

    def __len__(self) -> int:
        return len(self.gpus)
