"""The batch-size bandit's state in a local SQLite file (see :mod:`.store` for the model).

:class:`SQLiteStore` keeps the append-only log of observations in a SQLite file (WAL journal;
every write in a ``BEGIN IMMEDIATE`` transaction), so two recurrences reporting at once are
serialized by SQLite and neither update is lost. Read commands open it read-only.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from zeus_nb.inputs import reader, regular_file
from zeus_nb.inputs.kinds import JOB_SPEC, STORED_RUN
from zeus_nb.optimizer.batch_size.checks import spec_from_json, stored_observation
from zeus_nb.optimizer.batch_size.store import (
    SCHEMA_COMPONENT,
    SCHEMA_VERSION,
    STATE_DIR_ENV,
    JobSpec,
    MemoryStore,
    Observation,
    StoreError,
    StoreNotFoundError,
    StoreSchemaError,
    _check_same,
    check_schema_version,
    default_path,
    registered,
    sqlite_meaning,
)
from zeus_nb.optimizer.batch_size.trials import SQLITE_SCHEMA as TRIALS_SCHEMA
from zeus_nb.optimizer.batch_size.trials import SQLiteTrials
from zeus_nb.utils.files import connect_readonly

__all__ = ["SQLiteStore", "Store"]


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
            # a FIFO or a device would block SQLite or feed it garbage: a regular file only
            regular_file(self.path, "batch-size optimizer store", None, missing_ok=not readonly)
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
        except sqlite3.Error as e:
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
        return StoreError(f"the batch-size optimizer state {self.path}: {sqlite_meaning(text)}")

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
            return registered(self.job(spec.name), spec, str(self.path))
        with self._write():
            row = self._conn.execute(
                "SELECT spec FROM jobs WHERE name = ?", (spec.name,)
            ).fetchone()
            if row is None:
                self._conn.execute(
                    "INSERT INTO jobs(name, spec) VALUES (?, ?)", (spec.name, spec.to_json())
                )
                return spec
        known = spec_from_json(row[0], f"{self.path}, job {spec.name!r}")
        _check_same(known, spec)
        return known

    def job(self, name: str) -> JobSpec | None:
        rows = self._query("SELECT spec FROM jobs WHERE name = ?", (name,))
        return spec_from_json(rows[0][0], f"{self.path}, job {name!r}") if rows else None

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
            tables = ("trials", "job"), ("observations", "job"), ("power_limits", "job")
            for table, col in (*tables, ("jobs", "name")):
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


Store = MemoryStore | SQLiteStore
