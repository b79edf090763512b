"""The batch-size bandit's state in a database server (PostgreSQL), shared across machines.

A recurring job that runs on whichever node is free needs one state all nodes can reach; a
SQLite file is only safe on one machine (its locks do not hold on network file systems).
:class:`SQLStore` keeps the same append-only log as the SQLite store through SQLAlchemy 2 (with
psycopg 3 for ``postgresql://`` URLs), so the bandit code does not change.

Concurrency. Every write is one transaction. Appending an observation first locks the job's row
(``SELECT ... FOR UPDATE``): reports of one job are serialized, so their ids grow in commit
order and a reader that has seen id *n* never misses a later-committed smaller id; reports of
different jobs do not wait on each other. Creating the schema takes a transaction-level
advisory lock, so processes that start together do not race on ``CREATE TABLE``.

A ``schema_version`` table records the layout's version; a database written by a newer zeus-nb
is refused with a message saying so, instead of being misread.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    delete,
    func,
    insert,
    inspect,
    select,
    text,
)
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError

from zeus_nb.inputs import reader
from zeus_nb.inputs.kinds import JOB_SPEC, STORED_RUN
from zeus_nb.inputs.registry import system_read
from zeus_nb.optimizer.batch_size.checks import spec_from_json, stored_observation
from zeus_nb.optimizer.batch_size.store import (
    SCHEMA_COMPONENT,
    SCHEMA_VERSION,
    JobSpec,
    Observation,
    StoreError,
    StoreNotFoundError,
    StoreSchemaError,
    _check_same,
    check_schema_version,
    registered,
    sqlite_meaning,
)
from zeus_nb.optimizer.batch_size.trials import DISPATCHED, Trial, check_status

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 5  # s to reach the database server before giving up
LOCK_TIMEOUT = 60.0  # s a write waits for another process's lock

# pg_advisory_xact_lock key for schema creation ("zeusnbso" as 8 bytes).
_SCHEMA_LOCK = int.from_bytes(b"zeusnbso", "big") & 0x7FFF_FFFF_FFFF_FFFF

metadata = MetaData()
schema_version = Table(
    "schema_version",
    metadata,
    Column("component", String(32), primary_key=True),
    Column("version", Integer, nullable=False),
)
jobs = Table(
    "jobs",
    metadata,
    Column("name", Text, primary_key=True),
    Column("spec", Text, nullable=False),
)
observations = Table(
    "observations",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
    Column("job", Text, ForeignKey("jobs.name"), nullable=False),
    Column("batch_size", Integer, nullable=False),
    Column("time", Float, nullable=False),
    Column("energy", Float, nullable=False),
    Column("cost", Float, nullable=False),
    Column("reached", Boolean, nullable=False),
    Column("power_limit", Float, nullable=True),
    Index("observations_job", "job", "id"),
)
power_limits = Table(
    "power_limits",
    metadata,
    Column("job", Text, ForeignKey("jobs.name"), primary_key=True),
    Column("batch_size", Integer, primary_key=True),
    Column("power_limit", Float, nullable=False),
)

trials = Table(
    "trials",
    metadata,
    Column("job", Text, ForeignKey("jobs.name"), primary_key=True),
    Column("trial_number", Integer, primary_key=True),
    Column("batch_size", Integer, nullable=False),
    Column("status", String(16), nullable=False),
    Column("observation", BigInteger, nullable=True),
)


def _translated(method):
    """SQLAlchemy's errors (a lost connection, a lock wait that timed out) as our StoreError."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except SQLAlchemyError as e:
            raise StoreError(
                f"the batch-size optimizer state at {self.url}: "
                f"{sqlite_meaning(str(getattr(e, 'orig', None) or e).splitlines()[0])}; "
                "check that the database server runs and can be reached, then try again"
            ) from e

    return wrapper


def engine_url(url: str | URL) -> URL:
    """The SQLAlchemy URL, with ``postgresql://`` meaning psycopg 3 (not psycopg2)."""
    try:
        u = make_url(url)
        u.port  # noqa: B018 - SQLAlchemy parses it lazily, and int() of text is a ValueError
    except (ArgumentError, ValueError) as e:
        shown = str(url).split("@")[-1]  # never the password
        raise StoreError(
            f"not a database URL: ...@{shown} ({e}); check the host and port"
        ) from None
    if u.drivername in ("postgresql", "postgres"):
        u = u.set(drivername="postgresql+psycopg")
    return u


