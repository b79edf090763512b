"""Where the batch-size bandit keeps its state between recurrences of a job.

A recurring job runs as a fresh process each time, so what the bandit has learned must outlive the
process. The state is an append-only log of observations per job (batch size, time, energy, cost,
reached) plus the just-in-time power limit found for each batch size; the bandit's decisions are
a pure function of that log, so any process that reads it continues the same bandit.

:class:`SQLiteStore` keeps the log in a local SQLite file (WAL journal; every write in a
``BEGIN IMMEDIATE`` transaction), so two recurrences reporting at once are serialized by SQLite
and neither update is lost. :class:`MemoryStore` is the same thing in a Python list, for
simulation and notebooks.
"""

from __future__ import annotations

import bisect
import json
import os
import sys
from dataclasses import asdict, dataclass
from operator import itemgetter
from pathlib import Path

from zeus_nb.errors import InputError, ZeusNbError
from zeus_nb.inputs.env import env
from zeus_nb.inputs.registry import environ_read
from zeus_nb.inputs.validate import integer
from zeus_nb.optimizer.batch_size.trials import MemoryTrials

STATE_DIR_ENV = "ZEUS_NB_STATE_DIR"
DEFAULT_FILENAME = "bso.sqlite3"
# Width of the Thompson-sampling draws relative to the posterior (see zeus_nb.optimizer.batch_size).
DEFAULT_EXPLORATION = 0.35


class StoreError(ZeusNbError):
    """The bandit's state store is unusable or disagrees with the job it is asked about."""


class StoreSchemaError(StoreError):
    """The store holds a newer (or foreign) layout than this zeus-nb understands."""


class StoreNotFoundError(StoreError):
    """A read-only command found no batch-size optimizer state at the given location."""


# Version of the stores' table layout (SQLite and SQL servers alike), kept in their
# ``schema_version`` table; bump it with every change older code would misread (a new table that
# older code ignores, such as ``trials``, needs no bump).
SCHEMA_VERSION = 1
SCHEMA_COMPONENT = "bso"


#: What SQLite's (and SQLAlchemy's) messages mean for a store, and what to do: none of them
#: reaches the user alone.
_SQL_MEANINGS = (
    (
        "disk i/o error",
        "the disk failed to read or write the file (disk I/O error); check the "
        "disk and free space, or copy the store to a local disk",
    ),
    ("database or disk is full", "the disk is full; free space or move the store"),
    ("readonly database", "the file or its folder is read-only; give a store you may write"),
    (
        "attempt to write a readonly",
        "the file or its folder is read-only; give a store you may write",
    ),
    (
        "not null constraint",
        "a table of the store lacks a value it requires, so another "
        "program changed the file's tables; give zeus-nb a store of its own",
    ),
    ("unique constraint", "the store already holds that row; another program changed it"),
    ("foreign key", "the store's rows do not fit together; another program changed it"),
    (
        "no such table",
        "the file lacks a table zeus-nb's store has; give the store file zeus-nb wrote",
    ),
    (
        "no such column",
        "a table lacks a column zeus-nb's store has; give the store file zeus-nb wrote",
    ),
    (
        "has no column",
        "a table lacks a column zeus-nb's store has; give the store file zeus-nb wrote",
    ),
    (
        "datatype mismatch",
        "a table holds values of another type than zeus-nb's store; another program changed it",
    ),
)


def sqlite_meaning(text: str) -> str:
    """A database message as what it means for the store and what to do (the message kept)."""
    low = text.lower()
    meaning = next((m for key, m in _SQL_MEANINGS if key in low), None)
    short = " ".join(text.split())[:160]
    if meaning is None:
        return f"the database answered {short!r}; check the store (or give a fresh one)"
    return f"{meaning} (the database said: {short})"


def check_schema_version(found: object, where: str) -> None:
    """Refuse a store whose layout is newer than this code (or not ours)."""
    if found is None:
        raise StoreSchemaError(
            f"{where} has a schema_version table without a batch-size optimizer entry; give "
            "zeus-nb its own database or schema"
        )
    try:
        version = integer(found, "schema_version", 0, 2**31)
    except InputError:
        raise StoreSchemaError(
            f"{where}: the schema_version table holds {found!r}, not a version number, so "
            "another program wrote it; give zeus-nb its own database or schema"
        ) from None
    if version > SCHEMA_VERSION:
        raise StoreSchemaError(
            f"the batch-size optimizer state at {where} was written by a newer zeus-nb (schema "
            f"version {found}; this one reads up to {SCHEMA_VERSION}); upgrade zeus-nb "
            "(pip install -U zeus-nb) on every machine that uses this store"
        )


