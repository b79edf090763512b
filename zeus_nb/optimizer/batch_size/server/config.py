"""The batch-size optimizer server's settings, from ``ZEUS_BSO_*`` environment variables.

``ZEUS_BSO_DATABASE_URL`` is where the server keeps its jobs: any store location zeus-nb takes
(``sqlite:///PATH``, a file path, ``postgresql://USER:PASSWORD@HOST/DB``) or an async SQLAlchemy
URL (``sqlite+aiosqlite:///PATH``, ``postgresql+asyncpg://...``). Unset, it is zeus-nb's
default store file (``$ZEUS_NB_STATE_DIR/bso.sqlite3``), where Zeus's server requires one.
``ZEUS_BSO_ECHO_SQL`` (true/false) logs every SQL statement; ``ZEUS_BSO_LOG_LEVEL`` is the level
``zeus-nb bso serve`` logs at (default INFO). ``ZEUS_BSO_TRIAL_LEASE`` is how many seconds a
handed-out trial counts as running without a report (default 6 h; each report renews it).
A value that does not fit is an error naming the variable, not a silent default.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from zeus_nb.inputs.env import env
from zeus_nb.optimizer.batch_size.store import default_path

__all__ = ["ZeusBsoSettings", "settings"]

LEVELS = {"notset": "NOTSET", "warn": "WARNING"}
#: Seconds a dispatched trial counts as running without a report: 6 h. Zeus's client reports
#: after every epoch, and each report renews the lease; a trial silent for longer is lost.
DEFAULT_TRIAL_LEASE = 6 * 3600.0


def default_url() -> str:
    """The database when none is given: zeus-nb's default store file."""
    return f"sqlite:///{default_path()}"


def _database_url() -> str:
    return env("ZEUS_BSO_DATABASE_URL") or default_url()


def _echo_sql() -> bool:
    return bool(env("ZEUS_BSO_ECHO_SQL", False))


def _trial_lease() -> float:
    return float(env("ZEUS_BSO_TRIAL_LEASE", DEFAULT_TRIAL_LEASE))


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
    trial_lease: float = field(default_factory=_trial_lease)


settings = ZeusBsoSettings()
