"""The server's database connection: an async SQLAlchemy engine and one session per request.

:class:`DatabaseSessionManager` owns the engine; :func:`get_db_session` is the FastAPI
dependency every route takes its session from (tests override it with their own manager). The
first session of the default manager creates the tables, so a new database needs no setup.

Every write of one job is serialized, also between server processes sharing a database: on
SQLite each transaction starts with ``BEGIN IMMEDIATE`` (a second writer waits for the first,
up to :data:`SQLITE_TIMEOUT`), on PostgreSQL a request locks its job's row.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.ext.asyncio import (
    AsyncConnection,
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from zeus_nb.errors import InputError
from zeus_nb.inputs.registry import not_input, system_read
from zeus_nb.optimizer.batch_size.server.config import settings
from zeus_nb.optimizer.batch_size.server.database.schema import Base
from zeus_nb.optimizer.batch_size.server.exceptions import ZeusBSOServerRuntimeError

__all__ = ["DatabaseSessionManager", "async_url", "get_db_session", "use_database"]

log = logging.getLogger(__name__)

SQLITE_TIMEOUT = 60.0  # s a write waits for another writer's lock
# The async driver each synchronous URL scheme means here.
_ASYNC_DRIVERS = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+psycopg"}


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


def _serialize_sqlite_writes(engine: AsyncEngine) -> None:
    """Open every SQLite transaction with BEGIN IMMEDIATE (SQLAlchemy's recipe for pysqlite
    and aiosqlite): a request reads its job and writes it back, and two such requests must
    not interleave, even from two processes."""

    @event.listens_for(engine.sync_engine, "connect")
    def _no_implicit_begin(dbapi_connection, _record) -> None:
        dbapi_connection.isolation_level = None

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
        self.url = make_url(url).render_as_string(hide_password=True)
        self._engine: AsyncEngine | None = create_async_engine(url, **kwargs)
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
