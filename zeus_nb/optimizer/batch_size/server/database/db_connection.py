"""The server's database connection: an async SQLAlchemy engine and one session per request.

:class:`DatabaseSessionManager` owns the engine; :func:`get_db_session` is the FastAPI
dependency every route takes its session from (tests override it with their own manager). The
first session of the default manager creates the tables, so a new database needs no setup.

Every write of one job is serialized, also between server processes sharing a database: on
SQLite each transaction starts with ``BEGIN IMMEDIATE`` (a second writer waits for the first,
up to :data:`SQLITE_TIMEOUT`), on PostgreSQL a request locks its job's row.

A SQLite database keeps a write-ahead log (``journal_mode=WAL``, as zeus-nb's SQLite store
keeps its file), with every commit synced to the disk (``synchronous=FULL``: a commit the
server answered survives a power cut, as with SQLite's default rollback journal). A commit
then appends to the log and syncs it once, where the rollback journal wrote, synced and
deleted a journal file and synced the database (on the project's machine a commit took 12 ms
on average with the journal, 2 ms with the log); readers (``zeus-nb bso show``) never block
the server.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, InvalidRequestError, NoSuchModuleError
from sqlalchemy.ext.asyncio import (
    AsyncConnection,
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from zeus_nb.errors import InputError
from zeus_nb.inputs.registry import not_input, system_read
from zeus_nb.optimizer.batch_size.server import config
from zeus_nb.optimizer.batch_size.server.config import settings
from zeus_nb.optimizer.batch_size.server.database.schema import SCHEMA_VERSION, Base
from zeus_nb.optimizer.batch_size.server.exceptions import ZeusBSOServerRuntimeError
from zeus_nb.optimizer.batch_size.server.jobs import Jobs
from zeus_nb.optimizer.batch_size.store import (
    SCHEMA_COMPONENT,
    StoreError,
    check_schema_version,
    sqlite_meaning,
)

__all__ = [
    "DatabaseSessionManager",
    "async_url",
    "describe_failure",
    "get_db_session",
    "use_database",
]

log = logging.getLogger(__name__)

SQLITE_TIMEOUT = 60.0  # s a write waits for another writer's lock
# The async driver each synchronous URL scheme means here.
_ASYNC_DRIVERS = {
    "sqlite": "sqlite+aiosqlite",
    "postgresql": "postgresql+psycopg",
    "mysql": "mysql+aiomysql",
    "mariadb": "mariadb+aiomysql",
}
#: The pip package of each async driver's module (what to install when it is missing).
_DRIVER_PACKAGES = {
    "aiosqlite": "aiosqlite",
    "psycopg": "'psycopg[binary]'",
    "asyncpg": "asyncpg",
    "aiomysql": "aiomysql",
    "asyncmy": "asyncmy",
}


def describe_failure(url: str, e: BaseException) -> str:
    """One line for a database that failed to open or answer: where, what, what to do."""
    text = " ".join(str(getattr(e, "orig", None) or e).split())
    low = text.lower()
    if "connection refused" in low or "connect call failed" in low or "could not connect" in low:
        return (
            f"cannot connect to the database at {url} (connection refused); start the database "
            "server, or fix the host and port in the URL"
        )
    if "password authentication" in low or "access denied" in low:
        return f"the database at {url} refused the user or password; fix them in the URL"
    if "not a database" in low or "malformed" in low:
        return (
            f"{url} is not a SQLite database (the file holds something else); give a new "
            "file or the store file zeus-nb wrote"
        )
    if "unable to open" in low:
        return f"cannot open the database {url} ({text}); check the path and its permissions"
    return f"the database {url}: {sqlite_meaning(text)}"


def async_url(location: str) -> str:
    """An async SQLAlchemy URL for a database location.

    Takes what zeus-nb's stores take (a file path, ``sqlite:///PATH``,
    ``postgresql://USER:PASSWORD@HOST/DB``) and async URLs as they are
    (``sqlite+aiosqlite:///PATH``, ``postgresql+asyncpg://...``).
    """
    text = str(location).strip()
    if not text:
        raise InputError("the database URL is empty; give sqlite:///PATH or postgresql://...")
    if "://" not in text:
        return f"sqlite+aiosqlite:///{Path(text).expanduser()}"
    try:
        url = make_url(text)
    except ArgumentError as e:
        raise InputError(f"not a database URL: {text!r} ({e})") from None
    name = "postgresql" if url.drivername == "postgres" else url.drivername
    driver = _ASYNC_DRIVERS.get(name, name)
    return url.set(drivername=driver).render_as_string(hide_password=False)


def _write_ahead_log(dbapi_connection) -> None:
    """Switch the connection's database to WAL (kept in the file), each commit synced.

    A file another process holds in a transaction cannot switch (SQLite answers "locked" at
    once); it is then served with its rollback journal, as correctly, and switches later."""
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode")
        mode = cursor.fetchone()
        if mode and str(mode[0]).lower() not in ("wal", "memory"):
            try:
                cursor.execute("PRAGMA journal_mode=WAL")
                cursor.fetchall()
            except Exception as e:  # the driver's OperationalError, adapted
                log.info("the database keeps its rollback journal for now (%s)", e)
        cursor.execute("PRAGMA synchronous=FULL")
    finally:
        cursor.close()


def _serialize_sqlite_writes(engine: AsyncEngine) -> None:
    """Open every SQLite transaction with BEGIN IMMEDIATE (SQLAlchemy's recipe for pysqlite
    and aiosqlite): a request reads its job and writes it back, and two such requests must
    not interleave, even from two processes. Each connection uses the write-ahead log
    (:func:`_write_ahead_log`)."""

    @event.listens_for(engine.sync_engine, "connect")
    def _no_implicit_begin(dbapi_connection, _record) -> None:
        dbapi_connection.isolation_level = None
        _write_ahead_log(dbapi_connection)

    @event.listens_for(engine.sync_engine, "begin")
    def _begin_immediate(connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


class DatabaseSessionManager:
    """An async engine for ``host`` (a database URL, see :func:`async_url`) and its sessions.

    ``engine_kwargs`` go to :func:`sqlalchemy.ext.asyncio.create_async_engine` (``echo``...).
    """

    @not_input(
        "the batch-size optimizer server's own database (a zeus-nb store); every row "
        "server.jobs reads is checked there through JOB_SPEC and STORED_RUN, as the "
        "stores do"
    )
    @system_read(
        "the server's database, reached by URL (Zeus's settings name it, as a "
        "database server's or an SQLite file's); a session that cannot open it fails "
        "with our error"
    )
    def __init__(self, host: str, engine_kwargs: dict[str, Any] | None = None) -> None:
        kwargs = dict(engine_kwargs or {})
        url = async_url(host)
        if make_url(url).get_backend_name() == "sqlite":
            kwargs.setdefault("connect_args", {}).setdefault("timeout", SQLITE_TIMEOUT)
        parsed = make_url(url)
        self.url = parsed.render_as_string(hide_password=True)
        if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
            folder = Path(parsed.database).expanduser().parent
            if not folder.is_dir():
                raise StoreError(
                    f"the folder {folder} of the database {self.url} does not exist; create it "
                    "(mkdir -p) or give another path"
                )
        try:
            self._engine: AsyncEngine | None = create_async_engine(url, **kwargs)
        except ImportError as e:
            module = (getattr(e, "name", None) or str(e)).split(".")[0]
            package = _DRIVER_PACKAGES.get(module, module)
            raise StoreError(
                f"the database URL {self.url} needs the Python driver {module}, which is not "
                f"installed: pip install {package} (or give another URL)"
            ) from None
        except (NoSuchModuleError, InvalidRequestError) as e:
            raise StoreError(
                f"the database URL {self.url} names a driver SQLAlchemy cannot use here "
                f"({' '.join(str(e).split())[:160]}); give sqlite:///PATH or "
                "postgresql://USER@HOST/DB"
            ) from None
        if self._engine.dialect.name == "sqlite":
            _serialize_sqlite_writes(self._engine)
        self._sessionmaker: async_sessionmaker[AsyncSession] | None = async_sessionmaker(
            bind=self._engine, autoflush=False, expire_on_commit=False
        )
        self._tables_ready = False

    def _require(self) -> AsyncEngine:
        if self._engine is None:
            raise ZeusBSOServerRuntimeError(f"the connection to {self.url} is closed")
        return self._engine

    async def close(self) -> None:
        """Close every connection; the manager cannot be used afterwards."""
        await self._require().dispose()
        self._engine = None
        self._sessionmaker = None

    @contextlib.asynccontextmanager
    async def connect(self) -> AsyncIterator[AsyncConnection]:
        """A connection in a transaction, committed at the end, rolled back on an error."""
        async with self._require().begin() as connection:
            yield connection

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[AsyncSession]:
        """A session; what it did is rolled back unless the caller committed."""
        self._require()
        assert self._sessionmaker is not None
        session = self._sessionmaker()
        try:
            yield session
        except Exception:
            await session.rollback()
            raise
        finally:
            await session.close()

    async def probe(self) -> None:
        """Try the database as requests will: read the store's schema version (a newer store
        is refused), take a write (rolled back), and lease the trials an older zeus-nb left
        out (see :mod:`.schema`)."""
        from sqlalchemy import delete, insert, select

        c = SCHEMA_VERSION.c
        async with self.session() as session:
            found = await session.scalar(select(c.version).where(c.component == SCHEMA_COMPONENT))
            if found is not None:
                check_schema_version(found, self.url)
            probe = f"{SCHEMA_COMPONENT}-start-up-probe"
            await session.execute(insert(SCHEMA_VERSION).values(component=probe, version=0))
            await session.execute(delete(SCHEMA_VERSION).where(c.component == probe))
            await session.rollback()
            leased = await Jobs(session).lease_unleased(time.time() + config.settings.trial_lease)
            await session.commit()
        if leased:
            log.info("%d trial(s) handed out before leases now have one", leased)

    async def create_tables(self) -> None:
        """Create the tables that do not exist yet (once per manager)."""
        if self._tables_ready:
            return
        async with self.connect() as connection:
            await connection.run_sync(Base.metadata.create_all)
        self._tables_ready = True
        log.info("batch-size optimizer server database: %s", self.url)


_default: DatabaseSessionManager | None = None


def use_database(url: str, echo: bool = False) -> DatabaseSessionManager:
    """Make ``url`` the database of :func:`get_db_session` (``zeus-nb bso serve`` does)."""
    global _default
    _default = DatabaseSessionManager(url, {"echo": echo})
    return _default


def _manager() -> DatabaseSessionManager:
    return (
        _default if _default is not None else use_database(settings.database_url, settings.echo_sql)
    )


async def get_db_session() -> AsyncIterator[AsyncSession]:
    """A session on the server's database, for one request (a FastAPI dependency)."""
    manager = _manager()
    await manager.create_tables()
    async with manager.session() as session:
        yield session


def __getattr__(name: str) -> Any:
    """``sessionmanager``: the default manager, made on first use from ``settings``."""
    if name == "sessionmanager":
        return _manager()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
