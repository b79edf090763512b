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

import json
import math
import os
import sqlite3
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from zeus_nb.errors import ZeusNbError
from zeus_nb.optimizer.batch_size.trials import SQLITE_SCHEMA as TRIALS_SCHEMA
from zeus_nb.optimizer.batch_size.trials import MemoryTrials, SQLiteTrials
from zeus_nb.utils.metric import check_eta

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


def check_schema_version(found: int | None, where: str) -> None:
    """Refuse a store whose layout is newer than this code (or not ours)."""
    if found is None:
        raise StoreSchemaError(
            f"{where} has a schema_version table without a batch-size optimizer entry; give "
            "zeus-nb its own database or schema"
        )
    if int(found) > SCHEMA_VERSION:
        raise StoreSchemaError(
            f"the batch-size optimizer state at {where} was written by a newer zeus-nb (schema "
            f"version {found}; this one reads up to {SCHEMA_VERSION}); upgrade zeus-nb "
            "(pip install -U zeus-nb) on every machine that uses this store"
        )


@dataclass(frozen=True)
class JobSpec:
    """What defines one recurring job's bandit; stored with its state so every process agrees.

    ``max_power`` (W) turns time into joules in the cost; ``None`` means "the current GPU's
    maximum power limit", looked up when a result is reported. ``window`` > 0 makes each arm
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

    @classmethod
    def from_json(cls, text: str) -> JobSpec:
        d = json.loads(text)
        d["batch_sizes"] = tuple(int(b) for b in d["batch_sizes"])
        d["beta"] = float("inf") if d.get("beta") is None else float(d["beta"])
        return cls(**d)


@dataclass(frozen=True)
class Observation:
    """One finished (or stopped) training run of the job. ``cost`` is in J."""

    batch_size: int
    time: float
    energy: float
    cost: float
    reached: bool
    power_limit: float | None = None


def default_path() -> Path:
    """``$ZEUS_NB_STATE_DIR/bso.sqlite3``, else ``bso.sqlite3`` in the user's cache directory."""
    env = os.environ.get(STATE_DIR_ENV)
    if env:
        return Path(env).expanduser() / DEFAULT_FILENAME
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
        if after <= 0:
            return list(rows)
        return [r for r in rows if r[0] > after]

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


