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

from zeus_nb.errors import InputError, ZeusNbError
from zeus_nb.inputs import check_record, reader
from zeus_nb.inputs.env import env
from zeus_nb.inputs.kinds import FAILED_OBSERVATION, JOB_SPEC, OBSERVATION, STORED_RUN
from zeus_nb.utils.files import connect_readonly

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
# ``schema_version`` table; bump it with every change to the tables.
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
    def from_json(cls, text: str, where: str = "a stored job") -> JobSpec:
        """A job's settings from the store, checked like a new job's (a damaged row is named)."""
        try:
            d = json.loads(text)
        except (TypeError, ValueError) as e:
            raise StoreError(f"{where}: the job's settings are not JSON ({e})") from None
        try:
            return validated_spec(d if isinstance(d, dict) else {"settings": d}, where)
        except InputError as e:
            raise StoreError(
                f"{e}; the store is damaged: delete the job to start it over"
            ) from None


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


class MemoryStore:
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
        for d in (self._jobs, self._obs, self._limits):
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


class SQLiteStore:
    """Bandit state in a local SQLite file, shared safely by concurrent processes.

    ``path`` defaults to :func:`default_path` (override the directory with ``ZEUS_NB_STATE_DIR``).
    ``readonly=True`` (read commands such as ``zeus-nb bso show``) opens the file with SQLite's
    ``mode=ro``: it is never created, changed or given tables, and a file that holds no
    batch-size optimizer state (another program's database, or not SQLite) is refused.
    ``timeout`` bounds how long a write waits for another process's (seconds).
    """

    @reader(STORED_RUN, JOB_SPEC)
    def __init__(
        self, path: str | Path | None = None, timeout: float = 60.0, *, readonly: bool = False
    ) -> None:
        self.path = Path(path).expanduser() if path is not None else default_path()
        self.readonly = readonly
        try:
            if readonly:
                self._conn = connect_readonly(self.path, timeout)
                self._check_ours()
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._conn = sqlite3.connect(
                    self.path, timeout=timeout, isolation_level=None, check_same_thread=False
                )
                self._init_schema(timeout)
            self._lock = threading.RLock()  # one connection, possibly shared by threads
        except sqlite3.DatabaseError as e:
            raise self._error(e) from None
        except OSError as e:
            raise StoreError(
                f"cannot open the batch-size optimizer state {self.path}: {e}; pass another "
                f"path or set {STATE_DIR_ENV} to a writable directory"
            ) from e

    def _error(self, e: sqlite3.Error) -> StoreError:
        """sqlite3's message as ours: which file, what it means, what to do."""
        text = str(e)
        if "not a database" in text or "malformed" in text:
            return StoreError(
                f"{self.path} is not a SQLite database (sqlite3: {text}); give the store file "
                "zeus-nb wrote (default: $ZEUS_NB_STATE_DIR/bso.sqlite3)"
            )
        if "unable to open" in text:
            return StoreError(
                f"cannot open the batch-size optimizer state {self.path} (sqlite3: {text}); "
                f"check the path (a file, not a folder), or set {STATE_DIR_ENV}"
            )
        if "locked" in text or "busy" in text:
            return StoreError(
                f"the batch-size optimizer state {self.path} stayed locked by another process "
                f"(sqlite3: {text}); try again when that process has finished"
            )
        return StoreError(f"the batch-size optimizer state {self.path}: sqlite3: {text}")

    def _check_ours(self) -> None:
        tables = {r[0] for r in self._conn.execute("SELECT name FROM sqlite_master")}
        if "schema_version" not in tables or "observations" not in tables:
            self._conn.close()
            if not tables:
                raise StoreNotFoundError(f"no batch-size optimizer state at {self.path}")
            raise StoreSchemaError(
                f"{self.path} is not a batch-size optimizer store: it holds another "
                f"program's tables ({', '.join(sorted(tables)[:5])}); give the store file "
                "zeus-nb wrote"
            )
        found = self._conn.execute(
            "SELECT version FROM schema_version WHERE component = ?", (SCHEMA_COMPONENT,)
        ).fetchone()
        check_schema_version(found[0] if found else None, str(self.path))

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
                self._conn.executescript(_SCHEMA)
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
        if self.readonly:
            raise StoreError(f"{self.path} was opened read-only; open it with readonly=False")
        return _Immediate(self._conn, self._lock, self._error)

    def _query(self, sql: str, args: tuple = ()) -> list[tuple]:
        with self._lock:
            try:
                return self._conn.execute(sql, args).fetchall()
            except sqlite3.Error as e:
                raise self._error(e) from None

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def register(self, spec: JobSpec) -> JobSpec:
        if self.readonly:  # a read command: the job must exist with these settings
            known = self.job(spec.name)
            if known is None:
                raise StoreError(f"no job {spec.name!r} in {self.path}")
            _check_same(known, spec)
            return known
        with self._write():
            row = self._conn.execute(
                "SELECT spec FROM jobs WHERE name = ?", (spec.name,)
            ).fetchone()
            if row is None:
                self._conn.execute(
                    "INSERT INTO jobs(name, spec) VALUES (?, ?)", (spec.name, spec.to_json())
                )
                return spec
        known = JobSpec.from_json(row[0], f"{self.path}, job {spec.name!r}")
        _check_same(known, spec)
        return known

    def job(self, name: str) -> JobSpec | None:
        rows = self._query("SELECT spec FROM jobs WHERE name = ?", (name,))
        return JobSpec.from_json(rows[0][0], f"{self.path}, job {name!r}") if rows else None

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
        return [stored_observation(r, f"{self.path}, observation {r[0]}") for r in rows]

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
            for table, col in (("observations", "job"), ("power_limits", "job"), ("jobs", "name")):
                self._conn.execute(f"DELETE FROM {table} WHERE {col} = ?", (name,))

    def _require(self, name: str) -> None:
        if self._conn.execute("SELECT 1 FROM jobs WHERE name = ?", (name,)).fetchone() is None:
            raise StoreError(f"no job {name!r} in {self.path}; create a BatchSizeOptimizer first")


