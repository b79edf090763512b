"""One job's state in the server's database, read and written through a request's session.

A request loads its whole job (:meth:`Jobs.load`: the store's settings, every reported run and
every trial) and writes back what changed. Rows read from the database are checked as the
stores check them (:mod:`zeus_nb.optimizer.batch_size.checks`): a damaged row is named, never
used. Nothing here commits; the router commits once per request.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from zeus_nb.optimizer.batch_size.checks import spec_from_json, stored_observation
from zeus_nb.optimizer.batch_size.common import CreatedJob
from zeus_nb.optimizer.batch_size.server.database.schema import (
    JOBS,
    OBSERVATIONS,
    POWER_LIMITS,
    SCHEMA_VERSION,
    TRIAL_KINDS,
    TRIALS,
    ServerJob,
    ServerTrial,
)
from zeus_nb.optimizer.batch_size.store import (
    SCHEMA_COMPONENT,
    JobSpec,
    Observation,
    StoreError,
    check_schema_version,
)
from zeus_nb.optimizer.batch_size.store import (
    SCHEMA_VERSION as STORE_VERSION,
)
from zeus_nb.optimizer.batch_size.trials import DISPATCHED, check_status

__all__ = ["JobState", "Jobs", "TrialRow"]


@dataclass(frozen=True)
class TrialRow:
    """One trial: its batch size, status (dispatched, succeeded, failed), what it was handed
    out as (exploration, concurrent, mab) and the id of its reported run, if any."""

    number: int
    batch_size: int
    status: str
    kind: str
    observation: int | None


@dataclass
class JobState:
    """Everything the server knows about one job, as one request read it."""

    job: CreatedJob
    spec: JobSpec
    log: list[tuple[int, Observation]] = field(default_factory=list)
    trials: list[TrialRow] = field(default_factory=list)

    def trial(self, number: int) -> TrialRow | None:
        return next((t for t in self.trials if t.number == number), None)

    def observation(self, observation_id: int) -> Observation | None:
        return next((o for i, o in self.log if i == observation_id), None)


class Jobs:
    """The jobs of the server's database, through one request's session."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    # -- reading ----------------------------------------------------------------------------

    async def record(self, job_id: str) -> CreatedJob | None:
        """Zeus's record of a job registered through the server; None if there is none."""
        text = await self.session.scalar(select(ServerJob.record).where(ServerJob.job_id == job_id))
        if text is None:
            return None
        try:
            return CreatedJob.parse_obj(json.loads(text))
        except (TypeError, ValueError) as e:
            raise StoreError(
                f"the server's record of job {job_id!r} is damaged ({e}); delete the job "
                "(DELETE /jobs) to start it over"
            ) from None

    async def in_store(self, job_id: str) -> bool:
        """Whether the store has a job of that name (registered here or by a client directly)."""
        found = await self.session.scalar(select(JOBS.c.name).where(JOBS.c.name == job_id))
        return found is not None

    async def load(self, job_id: str) -> JobState | None:
        """The job's whole state, its row locked until the request ends; None if the server
        never registered it."""
        spec_text = await self.session.scalar(
            select(JOBS.c.spec).where(JOBS.c.name == job_id).with_for_update()
        )
        job = await self.record(job_id)
        if spec_text is None or job is None:
            return None
        spec = spec_from_json(spec_text, f"the server's database, job {job_id!r}")
        c = OBSERVATIONS.c
        rows = await self.session.execute(
            select(c.id, c.batch_size, c.time, c.energy, c.cost, c.reached, c.power_limit)
            .where(c.job == job_id)
            .order_by(c.id)
        )
        log = [stored_observation(tuple(r), f"the server's database, run {r[0]}") for r in rows]
        t, k = TRIALS.c, ServerTrial.__table__.c
        rows = await self.session.execute(
            select(t.trial_number, t.batch_size, t.status, k.kind, t.observation)
            .join(ServerTrial, (k.job == t.job) & (k.trial_number == t.trial_number))
            .where(t.job == job_id)
            .order_by(t.trial_number)
        )
        trials = [TrialRow(int(n), int(b), s, kind, o) for n, b, s, kind, o in rows]
        return JobState(job, spec, log, trials)

    # -- writing ----------------------------------------------------------------------------

    async def _claim_store(self) -> None:
        """Mark the database as a zeus-nb store (its schema version), or refuse a newer one."""
        c = SCHEMA_VERSION.c
        found = await self.session.scalar(select(c.version).where(c.component == SCHEMA_COMPONENT))
        if found is None:
            await self.session.execute(
                insert(SCHEMA_VERSION).values(component=SCHEMA_COMPONENT, version=STORE_VERSION)
            )
        else:
            check_schema_version(found, "the server's database")

    async def create(self, job: CreatedJob, spec: JobSpec) -> None:
        """Register a new job: the store's settings row and Zeus's record."""
        await self._claim_store()
        await self.session.execute(insert(JOBS).values(name=spec.name, spec=spec.to_json()))
        await self.session.execute(insert(ServerJob).values(job_id=job.job_id, record=job.json()))

    async def add_trial(self, job_id: str, batch_size: int, kind: str) -> int:
        """Hand out ``batch_size`` as the job's next trial; returns its number (1, 2, ...)."""
        if kind not in TRIAL_KINDS:
            raise ValueError(f"a trial is one of {TRIAL_KINDS}, not {kind!r}")
        last = await self.session.scalar(
            select(func.max(TRIALS.c.trial_number)).where(TRIALS.c.job == job_id)
        )
        number = int(last or 0) + 1
        await self.session.execute(
            insert(TRIALS).values(
                job=job_id, trial_number=number, batch_size=int(batch_size), status=DISPATCHED
            )
        )
        await self.session.execute(
            insert(ServerTrial).values(job=job_id, trial_number=number, kind=kind)
        )
        return number

    async def append(self, job_id: str, obs: Observation) -> int:
        """Add a reported run to the job's log; returns its id."""
        result = await self.session.execute(
            insert(OBSERVATIONS).values(
                job=job_id,
                batch_size=int(obs.batch_size),
                time=float(obs.time),
                energy=float(obs.energy),
                cost=float(obs.cost),
                reached=bool(obs.reached),
                power_limit=None if obs.power_limit is None else float(obs.power_limit),
            )
        )
        return int(result.inserted_primary_key[0])

    async def end_trial(
        self, job_id: str, number: int, status: str, observation: int | None = None
    ) -> None:
        """A dispatched trial ends as succeeded (with its run) or failed."""
        check_status(status)
        t = TRIALS.c
        await self.session.execute(
            update(TRIALS)
            .where(t.job == job_id, t.trial_number == int(number), t.status == DISPATCHED)
            .values(status=status, observation=observation)
        )

    async def delete(self, job_id: str) -> bool:
        """Forget a job the server registered, with all its runs; False if there is none."""
        if await self.record(job_id) is None:
            return False
        await self.session.execute(delete(ServerTrial).where(ServerTrial.job == job_id))
        await self.session.execute(delete(ServerJob).where(ServerJob.job_id == job_id))
        for table in (TRIALS, OBSERVATIONS, POWER_LIMITS):
            await self.session.execute(delete(table).where(table.c.job == job_id))
        await self.session.execute(delete(JOBS).where(JOBS.c.name == job_id))
        return True