_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (name TEXT PRIMARY KEY, spec TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS observations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job TEXT NOT NULL REFERENCES jobs(name),
    batch_size INTEGER NOT NULL,
    time REAL NOT NULL,
    energy REAL NOT NULL,
    cost REAL NOT NULL,
    reached INTEGER NOT NULL,
    power_limit REAL
);
CREATE INDEX IF NOT EXISTS observations_job ON observations(job, id);
CREATE TABLE IF NOT EXISTS power_limits (
    job TEXT NOT NULL REFERENCES jobs(name),
    batch_size INTEGER NOT NULL,
    power_limit REAL NOT NULL,
    PRIMARY KEY (job, batch_size)
);
CREATE TABLE IF NOT EXISTS schema_version (component TEXT PRIMARY KEY, version INTEGER NOT NULL);
"""


class SQLiteStore(SQLiteTrials):
    """Bandit state in a local SQLite file, shared safely by concurrent processes.

    ``path`` defaults to :func:`default_path` (override the directory with ``ZEUS_NB_STATE_DIR``).
    """

    def __init__(self, path: str | Path | None = None, timeout: float = 60.0) -> None:
        self.path = Path(path).expanduser() if path is not None else default_path()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(
                self.path, timeout=timeout, isolation_level=None, check_same_thread=False
            )
            self._init_schema(timeout)
            self._lock = threading.RLock()  # one connection, possibly shared by threads
        except (OSError, sqlite3.Error) as e:
            raise StoreError(
                f"cannot open the batch-size optimizer state {self.path}: {e}; pass another "
                f"path or set {STATE_DIR_ENV} to a writable directory"
            ) from e

    def _init_schema(self, timeout: float) -> None:
        """Switch to WAL and create the tables, waiting while another process does the same.

        SQLite answers "database is locked" at once, without its busy timeout, when two
        processes change the journal mode of a new file together (two recurrences starting at
        the same moment), so this retries until ``timeout``.
        """
        deadline = time.monotonic() + timeout
        delay = 0.01
        while True:
            try:
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=NORMAL")
                self._conn.executescript(_SCHEMA + TRIALS_SCHEMA)
                self._conn.execute(
                    "INSERT OR IGNORE INTO schema_version(component, version) VALUES (?, ?)",
                    (SCHEMA_COMPONENT, SCHEMA_VERSION),  # files from before the table: 1
                )
                break
            except sqlite3.OperationalError as e:
                locked = "locked" in str(e) or "busy" in str(e)
                if not locked or time.monotonic() + delay > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.5)
        found = self._conn.execute(
            "SELECT version FROM schema_version WHERE component = ?", (SCHEMA_COMPONENT,)
        ).fetchone()
        check_schema_version(found[0] if found else None, str(self.path))

    def _write(self):
        return _Immediate(self._conn, self._lock)

    def _query(self, sql: str, args: tuple = ()) -> list[tuple]:
        with self._lock:
            return self._conn.execute(sql, args).fetchall()

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def register(self, spec: JobSpec) -> JobSpec:
        with self._write():
            row = self._conn.execute(
                "SELECT spec FROM jobs WHERE name = ?", (spec.name,)
            ).fetchone()
            if row is None:
                self._conn.execute(
                    "INSERT INTO jobs(name, spec) VALUES (?, ?)", (spec.name, spec.to_json())
                )
                return spec
        known = JobSpec.from_json(row[0])
        _check_same(known, spec)
        return known

    def job(self, name: str) -> JobSpec | None:
        rows = self._query("SELECT spec FROM jobs WHERE name = ?", (name,))
        return JobSpec.from_json(rows[0][0]) if rows else None

    def jobs(self) -> list[str]:
        return [r[0] for r in self._query("SELECT name FROM jobs ORDER BY name")]

    def append(self, name: str, obs: Observation) -> int:
        with self._write():
            self._require(name)
            cur = self._conn.execute(
                "INSERT INTO observations(job, batch_size, time, energy, cost, reached, "
                "power_limit) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    name,
                    int(obs.batch_size),
                    float(obs.time),
                    float(obs.energy),
                    float(obs.cost),
                    int(bool(obs.reached)),
                    None if obs.power_limit is None else float(obs.power_limit),
                ),
            )
            return int(cur.lastrowid)

    def observations(self, name: str, after: int = 0) -> list[tuple[int, Observation]]:
        rows = self._query(
            "SELECT id, batch_size, time, energy, cost, reached, power_limit FROM observations "
            "WHERE job = ? AND id > ? ORDER BY id",
            (name, int(after)),
        )
        return [(r[0], Observation(int(r[1]), r[2], r[3], r[4], bool(r[5]), r[6])) for r in rows]

    def set_power_limit(self, name: str, batch_size: int, watts: float) -> None:
        with self._write():
            self._require(name)
            self._conn.execute(
                "INSERT INTO power_limits(job, batch_size, power_limit) VALUES (?, ?, ?) "
                "ON CONFLICT(job, batch_size) DO UPDATE SET power_limit = excluded.power_limit",
                (name, int(batch_size), float(watts)),
            )

    def power_limits(self, name: str) -> dict[int, float]:
        rows = self._query(
            "SELECT batch_size, power_limit FROM power_limits WHERE job = ?", (name,)
        )
        return {int(b): float(p) for b, p in rows}

    def delete(self, name: str) -> None:
        with self._write():
            tables = ("trials", "job"), ("observations", "job"), ("power_limits", "job")
            for table, col in (*tables, ("jobs", "name")):
                self._conn.execute(f"DELETE FROM {table} WHERE {col} = ?", (name,))

    def _require(self, name: str) -> None:
        if self._conn.execute("SELECT 1 FROM jobs WHERE name = ?", (name,)).fetchone() is None:
            raise StoreError(f"no job {name!r} in {self.path}; create a BatchSizeOptimizer first")


class _Immediate:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``: takes the write lock up front, so concurrent writers
    queue (up to the connection timeout) instead of failing half-way."""

    def __init__(self, conn: sqlite3.Connection, lock):
        self.conn = conn
        self.lock = lock

    def __enter__(self):
        self.lock.acquire()
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except BaseException:
            self.lock.release()
            raise
        return self.conn

    def __exit__(self, exc_type, *exc) -> None:
        try:
            self.conn.execute("ROLLBACK" if exc_type else "COMMIT")
        finally:
            self.lock.release()


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


Store = MemoryStore | SQLiteStore


def validated_spec(spec: JobSpec) -> JobSpec:
    """``spec`` with sorted, deduplicated batch sizes, or a ValueError that names the bad knob."""
    if not spec.batch_sizes:
        raise ValueError("batch_sizes must list at least one batch size")
    sizes = tuple(sorted({int(b) for b in spec.batch_sizes}))
    if sizes[0] < 1:
        raise ValueError(f"batch sizes must be positive integers, got {list(spec.batch_sizes)}")
    if spec.default_batch_size not in sizes:
        raise ValueError(
            f"default_batch_size {spec.default_batch_size} must be one of the batch sizes "
            f"{list(sizes)}"
        )
    check_eta(spec.eta)
    if not spec.beta > 1.0:
        raise ValueError(f"beta must be > 1 (inf disables early stopping), got {spec.beta}")
    if spec.max_power is not None and not spec.max_power > 0:
        raise ValueError(f"max_power must be > 0 W, got {spec.max_power}")
    if spec.pruning_rounds < 0:
        raise ValueError(
            f"pruning_rounds must be >= 0 (0: no pruning, every batch size is an arm), got "
            f"{spec.pruning_rounds}"
        )
    if not (spec.exploration >= 0 and math.isfinite(spec.exploration)):
        raise ValueError(
            f"exploration must be a finite number >= 0 (1: plain posterior draws, 0: greedy), "
            f"got {spec.exploration}"
        )
    if spec.window < 0:
        raise ValueError(f"window must be >= 0 (0: all observations), got {spec.window}")
    return JobSpec(
        spec.name,
        sizes,
        int(spec.default_batch_size),
        float(spec.eta),
        float(spec.beta),
        spec.max_power,
        int(spec.seed),
        int(spec.pruning_rounds),
        int(spec.window),
        float(spec.exploration),
    )
