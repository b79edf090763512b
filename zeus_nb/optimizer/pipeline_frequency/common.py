"""Perseus's job, rank, schedule and profiling records, with Zeus's names and fields.

Zeus's pipeline frequency optimizer exchanges these with its PFO server. zeus-nb has no
server (the plan comes from the in-process planner or a schedule file, see
:mod:`zeus_nb.optimizer.pipeline_frequency.optimizer`), but the records, their files and the
instruction-profile CSV are the same, so code that builds, saves or loads them runs unchanged.
Records are keyword-only dataclasses with pydantic-v1 methods
(:class:`~zeus_nb.optimizer.records.Record`); invalid values raise
:class:`PFORecordError` (a ``ValueError``) naming the field.
"""

from __future__ import annotations

import csv
import io
import json
import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from zeus_nb.errors import InputError
from zeus_nb.inputs.registry import environ_read, not_input
from zeus_nb.inputs.table import read_text
from zeus_nb.optimizer.records import Record
from zeus_nb.utils.env import get_env
from zeus_nb.utils.files import atomic_write, write_json

# Zeus's PFO server routes. Nothing listens on them here; they exist for code that imports them.
GET_SERVER_INFO_URL = "/info"
REGISTER_JOB_URL = "/register_job"
REGISTER_RANK_URL = "/register_rank/{job_id}"
GET_FREQUENCY_SCHEDULE_URL = "/schedule/{job_id}"
REPORT_PROFILING_RESULT_URL = "/result/{job_id}"

ENV_PREFIX = "ZEUS_PFO_"


class PFORecordError(InputError):
    """A Perseus record has a value out of range; the message names the field."""


