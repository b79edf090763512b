"""Run the batch-size optimizer server (``zeus-nb bso serve``) with uvicorn.

Listens on 127.0.0.1 unless told otherwise: the server has no authentication, so opening it to
other machines (``--host 0.0.0.0``) is a decision for a trusted network.

Before it serves, it checks everything it opens (:func:`check_database`, :func:`bind`): the
database's driver is installed, the database is reachable, holds (or can hold) a zeus-nb store
and takes a write; the address and port are free. A failed check is one line saying what to
do, and ``zeus-nb`` exits 2 (a user's error), never a server that answers 500 to everything.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import sys

from zeus_nb.errors import ZeusNbError
from zeus_nb.optimizer.batch_size.server.config import ZeusBsoSettings, default_url
from zeus_nb.optimizer.batch_size.store import default_path
from zeus_nb.utils.boundary import needs_extra
from zeus_nb.utils.logging import show_logs

__all__ = ["ServeError", "bind", "check_database", "serve"]

log = logging.getLogger(__name__)


class ServeError(ZeusNbError):
    """The server cannot start: its database or its address is unusable (says which)."""


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``, or a :class:`ServeError` saying why not."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise ServeError(f"cannot listen on {host!r}: no such address ({e}); give an IP "
                         "address of this machine, e.g. --host 127.0.0.1") from None  # fmt: skip
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        if sys.platform != "win32":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise ServeError(
                f"port {port} on {host} is in use by another program; stop it or pick another "
                "port (--port)"
            ) from None
        if e.errno in (errno.EACCES, errno.EPERM):
            raise ServeError(
                f"no permission to listen on {host}:{port}; use a port above 1023 (--port)"
            ) from None
        raise ServeError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    sock.set_inheritable(True)
    return sock


def check_database(url: str, echo: bool = False) -> str:
    """Open the database at ``url`` as the server will and try it; its displayed URL.

    The tables are created if missing, the store's schema version is checked, a write is
    rolled back, and trials handed out by an older zeus-nb get a lease (see
    :mod:`.database.schema`).
    """
    from zeus_nb.optimizer.batch_size.server.database.db_connection import (
        DatabaseSessionManager,
        describe_failure,
    )

    manager = DatabaseSessionManager(url, {"echo": echo})

    async def trial() -> None:
        try:
            await manager.create_tables()
            await manager.probe()
        finally:
            await manager.close()

    try:
        asyncio.run(trial())
    except ZeusNbError:
        raise
    except Exception as e:  # SQLAlchemy's and the drivers' errors, OSError
        raise ServeError(describe_failure(manager.url, e)) from None
    return manager.url


def serve(
    host: str = "127.0.0.1",
    port: int = 8000,
    database_url: str | None = None,
    log_level: str | None = None,
    echo_sql: bool | None = None,
) -> None:
    """Serve the app until interrupted. Unset arguments come from the ``ZEUS_BSO_*`` settings
    (:mod:`zeus_nb.optimizer.batch_size.server.config`)."""
    with needs_extra("server", "the batch-size optimizer server"):
        import uvicorn

        from zeus_nb.optimizer.batch_size.server.database.db_connection import use_database
        from zeus_nb.optimizer.batch_size.server.router import app

    settings = ZeusBsoSettings()
    level = (log_level or settings.log_level).upper()
    show_logs(level, stream=sys.stderr)
    url = database_url or settings.database_url
    if url == default_url():  # zeus-nb's own folder for state: made on first use
        default_path().parent.mkdir(parents=True, exist_ok=True)
    echo = settings.echo_sql if echo_sql is None else echo_sql
    shown = check_database(url, echo)
    sock = bind(host, port)
    use_database(url, echo)
    log.info("batch-size optimizer server on http://%s:%d, database %s", host, port, shown)
    uvicorn_level = "debug" if level == "NOTSET" else level.lower()
    config = uvicorn.Config(app, log_level=uvicorn_level)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
