"""The server's tables: a zeus-nb store (the same layout as ``SQLStore``'s) and two of its own.

``Base.metadata`` holds copies of the store's tables (``schema_version``, ``jobs``,
``observations``, ``power_limits``, ``trials``, defined once in
:mod:`zeus_nb.optimizer.batch_size.sql_store`) and the server's:

* ``bso_server_jobs``: Zeus's record of each job it registered (target metric, max epochs,
  the ``mab_*`` knobs...), as JSON, beside the store's own settings row in ``jobs``;
* ``bso_server_trials``: what each trial was handed out as: an ``exploration`` of pruning, a
  ``concurrent`` run while an exploration was still out, or a ``mab`` (Thompson) choice. Only
  explorations advance pruning, as in Zeus's server;
* ``bso_server_leases``: when each trial still out (dispatched) stops counting as running: a
  trial whose lease ran out is lost (failed), so one run that never reports cannot hold
  pruning for ever. A report renews the lease; an ended trial has none.

Everything else (results, costs, which run reached the target) is the store's.
"""

from __future__ import annotations

from sqlalchemy import (
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    MetaData,
    String,
    Text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from zeus_nb.optimizer.batch_size import sql_store

__all__ = [
    "JOBS",
    "OBSERVATIONS",
    "POWER_LIMITS",
    "SCHEMA_VERSION",
    "TRIALS",
    "Base",
    "ServerJob",
    "ServerLease",
    "ServerTrial",
]

EXPLORATION, CONCURRENT, MAB = "exploration", "concurrent", "mab"
TRIAL_KINDS = (EXPLORATION, CONCURRENT, MAB)


class Base(DeclarativeBase):
    """The declarative base whose metadata lists every table of the server's database."""

    metadata = MetaData()


SCHEMA_VERSION, JOBS, OBSERVATIONS, POWER_LIMITS, TRIALS = (
    table.to_metadata(Base.metadata)
    for table in (
        sql_store.schema_version,
        sql_store.jobs,
        sql_store.observations,
        sql_store.power_limits,
        sql_store.trials,
    )
)


class ServerJob(Base):
    """Zeus's record of a job registered through the server (``CreatedJob`` as JSON)."""

    __tablename__ = "bso_server_jobs"

    job_id: Mapped[str] = mapped_column(Text, ForeignKey("jobs.name"), primary_key=True)
    record: Mapped[str] = mapped_column(Text, nullable=False)


class ServerTrial(Base):
    """What a trial was handed out as (one of :data:`TRIAL_KINDS`)."""

    __tablename__ = "bso_server_trials"

    job: Mapped[str] = mapped_column(Text, primary_key=True)
    trial_number: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), nullable=False)

    __table_args__ = (
        ForeignKeyConstraint(["job", "trial_number"], ["trials.job", "trials.trial_number"]),
    )


class ServerLease(Base):
    """The lease of a dispatched trial: Unix time (s) at which it counts as lost."""

    __tablename__ = "bso_server_leases"

    job: Mapped[str] = mapped_column(Text, primary_key=True)
    trial_number: Mapped[int] = mapped_column(Integer, primary_key=True)
    expires: Mapped[float] = mapped_column(Float, nullable=False)

    __table_args__ = (
        ForeignKeyConstraint(["job", "trial_number"], ["trials.job", "trials.trial_number"]),
        Index("bso_server_leases_expiry", "job", "expires"),
    )