@dataclass(frozen=True)
class JobSpec:
    """What defines one recurring job's bandit; stored with its state so every process agrees.

    ``max_power`` (W) turns time into joules in the cost; ``None`` means "the current GPU's
    maximum power limit", resolved once when the job is created and stored with it (never
    looked up again by the process that reports a run). ``window`` > 0 makes each arm
    learn from its last ``window`` runs only (for jobs whose costs drift). ``exploration``
    scales the width of the Thompson-sampling draws (1: the plain posterior).
    """

    name: str
    batch_sizes: tuple[int, ...]
    default_batch_size: int
    eta: float = 0.5
    beta: float = 2.0
    max_power: float | None = None
    seed: int = 0
    pruning_rounds: int = 2
    window: int = 0
    exploration: float = DEFAULT_EXPLORATION

    def to_json(self) -> str:
        d = asdict(self)
        d["batch_sizes"] = list(self.batch_sizes)
        d["beta"] = None if self.beta == float("inf") else self.beta
        return json.dumps(d, sort_keys=True)


@dataclass(frozen=True)
class Observation:
    """One finished (or stopped) training run of the job. ``cost`` is in J."""

    batch_size: int
    time: float
    energy: float
    cost: float
    reached: bool
    power_limit: float | None = None


@environ_read("LOCALAPPDATA and XDG_CACHE_HOME")
def default_path() -> Path:
    """``$ZEUS_NB_STATE_DIR/bso.sqlite3``, else ``bso.sqlite3`` in the user's cache directory."""
    folder = env(STATE_DIR_ENV)
    if folder:
        return Path(folder).expanduser() / DEFAULT_FILENAME
    if sys.platform == "win32" and os.environ.get("LOCALAPPDATA"):
        base = Path(os.environ["LOCALAPPDATA"])
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "zeus-nb" / DEFAULT_FILENAME


class MemoryStore(MemoryTrials):
    """The state of any number of jobs in this process only (simulation, notebooks, tests)."""

    def __init__(self) -> None:
        self._jobs: dict[str, JobSpec] = {}
        self._obs: dict[str, list[tuple[int, Observation]]] = {}
        self._limits: dict[str, dict[int, float]] = {}
        self._next_id = 1

    def register(self, spec: JobSpec) -> JobSpec:
        known = self._jobs.get(spec.name)
        if known is None:
            self._jobs[spec.name] = spec
            self._obs[spec.name] = []
            self._limits[spec.name] = {}
            return spec
        _check_same(known, spec)
        return known

    def job(self, name: str) -> JobSpec | None:
        return self._jobs.get(name)

    def jobs(self) -> list[str]:
        return sorted(self._jobs)

    def append(self, name: str, obs: Observation) -> int:
        self._require(name)
        i = self._next_id
        self._next_id += 1
        self._obs[name].append((i, obs))
        return i

    def observations(self, name: str, after: int = 0) -> list[tuple[int, Observation]]:
        self._require(name)
        rows = self._obs[name]
        # Ids only grow, so the rows after ``after`` are a tail: a recurrence's look costs what
        # is new, not every run so far (10,000 simulated recurrences were quadratic).
        return rows[bisect.bisect_right(rows, after, key=itemgetter(0)) :]

    def set_power_limit(self, name: str, batch_size: int, watts: float) -> None:
        self._require(name)
        self._limits[name][int(batch_size)] = float(watts)

    def power_limits(self, name: str) -> dict[int, float]:
        self._require(name)
        return dict(self._limits[name])

    def delete(self, name: str) -> None:
        for d in (self._jobs, self._obs, self._limits, self.__dict__.get("_trials", {})):
            d.pop(name, None)

    def _require(self, name: str) -> None:
        if name not in self._jobs:
            raise StoreError(f"no job {name!r} in this store; create a BatchSizeOptimizer first")


def registered(known: JobSpec | None, asked: JobSpec, where: str) -> JobSpec:
    """What a read-only store answers to ``register``: the job must exist with these settings."""
    if known is None:
        raise StoreError(f"no job {asked.name!r} in {where}")
    _check_same(known, asked)
    return known


def _check_same(known: JobSpec, asked: JobSpec) -> None:
    """A job's bandit only makes sense with the settings it was started with."""
    if known == asked:
        return
    diff = [
        f"{k}: stored {getattr(known, k)!r}, asked {getattr(asked, k)!r}"
        for k in known.__dataclass_fields__
        if getattr(known, k) != getattr(asked, k)
    ]
    raise StoreError(
        f"job {known.name!r} already exists with other settings ({'; '.join(diff)}); "
        "use a new job name, or delete the old state with store.delete(name)"
    )
