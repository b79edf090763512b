"""A replayed ZeusMonitor CSV log of a real profiling run, as GPUs of this process.

A log has one row per profiled power limit (window ``__GlobalPowerLimitOptimizer_<W>``): elapsed
time and each GPU's energy over that limit's measured steps. :class:`ReplaySystem` is a GPU
backend over such a log, read by the ordinary :class:`~zeus_nb.monitor.ZeusMonitor`
(``ZeusMonitor(system=ReplaySystem(log))``, or :func:`zeus_nb.device.use_replay`). Its clock
advances only when :meth:`ReplaySystem.step` runs: one step at limit W costs
``elapsed_W / steps_per_window`` s and ``energy_W / steps_per_window`` J per GPU (the window's
steps spread evenly over its time). A window of ``steps_per_window`` steps at W therefore measures
exactly what the real run measured. Limits the log does not hold are refused rather than invented.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path

from zeus_nb.device.base import GPU, GPUSystem, PowerSampler
from zeus_nb.errors import InputError, TraceFormatError, UnsupportedError
from zeus_nb.utils.validate import DURATION, ENERGY, POWER_LIMIT, number, power_of

_WINDOW = re.compile(r"^__GlobalPowerLimitOptimizer_(\d+(?:\.\d+)?)$")
_ENERGY = re.compile(r"^gpu(\d+)_energy$")


@dataclass
class ProfileLog:
    """A parsed profiling log: per limit (W), elapsed s and per-GPU J."""

    path: Path
    gpu_indices: list[int]
    elapsed: dict[float, float]
    energy: dict[float, dict[int, float]]
    gpu_name: str

    @property
    def power_limits(self) -> list[float]:
        """Logged limits, highest first."""
        return sorted(self.elapsed, reverse=True)


def _gpu_name_from_path(path: Path) -> str:
    model = path.stem.split("+")[0] if "+" in path.stem else ""
    return f"NVIDIA {model} (replay)" if model else "replayed GPU"


def load_profile_log(path: str | Path, gpu_name: str | None = None) -> ProfileLog:
    """Parse a ZeusMonitor log; rows of one limit split over several windows are summed.

    Every number is checked (:mod:`zeus_nb.utils.validate`): a NaN, infinite, zero-length or
    implausible row (an average power outside 1..2000 W per GPU, e.g. energy in mJ) and a row
    cut short are errors naming the line and column, never a silently wrong choice.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no profiling log at {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise TraceFormatError(
            f"{path}: not a UTF-8 text file ({e.reason} at byte {e.start})"
        ) from None
    if text and not text.endswith(("\n", "\r")):
        last = text.count("\n") + 1
        raise TraceFormatError(
            f"{path}, line {last}: the last row has no line end, so the file looks cut short"
            " (a run still writing it, or an interrupted copy); copy the log again, or "
            "delete that row if it is incomplete"
        )
    try:
        reader = csv.reader(io.StringIO(text, newline=""))
        rows = [(reader.line_num, row) for row in reader]
    except csv.Error as e:
        raise TraceFormatError(f"{path}: not a CSV file ({e})") from None
    header = rows[0][1] if rows else None
    if not header or header[:3] != ["start_time", "window_name", "elapsed_time"]:
        raise TraceFormatError(
            f"{path}: not a ZeusMonitor log; the header must start with "
            "start_time,window_name,elapsed_time followed by gpu<i>_energy columns"
        )
    indices = []
    for col in header[3:]:
        m = _ENERGY.match(col)
        if not m:
            raise TraceFormatError(f"{path}: unexpected column {col!r}; want gpu<i>_energy")
        indices.append(int(m.group(1)))
    if not indices:
        raise TraceFormatError(f"{path}: the log has no gpu<i>_energy column")
    elapsed: dict[float, float] = {}
    energy: dict[float, dict[int, float]] = {}
    for n, row in rows[1:]:
        if not row:
            continue
        if len(row) != len(header):
            raise TraceFormatError(
                f"{path}, line {n}: {len(row)} fields, expected {len(header)} "
                f"({','.join(header)}); the row is cut short or has extra cells"
            )
        m = _WINDOW.match(row[1])
        if m is None:
            continue  # other windows of the same run
        limit, t, es = _window_row(path, n, header, row, m.group(1))
        elapsed[limit] = elapsed.get(limit, 0.0) + t
        per_gpu = energy.setdefault(limit, dict.fromkeys(indices, 0.0))
        for i, e in zip(indices, es, strict=True):
            per_gpu[i] += e
    if not elapsed:
        raise TraceFormatError(f"{path}: no __GlobalPowerLimitOptimizer_<W> window in the log")
    return ProfileLog(path, indices, elapsed, energy, gpu_name or _gpu_name_from_path(path))


def _window_row(
    path: Path, n: int, header: list[str], row: list[str], limit: str
) -> tuple[float, float, list[float]]:
    """(limit W, elapsed s, per-GPU J) of one profiling window row, each number checked."""
    fix = "fix or delete that row (re-profile the limit if its numbers are lost)"

    def where(col: int) -> str:
        return f"{path}, line {n}, column {header[col]}"

    try:
        number(row[0], where(0), fix=fix)
        w = number(limit, f"{path}, line {n}, window {row[1]}", POWER_LIMIT, fix)
        t = number(row[2], where(2), DURATION, fix)
        es = [number(row[c], where(c), ENERGY, fix) for c in range(3, len(header))]
        for c, e in zip(range(3, len(header)), es, strict=True):
            power_of(e, t, where(c), "check that energy is in J and time in s")
    except InputError as e:
        raise TraceFormatError(str(e)) from None
    return w, t, es


class ReplayGPU(GPU):
    """One GPU of a replayed log."""

    persistent = False  # nothing outlives the process: no restore state file

    def __init__(self, system: ReplaySystem, index: int):
        self.index = index
        self._system = system
        self._limit = max(system.log.elapsed)
        self._energy = 0.0

    @property
    def name(self) -> str:
        return self._system.log.gpu_name

    def power_limit_constraints(self) -> tuple[float, float]:
        limits = self._system.log.elapsed
        return (min(limits), max(limits))

    def default_power_limit(self) -> float:
        return max(self._system.log.elapsed)

    def get_power_limit(self) -> float:
        return self._limit

    def set_power_limit(self, watts: float) -> None:
        w = self.check_power_limit(watts)
        if w not in self._system.log.elapsed:
            have = ", ".join(f"{x:g}" for x in self._system.log.power_limits)
            raise ValueError(
                f"{self._system.log.path.name} has no measurement at {w:g} W (it has {have}); "
                "choose a pl_step that lands on logged limits"
            )
        self._limit = w

    def supports_energy_counter(self) -> bool:
        return True

    def energy(self) -> float:
        return self._energy

    def power(self) -> float:
        t = self._system.log.elapsed[self._limit]
        return self._system.log.energy[self._limit][self.index] / t if t > 0 else 0.0

    def can_set_power_limit(self) -> tuple[bool, str]:
        return True, "replayed GPU"


class ReplaySystem(GPUSystem):
    """The replayed GPUs and their replay clock.

    Args:
        log: path of a ZeusMonitor CSV log (or a parsed :class:`ProfileLog`).
        steps_per_window: how many steps the logged windows spanned; use the optimizer's
            ``profile_steps`` so each window reproduces the logged numbers exactly.
        gpu_name: model name the replayed GPUs report (default: from the file name).
    """

    backend = "replay"

    def __init__(
        self, log: str | Path | ProfileLog, steps_per_window: int = 40, gpu_name: str | None = None
    ):
        if steps_per_window < 1:
            raise ValueError(f"steps_per_window must be >= 1, got {steps_per_window}")
        if not isinstance(log, ProfileLog):
            log = load_profile_log(log, gpu_name)
        self.log = log
        self.steps_per_window = int(steps_per_window)
        self._now = 0.0
        self.gpus = [ReplayGPU(self, i) for i in log.gpu_indices]

    def clock(self) -> float:
        return self._now

    def step(self, n: int = 1, batch_size: int | None = None) -> None:
        """Run ``n`` steps on every GPU at its current limit; the slowest sets the pace."""
        if n <= 0:
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
