"""The batch-size optimizer server's settings, from ``ZEUS_BSO_*`` environment variables.

``ZEUS_BSO_DATABASE_URL`` is where the server keeps its jobs: any store location zeus-nb takes
(``sqlite:///PATH``, a file path, ``postgresql://USER:PASSWORD@HOST/DB``) or an async SQLAlchemy
URL (``sqlite+aiosqlite:///PATH``, ``postgresql+asyncpg://...``). Unset, it is zeus-nb's
default store file (``$ZEUS_NB_STATE_DIR/bso.sqlite3``), where Zeus's server requires one.
``ZEUS_BSO_ECHO_SQL`` (true/false) logs every SQL statement; ``ZEUS_BSO_LOG_LEVEL`` is the level
``zeus-nb bso serve`` logs at (default INFO). A value that does not fit is an error naming the
variable, not a silent default.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from zeus_nb.inputs.env import env
from zeus_nb.optimizer.batch_size.store import default_path

__all__ = ["ZeusBsoSettings", "settings"]

LEVELS = {"notset": "NOTSET", "warn": "WARNING"}


def _database_url() -> str:
    return env("ZEUS_BSO_DATABASE_URL") or f"sqlite:///{default_path()}"


def _echo_sql() -> bool:
    return bool(env("ZEUS_BSO_ECHO_SQL", False))


def _log_level() -> str:
    level = env("ZEUS_BSO_LOG_LEVEL", "info")
    return LEVELS.get(level, level.upper())


@dataclass
class ZeusBsoSettings:
    """Where the server keeps its jobs, whether it echoes SQL, and its log level (Zeus's
    fields); each defaults to its environment variable, read when the settings are made."""

    database_url: str = field(default_factory=_database_url)
    echo_sql: bool = field(default_factory=_echo_sql)
    log_level: str = field(default_factory=_log_level)


settings = ZeusBsoSettings()