def _at_least(name: str, value: Any, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise PFORecordError(f"{name} must be an integer >= {low}, got {value!r}")


@environ_read(
    "Zeus's ZEUS_PFO_<FIELD> settings (any field of PFOServerSettings), JSON parsed there"
)
def _env_json(name: str, default: Any) -> Any:
    raw = os.environ.get(ENV_PREFIX + name.upper())
    if raw is None:
        return default
    try:
        return json.loads(raw)
    except ValueError:
        raise PFORecordError(f"{ENV_PREFIX}{name.upper()}={raw!r} is not JSON") from None


@dataclass(kw_only=True)
class PFOServerSettings(Record):
    """Zeus's PFO server settings; each field defaults to ``$ZEUS_PFO_<FIELD>`` when set.

    zeus-nb runs no server: ``scheduler`` stays a name (Zeus's default ``PointSolution``, which
    serves a fixed schedule file, is what ``server_url`` does here) and the dump settings say
    where :func:`save_prof`, :func:`save_sched` and :func:`save_ranks` would write.
    """

    scheduler: str = field(
        default_factory=lambda: get_env(ENV_PREFIX + "SCHEDULER", str, "PointSolution")
    )
    scheduler_args: dict[str, Any] = field(default_factory=lambda: _env_json("scheduler_args", {}))
    log_level: str = field(default_factory=lambda: get_env(ENV_PREFIX + "LOG_LEVEL", str, "DEBUG"))
    dump_data: bool = field(default_factory=lambda: get_env(ENV_PREFIX + "DUMP_DATA", bool, True))
    dump_dir: str = field(default_factory=lambda: get_env(ENV_PREFIX + "DUMP_DIR", str, "./dump"))
    max_job_idle_time: int = field(
        default_factory=lambda: get_env(ENV_PREFIX + "MAX_JOB_IDLE_TIME", int, 60 * 60 * 24 * 7)
    )

    def _check(self) -> None:
        self.log_level = str(self.log_level).upper()
        if not isinstance(self.scheduler_args, dict):
            raise PFORecordError(f"scheduler_args must be a mapping, got {self.scheduler_args!r}")


@dataclass(kw_only=True)
class JobInfo(Record):
    """A pipeline job's shape: pp x dp x tp must equal world_size; ``job_id`` is made by
    :meth:`set_job_id` (it must be empty before)."""

    job_id: str = ""
    pp_degree: int
    dp_degree: int
    tp_degree: int
    world_size: int
    job_metadata: str | None = None

    def _check(self) -> None:
        if self.job_id:
            raise PFORecordError(f"job_id is set by set_job_id(); got {self.job_id!r}")
        for name in ("pp_degree", "dp_degree", "tp_degree", "world_size"):
            _at_least(name, getattr(self, name), 1)
        product = self.pp_degree * self.dp_degree * self.tp_degree
        if product != self.world_size:
            raise PFORecordError(
                f"pp_degree x dp_degree x tp_degree = {product}, but world_size = "
                f"{self.world_size}; they must be equal"
            )

    def set_job_id(self, scheduler_name: str):
        """Name the job: time, the three degrees, the scheduler and ``job_metadata``."""
        parts = [datetime.now().strftime("%Y-%m-%d-%H-%M-%S")]
        parts += [f"dp{self.dp_degree}", f"pp{self.pp_degree}", f"tp{self.tp_degree}"]
        parts += [scheduler_name] + ([self.job_metadata] if self.job_metadata else [])
        self.job_id = "+".join(parts)


@dataclass(kw_only=True)
class RankInfo(Record):
    """One rank's place in the 3D grid and its GPU's SM clocks (MHz)."""

    rank: int
    dp_rank: int
    pp_rank: int
    tp_rank: int
    available_frequencies: list[int]

    def _check(self) -> None:
        for name in ("rank", "dp_rank", "pp_rank", "tp_rank"):
            _at_least(name, getattr(self, name), 0)


@dataclass(kw_only=True)
class FrequencySchedule(Record):
    """One iteration's (instruction, MHz) pairs for one rank, in execution order."""

    rank: int
    frequencies: list[tuple[str, int]]

    def _check(self) -> None:
        _at_least("rank", self.rank, 0)
        self.frequencies = [(str(name), int(freq)) for name, freq in self.frequencies]


@dataclass(kw_only=True)
class ProfilingResult(Record):
    """A rank's measured iterations (s, J) and, optionally, per-instruction breakdowns
    (``time_breakdown["forward"][i]``: the forward times of iteration ``i``)."""

    rank: int
    iter_time: list[float]
    iter_energy: list[float]
    time_breakdown: dict[str, list[list[float]]] = field(default_factory=dict)
    energy_breakdown: dict[str, list[list[float]]] = field(default_factory=dict)

    def _check(self) -> None:
        _at_least("rank", self.rank, 0)


@dataclass(kw_only=True)
class OfflineProfilingResult(Record):
    """A rank's mean forward and backward time (s) and energy (J) per SM clock (MHz)."""

    rank: int
    dp_rank: int
    pp_rank: int
    tp_rank: int
    forward_time: dict[int, float]
    forward_energy: dict[int, float]
    backward_time: dict[int, float]
    backward_energy: dict[int, float]

    def _check(self) -> None:
        for name in ("rank", "dp_rank", "pp_rank", "tp_rank"):
            _at_least(name, getattr(self, name), 0)
        for name in ("forward_time", "forward_energy", "backward_time", "backward_energy"):
            setattr(self, name, {int(f): float(v) for f, v in getattr(self, name).items()})


CSV_COLUMNS = ("rank", "dp_rank", "pp_rank", "tp_rank", "stage", "instruction", "frequency")
CSV_COLUMNS += ("time", "energy")


@dataclass
class InstructionProfilingResult(Record):
    """Every rank's offline profile; :meth:`to_csv` writes Zeus's instruction-profile CSV."""

    __root__: list[OfflineProfilingResult]

    def to_csv(self, filepath: str) -> None:
        """One row per (rank, instruction, clock): ``rank, dp_rank, pp_rank, tp_rank, stage,
        instruction, frequency, time, energy`` (``stage`` repeats ``pp_rank``).

        :func:`~zeus_nb.optimizer.pipeline_frequency.load_profile` reads it when given the
        blocking power the file does not record (``p2p_power=``).
        """
        if not str(filepath).endswith(".csv"):
            raise PFORecordError(f"{filepath}: the instruction profile's name must end in .csv")
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")
        writer.writerow(CSV_COLUMNS)
        for res in self.__root__:
            head = (res.rank, res.dp_rank, res.pp_rank, res.tp_rank, res.pp_rank)
            for inst, times, energies in (
                ("forward", res.forward_time, res.forward_energy),
                ("backward", res.backward_time, res.backward_energy),
            ):
                for freq, t in times.items():
                    writer.writerow((*head, inst, freq, t, energies[freq]))
        atomic_write(filepath, text.getvalue())


def _dump(items: list[Record], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, [item.dict() for item in items], indent=None)


@not_input(
    "a JSON list that save_prof, save_sched or save_ranks wrote; each item is checked"
    " by its record class (parse_obj)"
)
def _load(kind: type, path: Path) -> list:
    try:
        data = json.loads(read_text(path, f"saved {kind.__name__} list"))
    except (OSError, ValueError) as e:
        raise PFORecordError(f"{path}: cannot read the saved {kind.__name__} list ({e})") from e
    if not isinstance(data, list):
        raise PFORecordError(f"{path}: expected a JSON list of {kind.__name__} objects")
    return [kind.parse_obj(item) for item in data]


async def save_prof(data: list[ProfilingResult], directory: str, schedule_num: int) -> None:
    """Write ``DIRECTORY/SCHEDULE_NUM.prof.json`` (a coroutine, as Zeus's server awaits it)."""
    _dump(data, Path(directory) / f"{schedule_num}.prof.json")


def load_prof(directory: str, schedule_num: int) -> list[ProfilingResult]:
    return _load(ProfilingResult, Path(directory) / f"{schedule_num}.prof.json")


async def save_sched(data: list[FrequencySchedule], directory: str, schedule_num: int) -> None:
    """Write ``DIRECTORY/SCHEDULE_NUM.sched.json`` (a coroutine, as in Zeus)."""
    _dump(data, Path(directory) / f"{schedule_num}.sched.json")


def load_sched(directory: str, schedule_num: int) -> list[FrequencySchedule]:
    return _load(FrequencySchedule, Path(directory) / f"{schedule_num}.sched.json")


async def save_ranks(data: list[RankInfo], directory: str) -> None:
    """Write ``DIRECTORY/ranks.json`` (a coroutine, as in Zeus)."""
    _dump(data, Path(directory) / "ranks.json")


def load_ranks(directory: str) -> list[RankInfo]:
    return _load(RankInfo, Path(directory) / "ranks.json")