class SQLStore:
    """Bandit state in a database reached by URL (PostgreSQL through psycopg 3).

    ``create=False`` opens existing state only (read-only commands never create a store): a
    database without the tables raises :class:`StoreNotFoundError`.
    """

    @system_read(
        "a database server reached by URL, not a file (open_store sends SQLite paths "
        "to SQLiteStore, which checks them)"
    )
    @reader(STORED_RUN, JOB_SPEC)
    def __init__(
        self,
        url: str | URL,
        *,
        create: bool = True,
        connect_timeout: int = CONNECT_TIMEOUT,
        lock_timeout: float = LOCK_TIMEOUT,
    ) -> None:
        self._url = engine_url(url)
        self.url = self._url.render_as_string(hide_password=True)
        self.readonly = not create
        connect_args: dict[str, Any] = {}
        if self._url.get_backend_name() == "postgresql":
            # Every wait is bounded: reaching the server, and a lock another process holds.
            # A read command (create=False) runs in read-only transactions: it cannot write.
            options = f"-c lock_timeout={int(lock_timeout * 1000)}"
            if not create:
                options += " -c default_transaction_read_only=on"
            connect_args.update(connect_timeout=connect_timeout, options=options)
        try:
            self.engine: Engine = create_engine(
                self._url, pool_pre_ping=True, pool_size=2, connect_args=connect_args
            )
        except (NoSuchModuleError, ImportError) as e:
            raise StoreError(
                f"no database driver for {self.url} ({e}); install the cluster extra: "
                "pip install 'zeus-nb[cluster]'"
            ) from e
        try:
            self._open_schema(create)
        except SQLAlchemyError as e:
            self.engine.dispose()
            raise StoreError(
                f"cannot open the batch-size optimizer state at {self.url}: "
                f"{str(e).splitlines()[0]}; check the URL, that the server runs and that the "
                "user may create tables"
            ) from e

    @property
    def _is_pg(self) -> bool:
        return self.engine.dialect.name == "postgresql"

    def _open_schema(self, create: bool) -> None:
        with self.engine.begin() as conn:
            if self._is_pg and create:
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _SCHEMA_LOCK})
            insp = inspect(conn)
            if not insp.has_table("schema_version"):
                if not create:
                    raise StoreNotFoundError(f"no batch-size optimizer state at {self.url}")
                if insp.has_table("jobs"):
                    raise StoreSchemaError(
                        f"{self.url} has a 'jobs' table but no zeus-nb schema_version table: "
                        "it belongs to another application; give zeus-nb its own database "
                        "or schema"
                    )
                metadata.create_all(conn)
                conn.execute(
                    insert(schema_version).values(
                        component=SCHEMA_COMPONENT, version=SCHEMA_VERSION
                    )
                )
                log.info("created the batch-size optimizer tables at %s", self.url)
                return
            found = conn.execute(
                select(schema_version.c.version).where(
                    schema_version.c.component == SCHEMA_COMPONENT
                )
            ).scalar_one_or_none()
            check_schema_version(found, self.url)
            if create:  # stores made before the trials table get it (older code ignores it)
                trials.create(conn, checkfirst=True)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> SQLStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SQLStore({self.url!r})"

    # -- jobs -------------------------------------------------------------------------------

    @_translated
    def register(self, spec: JobSpec) -> JobSpec:
        if self.readonly:  # a read command: the job must exist with these settings
            return registered(self.job(spec.name), spec, self.url)
        with self.engine.begin() as conn:
            if self._is_pg:
                from sqlalchemy.dialects.postgresql import insert as pg_insert

                conn.execute(
                    pg_insert(jobs)
                    .values(name=spec.name, spec=spec.to_json())
                    .on_conflict_do_nothing(index_elements=["name"])
                )
            elif conn.execute(select(jobs.c.name).where(jobs.c.name == spec.name)).first() is None:
                conn.execute(insert(jobs).values(name=spec.name, spec=spec.to_json()))
            stored = conn.execute(select(jobs.c.spec).where(jobs.c.name == spec.name)).scalar_one()
        known = spec_from_json(stored, f"{self.url}, job {spec.name!r}")
        _check_same(known, spec)
        return known

    @_translated
    def job(self, name: str) -> JobSpec | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(jobs.c.spec).where(jobs.c.name == name)).scalar()
        return spec_from_json(row, f"{self.url}, job {name!r}") if row is not None else None

    @_translated
    def jobs(self) -> list[str]:
        with self.engine.connect() as conn:
            return list(conn.execute(select(jobs.c.name).order_by(jobs.c.name)).scalars())

    @_translated
    def delete(self, name: str) -> None:
        with self.engine.begin() as conn:
            self._lock_job(conn, name, require=False)
            conn.execute(delete(trials).where(trials.c.job == name))
            conn.execute(delete(observations).where(observations.c.job == name))
            conn.execute(delete(power_limits).where(power_limits.c.job == name))
            conn.execute(delete(jobs).where(jobs.c.name == name))

    def _lock_job(self, conn, name: str, require: bool = True) -> None:
        """Lock the job's row until the transaction ends: its writers queue here."""
        found = conn.execute(
            select(jobs.c.name).where(jobs.c.name == name).with_for_update()
        ).first()
        if found is None and require:
            raise StoreError(f"no job {name!r} in {self.url}; create a BatchSizeOptimizer first")

    # -- observations -----------------------------------------------------------------------

    @_translated
    def append(self, name: str, obs: Observation) -> int:
        with self.engine.begin() as conn:
            return self._append(conn, name, obs)

    def _append(self, conn, name: str, obs: Observation) -> int:
        """Insert one observation inside the caller's transaction (the job stays locked)."""
        self._lock_job(conn, name)
        new_id = conn.execute(
            insert(observations)
            .values(
                job=name,
                batch_size=int(obs.batch_size),
                time=float(obs.time),
                energy=float(obs.energy),
                cost=float(obs.cost),
                reached=bool(obs.reached),
                power_limit=None if obs.power_limit is None else float(obs.power_limit),
            )
            .returning(observations.c.id)
        ).scalar_one()
        return int(new_id)

    @_translated
    def observations(self, name: str, after: int = 0) -> list[tuple[int, Observation]]:
        c = observations.c
        q = (
            select(c.id, c.batch_size, c.time, c.energy, c.cost, c.reached, c.power_limit)
            .where(c.job == name, c.id > int(after))
            .order_by(c.id)
        )
        with self.engine.connect() as conn:
            rows = conn.execute(q).all()
        return [stored_observation(tuple(r), f"{self.url}, observation {r[0]}") for r in rows]

    # -- just-in-time power limits ----------------------------------------------------------

    @_translated
    def set_power_limit(self, name: str, batch_size: int, watts: float) -> None:
        with self.engine.begin() as conn:
            self._lock_job(conn, name)
            key = (power_limits.c.job == name) & (power_limits.c.batch_size == int(batch_size))
            if conn.execute(select(power_limits.c.job).where(key)).first() is None:
                conn.execute(
                    insert(power_limits).values(
                        job=name, batch_size=int(batch_size), power_limit=float(watts)
                    )
                )
            else:
                conn.execute(power_limits.update().where(key).values(power_limit=float(watts)))

    @_translated
    def power_limits(self, name: str) -> dict[int, float]:
        q = select(power_limits.c.batch_size, power_limits.c.power_limit).where(
            power_limits.c.job == name
        )
        with self.engine.connect() as conn:
            return {int(b): float(p) for b, p in conn.execute(q).all()}

    # -- trials (see zeus_nb.optimizer.batch_size.trials) -----------------------------------

    def new_trial(self, name: str, batch_size: int) -> int:
        with self.engine.begin() as conn:
            self._lock_job(conn, name)  # numbers of one job are taken one at a time
            last = conn.execute(
                select(func.max(trials.c.trial_number)).where(trials.c.job == name)
            ).scalar()
            number = int(last or 0) + 1
            conn.execute(
                insert(trials).values(
                    job=name, trial_number=number, batch_size=int(batch_size), status=DISPATCHED
                )
            )
            return number

    def end_trial(
        self, name: str, trial_number: int, status: str, observation: int | None = None
    ) -> bool:
        check_status(status)
        c = trials.c
        with self.engine.begin() as conn:
            done = conn.execute(
                trials.update()
                .where(c.job == name, c.trial_number == int(trial_number), c.status == DISPATCHED)
                .values(status=status, observation=observation)
            )
            return done.rowcount == 1

    def trials(self, name: str) -> list[Trial]:
        c = trials.c
        q = select(c.job, c.trial_number, c.batch_size, c.status, c.observation).where(
            c.job == name
        )
        with self.engine.connect() as conn:
            rows = conn.execute(q.order_by(c.trial_number)).all()
        return [Trial(r[0], int(r[1]), int(r[2]), r[3], r[4]) for r in rows]
