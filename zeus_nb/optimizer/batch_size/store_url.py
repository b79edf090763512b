"""Open the batch-size optimizer's state store from a URL or a path.

Accepted forms (also in ``$ZEUS_NB_BSO_STORE``, used when no location is given):

* nothing: the SQLite file at the default location (``$ZEUS_NB_STATE_DIR/bso.sqlite3``);
* a file path or ``sqlite:///relative/path`` / ``sqlite:////absolute/path``: a SQLite file,
  for processes on one machine;
* ``postgresql://user:password@host:5432/database``: a PostgreSQL database, for recurrences on
  many machines.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from zeus_nb.inputs.env import env
from zeus_nb.optimizer.batch_size.sqlite_store import SQLiteStore
from zeus_nb.optimizer.batch_size.store import (
    MemoryStore,
    StoreError,
    StoreNotFoundError,
    default_path,
)

STORE_ENV = "ZEUS_NB_BSO_STORE"
URL_FORMS = "a SQLite file path, sqlite:///PATH, or postgresql://USER:PASSWORD@HOST:PORT/DATABASE"


class StoreURLError(StoreError, ValueError):
    """A store location zeus-nb cannot open (a server's HTTP URL, an unknown scheme)."""


def _scheme(location: str) -> str | None:
    head, sep, _ = location.partition("://")
    return head.lower() if sep else None


def is_store(obj: Any) -> bool:
    """Whether ``obj`` is an opened store (rather than a location)."""
    if isinstance(obj, (MemoryStore, SQLiteStore)):
        return True
    sql = sys.modules.get("zeus_nb.optimizer.batch_size.sql_store")  # only if SQLAlchemy is used
    return sql is not None and isinstance(obj, sql.SQLStore)


def sqlite_path(location: str) -> Path:
    """The file of a ``sqlite:///...`` URL (three slashes: relative; four: absolute)."""
    rest = location.split("://", 1)[1]
    if not rest.startswith("/") or rest in ("/", "/:memory:"):
        raise StoreURLError(
            f"{location!r} names no file; write sqlite:///relative/path or "
            "sqlite:////absolute/path (in-memory databases cannot be shared)"
        )
    return Path(rest[1:].split("?", 1)[0]).expanduser()


def open_store(location: Any = None, *, create: bool = True):
    """The store at ``location`` (see the module docstring), or ``location`` if already one.

    ``create=False`` is for read-only commands: a missing SQLite file or an empty database
    raises :class:`~zeus_nb.optimizer.batch_size.store.StoreNotFoundError` and nothing is
    created.
    """
    if is_store(location):
        return location
    if isinstance(location, str) and not location.strip():
        raise StoreURLError(f"the store location is empty; give {URL_FORMS}, or leave it out")
    if location is None:
        location = env(STORE_ENV)
    if location is None or isinstance(location, Path):
        path = Path(location).expanduser() if location is not None else default_path()
        return _open_sqlite(path, create)
    if not isinstance(location, str):
        raise StoreURLError(f"a store location is {URL_FORMS}; got {type(location).__name__}")
    scheme = _scheme(location)
    if scheme is None:
        return _open_sqlite(Path(location).expanduser(), create)
    base = scheme.split("+", 1)[0]
    if base == "sqlite":
        return _open_sqlite(sqlite_path(location), create)
    if base in ("postgresql", "postgres"):
        check_port(location)
        try:
            from zeus_nb.optimizer.batch_size.sql_store import SQLStore
        except ImportError as e:
            raise StoreError(
                f"a PostgreSQL store needs SQLAlchemy and psycopg ({e}); install the cluster "
                "extra: pip install 'zeus-nb[cluster]'"
            ) from e
        return SQLStore(location, create=create)
    if base in ("http", "https"):
        raise StoreURLError(
            f"{location} is a batch-size optimizer server URL, not a store: give it to the "
            "in-training client as server_url (the server keeps the state; read it there with "
            f"the server's database URL). As a store give {URL_FORMS}"
        )
    raise StoreURLError(f"cannot open a store at {location!r}; give {URL_FORMS}")


def check_port(location: str) -> None:
    """A server URL's port, if it has one, is a number from 1 to 65535."""
    from urllib.parse import urlsplit

    try:
        port = urlsplit(location).port
    except ValueError:
        port = -1
    if port is not None and not 1 <= port <= 65535:
        shown = location.split("@")[-1]  # never the password
        raise StoreURLError(
            f"the store URL ...@{shown} has no valid port; give a port from 1 to 65535 "
            "(PostgreSQL listens on 5432 by default) or leave it out"
        )


def _open_sqlite(path: Path, create: bool) -> SQLiteStore:
    for folder in path.parents:  # a file where a folder is needed is no "empty store"
        if folder.exists():
            if not folder.is_dir():
                raise StoreURLError(
                    f"{folder} is a file, not a folder, so {path} cannot be a store; give "
                    f"another path (or set {STORE_ENV} or ZEUS_NB_STATE_DIR to a folder)"
                )
            break
    if not create and (not path.exists() or (path.is_file() and path.stat().st_size == 0)):
        # A read command: a missing or empty file is reported, never created or initialised.
        raise StoreNotFoundError(f"no batch-size optimizer state at {path}")
    return SQLiteStore(path, readonly=not create)


def describe(store) -> str:
    """Where a store lives, for messages (passwords hidden)."""
    for attr in ("url", "path"):
        value = getattr(store, attr, None)
        if value is not None:
            return str(value)
    return "memory"