class _Immediate:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``: takes the write lock up front, so concurrent writers
    queue (up to the connection timeout) instead of failing half-way."""

    def __init__(self, conn: sqlite3.Connection, lock, error):
        self.conn = conn
        self.lock = lock
        self.error = error  # sqlite3.Error -> StoreError

    def __enter__(self):
        self.lock.acquire()
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as e:
            self.lock.release()
            raise self.error(e) from None
        except BaseException:
            self.lock.release()
            raise
        return self.conn

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self.conn.execute("ROLLBACK" if exc_type else "COMMIT")
        except sqlite3.Error as e:
            if exc_type is None:
                raise self.error(e) from None
        finally:
            self.lock.release()
        if isinstance(exc, sqlite3.Error):
            raise self.error(exc) from None


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


def validated_spec(spec: JobSpec | dict, where: str = "BatchSizeOptimizer") -> JobSpec:
    """``spec`` checked through :data:`~zeus_nb.inputs.kinds.JOB_SPEC` (types and ranges: a
    batch size of 1.5 is an error, never 1), with sorted, deduplicated batch sizes; the error
    names the knob."""
    d = asdict(spec) if isinstance(spec, JobSpec) else dict(spec)
    if d.get("beta") == math.inf:
        d["beta"] = None  # inf: no early stopping
    row = check_record(d, JOB_SPEC, where)
    sizes = tuple(sorted(set(row["batch_sizes"])))
    if row["default_batch_size"] not in sizes:
        raise InputError(
            f"{where}.default_batch_size: {row['default_batch_size']} must be one of the batch "
            f"sizes {list(sizes)}"
        )
    return JobSpec(
        row["name"],
        sizes,
        row["default_batch_size"],
        row["eta"],
        math.inf if row["beta"] is None else row["beta"],
        row.get("max_power"),
        row.get("seed", 0),
        row.get("pruning_rounds", 2),
        row.get("window", 0),
        row.get("exploration", DEFAULT_EXPLORATION),
    )


def stored_observation(r: tuple, where: str) -> tuple[int, Observation]:
    """(id, observation) of a store row ``(id, batch_size, time, energy, cost, reached,
    power_limit)``, checked: a row another program (or a damaged file) wrote is named."""
    fields = ("batch_size", "time", "energy", "cost", "reached", "power_limit")
    raw = dict(zip(fields, r[1:], strict=True))
    if isinstance(raw["reached"], int):
        raw["reached"] = bool(raw["reached"])  # SQLite keeps booleans as 0 and 1
    try:
        row = check_record({k: v for k, v in raw.items() if v is not None}, STORED_RUN, where)
    except InputError as e:
        raise StoreError(f"{e}; the store is damaged: delete the job to start it over") from None
    return int(r[0]), Observation(
        row["batch_size"], row["time"], row["energy"], row["cost"], row["reached"],
        row.get("power_limit"),
    )  # fmt: skip


def checked_observation(raw: dict, where: str) -> Observation:
    """A run's numbers through :data:`~zeus_nb.inputs.kinds.OBSERVATION`.

    A run that reached the target took time and energy at a power a GPU can draw: 0 s or 0 J
    is a mistake (a run that failed before it started may report 0 s and 0 J).
    """
    schema = OBSERVATION if raw.get("reached") is not False else FAILED_OBSERVATION
    row = check_record({k: v for k, v in raw.items() if v is not None}, schema, where)
    return Observation(
        row["batch_size"],
        row["time"],
        row["energy"],
        row.get("cost", 0.0),
        row["reached"],
        row.get("power_limit"),
    )
