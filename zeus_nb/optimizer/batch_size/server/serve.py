"""Run the batch-size optimizer server (``zeus-nb bso serve``) with uvicorn.

Listens on 127.0.0.1 unless told otherwise: the server has no authentication, so opening it to
other machines (``--host 0.0.0.0``) is a decision for a trusted network.
"""

from __future__ import annotations

import logging
import sys

from zeus_nb.optimizer.batch_size.server.config import ZeusBsoSettings
from zeus_nb.utils.boundary import needs_extra
from zeus_nb.utils.logging import show_logs

__all__ = ["serve"]

log = logging.getLogger(__name__)


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
    manager = use_database(
        database_url or settings.database_url, settings.echo_sql if echo_sql is None else echo_sql
    )
    log.info("batch-size optimizer server on http://%s:%d, database %s", host, port, manager.url)
    uvicorn_level = "debug" if level == "NOTSET" else level.lower()
    uvicorn.run(app, host=host, port=port, log_level=uvicorn_level)
