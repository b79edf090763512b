"""A replayed ZeusMonitor CSV log of a real profiling run, as GPUs of this process.

A log has one row per profiled power limit (window ``__GlobalPowerLimitOptimizer_<W>``): elapsed
time and each GPU's energy over that limit's measured steps. :class:`ReplaySystem` is a GPU
backend over such a log, read by the ordinary :class:`~zeus_nb.monitor.ZeusMonitor`
(``ZeusMonitor(system=ReplaySystem(log))``, or :func:`zeus_nb.device.use_replay`). Its clock
advances only when :meth:`ReplaySystem.step` runs: one step at limit W costs
``elapsed_W / steps_per_window`` s and ``energy_W / steps_per_window`` J per GPU (the window's
steps spread evenly over its time). A window of ``steps_per_window`` steps at W therefore measures
exactly what the real run measured. Limits the log does not hold are refused rather than invented.
A log of several runs (see :mod:`zeus_nb.monitor.log_file`) is replayed one run at a time
(:func:`load_profile_log`), never as a sum of runs.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

from zeus_nb.device.base import GPU, GPUSystem, PowerSampler
from zeus_nb.device.base import milli as _mw
from zeus_nb.device.gpu.common import ZeusGPUInvalidArgError, ZeusGPUNotSupportedError
from zeus_nb.device.guard import SettingsGuard
from zeus_nb.errors import TraceFormatError, UnsupportedError
from zeus_nb.inputs import read_table, reader
from zeus_nb.inputs.api import checked_methods
from zeus_nb.inputs.kinds import MONITOR_LOG, RUN_DONE_WINDOW
from zeus_nb.inputs.kinds import window_limit as _window_limit
from zeus_nb.inputs.validate import integer, step_count

_ENERGY = re.compile(r"^gpu(\d+)_energy$")
logger = logging.getLogger(__name__)


@dataclass
class ProfileLog:
    """A parsed profiling log: per limit (W), elapsed s and per-GPU J."""

    path: Path
    gpu_indices: list[int]
    elapsed: dict[float, float]
    energy: dict[float, dict[int, float]]
    gpu_name: str
    run: int = 1  # which run of the log (a header line starts each) this is
    ignored: list[int] = field(default_factory=list)  # the log's other profiling runs
    note: str = ""  # one line: which run this is, of how many, and which were ignored

    @property
    def power_limits(self) -> list[float]:
        """Logged limits, highest first."""
        return sorted(self.elapsed, reverse=True)


def _gpu_name_from_path(path: Path) -> str:
    model = path.stem.split("+")[0] if "+" in path.stem else ""
    return f"NVIDIA {model} (replay)" if model else "replayed GPU"


@dataclass
class _Run:
    """One run of a log (its rows between header lines): profiled limits, and whether the
    optimizer that wrote it finished (its ``~done_<W>`` end row; see monitor/log_file.py)."""

    n: int
    rows: list
    chose: float | None  # the limit its end row names; None: cut short, or written unmarked

    @classmethod
    def of(cls, n: int, rows: list) -> _Run:
        ends = [w for r in rows if (w := _window_limit(r, RUN_DONE_WINDOW)) is not None]
        return cls(n, rows, ends[-1] if ends else None)

    @property
    def windows(self) -> list:
        return [r for r in self.rows if _window_limit(r) is not None]

    def describe(self) -> str:
        limits = sorted({_window_limit(r) for r in self.windows}, reverse=True)
        span = f"{limits[0]:g}-{limits[-1]:g} W" if len(limits) > 1 else f"{limits[0]:g} W"
        end = "not marked finished" if self.chose is None else f"finished, chose {self.chose:g} W"
        lines = f"lines {self.rows[0].line}-{self.rows[-1].line}"
        return f"run {self.n} ({lines}: {len(limits)} limit(s) {span}, {end})"

    def check_one_profile(self, path: Path) -> None:
        """Refuse a run holding a limit twice: two profiling runs, or one limit in pieces, that
        no marker tells apart (a log written before runs were marked). Never summed."""
        seen: dict[float, object] = {}
        for row in self.windows:
            limit = _window_limit(row)
            if limit not in seen:
                seen[limit] = row
                continue
            first = seen[limit]
            where = f"{path}, line {row.line}: window {row['window_name']}"
            between = {_window_limit(r) for r in self.windows if first.line < r.line < row.line}
            if between:  # the optimizer never comes back to a limit: it started again here
                raise TraceFormatError(
                    f"{where} again (first on line {first.line}), with other limits between: "
                    f"a restarted profiling run begins there without a run marker (a log "
                    f"written before zeus-nb marked restarts); copy the header line above line "
                    f"{row.line} to split the runs, then replay again (the last finished run, "
                    "or --run N)"
                )
            raise TraceFormatError(
                f"{where} again, right after line {first.line}, and no run marker tells why: a "
                f"restarted profiling run beginning at line {row.line} (copy the header line "
                "above it to split the runs) or one limit logged in pieces by an older zeus-nb "
                "(merge both into one row, adding their times and energies); then replay again"
            )


def _pick_run(path: Path, runs: list[list], run: int | None) -> tuple[_Run, list[int], str]:
    """The run to replay (``run`` if given, else the last finished profiling run, else the only
    profiling run), the profiling runs ignored, and one line that says both."""
    parsed = [_Run.of(n, rows) for n, rows in enumerate(runs, 1)]
    profiling = [r for r in parsed if r.windows]
    if run is not None:
        if not 1 <= run <= len(runs):
            raise TraceFormatError(f"{path}: no run {run}; the log holds {len(runs)} run(s)")
        chosen = parsed[run - 1]
        if not chosen.windows:
            raise TraceFormatError(
                f"{path}: run {run} has no __GlobalPowerLimitOptimizer_<W> window"
            )
        how = f"as --run {run} (run={run}) asked"
    elif not profiling:
        raise TraceFormatError(f"{path}: no __GlobalPowerLimitOptimizer_<W> window in the log")
    elif finished := [r for r in profiling if r.chose is not None]:
        chosen, how = finished[-1], "the last finished one"
    elif len(profiling) == 1:
        chosen, how = profiling[0], "the only profiling run"
    else:
        listed = "; ".join(r.describe() for r in profiling)
        raise TraceFormatError(
            f"{path} holds {len(profiling)} profiling runs and none is marked finished (a log "
            f"written before zeus-nb marked a run's end): {listed}; choose one with --run N "
            "(run=N in Python): a run that was cut short has fewer limits"
        )
    chosen.check_one_profile(path)
    ignored = [r for r in profiling if r is not chosen]
    note = f"replayed {chosen.describe()}, {how}, of the {len(parsed)} run(s) in {path.name}"
    if ignored:
        note += f"; ignored {'; '.join(r.describe() for r in ignored)}"
    return chosen, [r.n for r in ignored], note


@reader(MONITOR_LOG)
def load_profile_log(
    path: str | Path, gpu_name: str | None = None, run: int | None = None
) -> ProfileLog:
    """Parse a ZeusMonitor log: one profiling run's window per limit.

    Read through :data:`zeus_nb.inputs.kinds.MONITOR_LOG`: every number is checked (a NaN,
    infinite, zero-length or implausible row, e.g. energy in mJ, is an error naming the line and
    column), and a last row cut short by an interrupted write is dropped with a warning. A log
    that holds several runs (a header line starts each; see :mod:`zeus_nb.monitor.log_file`)
    replays run ``run``, else the last one the optimizer finished (its end row), else its only
    profiling run; several runs none of which is marked finished are an error that lists them.
    A limit twice in the run replayed is an error too: two runs (or one window in pieces) that
    nothing tells apart are never summed into one wrong profile. ``note`` says which run was
    replayed and which were ignored.
    """
    path = Path(path)
    table = read_table(path, MONITOR_LOG)
    indices = [int(_ENERGY.match(c).group(1)) for c in table.header if _ENERGY.match(c)]
    chosen, ignored, note = _pick_run(path, table.runs, run)
    elapsed: dict[float, float] = {}
    energy: dict[float, dict[int, float]] = {}
    for row in chosen.windows:
        limit = _window_limit(row)
        elapsed[limit] = row["elapsed_time"]
        energy[limit] = {}
        for i in indices:
            if row[f"gpu{i}_energy"] is None:  # written empty: the monitor had no energy
                raise TraceFormatError(
                    f"{path}: window {row['window_name']!r} has no energy for GPU {i} (an empty "
                    "cell: the monitor could not measure it); re-profile that limit"
                )
            energy[limit][i] = row[f"gpu{i}_energy"]
    name = gpu_name or _gpu_name_from_path(path)
    return ProfileLog(path, indices, elapsed, energy, name, chosen.n, ignored, note)


@checked_methods
class ReplayGPU(GPU):
    """One GPU of a replayed log (Zeus's methods in mW and mJ; joules kept unrounded)."""

    persistent = False  # nothing outlives the process: no restore state file
    backend = "replay"
    settings_guard = SettingsGuard

    def __init__(self, system: ReplaySystem, index: int):
        super().__init__(index)
        self._system = system
        self._limit = max(system.log.elapsed)
        self._energy = 0.0

    def get_name(self) -> str:
        return self._system.log.gpu_name

    def get_power_management_limit_constraints(self) -> tuple[int, int]:
        limits = self._system.log.elapsed
        return _mw(min(limits)), _mw(max(limits))

    def get_default_power_management_limit(self) -> int:
        return _mw(max(self._system.log.elapsed))

    def get_power_management_limit(self) -> int:
        return _mw(self._limit)

    def _write_power_limit(self, power_limit_mw: int) -> None:
        w = self.check_power_limit(power_limit_mw / 1000)
        if w not in self._system.log.elapsed:
            have = ", ".join(f"{x:g}" for x in self._system.log.power_limits)
            raise ZeusGPUInvalidArgError(
                f"{self._system.log.path.name} has no measurement at {w:g} W (it has {have}); "
                "choose a pl_step that lands on logged limits"
            )
        self._limit = w

    def get_total_energy_consumption(self) -> int:
        return _mw(self._energy)

    def energy(self) -> float:
        return self._energy

    def power(self) -> float:
        t = self._system.log.elapsed[self._limit]
        return self._system.log.energy[self._limit][self.index] / t if t > 0 else 0.0

    def get_instant_power_usage(self) -> int:
        return _mw(self.power())

    def get_average_power_usage(self) -> int:
        raise ZeusGPUNotSupportedError(f"GPU {self.index}: a replayed log has one power only")

    def get_supported_graphics_clocks(self, memory_clock_mhz: int | None = None) -> list[int]:
        raise ZeusGPUNotSupportedError(f"GPU {self.index}: a replayed log has no SM clocks")


@checked_methods
class ReplaySystem(GPUSystem):
    """The replayed GPUs and their replay clock.

    Args:
        log: path of a ZeusMonitor CSV log (or a parsed :class:`ProfileLog`).
        run: which run of a log that holds several (see :func:`load_profile_log`).
        steps_per_window: how many steps the logged windows spanned; use the optimizer's
            ``profile_steps`` so each window reproduces the logged numbers exactly.
        gpu_name: model name the replayed GPUs report (default: from the file name).
    """

    backend = "replay"

    def __init__(
        self,
        log: str | Path | ProfileLog,
        steps_per_window: int = 40,
        gpu_name: str | None = None,
        run: int | None = None,
    ):
        steps_per_window = integer(
            steps_per_window, "steps_per_window", 1, 10**9, "give the profile_steps of the run"
        )
        if not isinstance(log, ProfileLog):
            log = load_profile_log(log, gpu_name, run)
            if log.ignored:  # which run this is, and which were ignored: one line
                logger.warning("%s", log.note)
        self.log = log
        self.steps_per_window = int(steps_per_window)
        self._now = 0.0
        self.gpus = [ReplayGPU(self, i) for i in log.gpu_indices]

    def clock(self) -> float:
        return self._now

    def step(self, n: int = 1, batch_size: int | None = None) -> None:
        """Run ``n`` steps on every GPU at its current limit; the slowest sets the pace."""
        n, _ = step_count(n, batch_size)
        if n == 0:
            return
        dt = 0.0
        for g in self.gpus:
            frac = n / self.steps_per_window
            g._energy += self.log.energy[g._limit][g.index] * frac
            dt = max(dt, self.log.elapsed[g._limit] * frac)
        self._now += dt

    def info(self) -> dict[str, str]:
        return {"backend": "replay", "log": str(self.log.path)}

    def power_sampler(self, indices: list[int], period: float) -> PowerSampler:
        raise UnsupportedError("a replayed log has no power timeline, only window totals")
