"""One job's state in the server's database, read and written through a request's session.

A request loads its job's records and open trials (:meth:`Jobs.load`); the reported runs are
read incrementally (:meth:`Jobs.observations_after`, for :mod:`.policy`'s cache), so a request
costs the same whatever the job's history. It writes back what changed. Rows read from the
database are checked as the stores check them (:mod:`zeus_nb.optimizer.batch_size.checks`): a
damaged row is named, never used. Nothing here commits; the router commits once per request.
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
    ServerLease,
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
from zeus_nb.optimizer.batch_size.trials import DISPATCHED, FAILED, check_status

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
    """What a request needs of one job: its records and the trials still out (leased).

    The runs themselves are read incrementally by the policy cache (:mod:`.policy`), so a
    request costs the same at 10 runs as at 1000; ``key`` is what that cache is valid for.
    """

    job: CreatedJob
    spec: JobSpec
    key: tuple[str, str]
    open: list[TrialRow] = field(default_factory=list)


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
        """The job's records and open trials, its row locked until the request ends; None if
        the server never registered it."""
        spec_text = await self.session.scalar(
            select(JOBS.c.spec).where(JOBS.c.name == job_id).with_for_update()
        )
        record_text = await self.session.scalar(
            select(ServerJob.record).where(ServerJob.job_id == job_id)
        )
        if spec_text is None or record_text is None:
            return None
        job = await self.record(job_id)
        assert job is not None
        spec = spec_from_json(spec_text, f"the server's database, job {job_id!r}")
        t, k, lease = TRIALS.c, ServerTrial.__table__.c, ServerLease.__table__.c
        rows = await self.session.execute(
            select(t.trial_number, t.batch_size, t.status, k.kind, t.observation)
            .join(ServerTrial, (k.job == t.job) & (k.trial_number == t.trial_number))
            .join(ServerLease, (lease.job == t.job) & (lease.trial_number == t.trial_number))
            .where(t.job == job_id, t.status == DISPATCHED)
            .order_by(t.trial_number)
        )
        open_trials = [TrialRow(int(n), int(b), s, kind, o) for n, b, s, kind, o in rows]
        return JobState(job, spec, (spec_text, record_text), open_trials)

    async def trial(self, job_id: str, number: int) -> TrialRow | None:
        """One trial of the job, or None."""
        t, k = TRIALS.c, ServerTrial.__table__.c
        row = (
            await self.session.execute(
                select(t.trial_number, t.batch_size, t.status, k.kind, t.observation)
                .join(ServerTrial, (k.job == t.job) & (k.trial_number == t.trial_number))
                .where(t.job == job_id, t.trial_number == int(number))
            )
        ).first()
        return None if row is None else TrialRow(int(row[0]), int(row[1]), row[2], row[3], row[4])

    def _runs(self):
        c = OBSERVATIONS.c
        return select(c.id, c.batch_size, c.time, c.energy, c.cost, c.reached, c.power_limit)

    async def observation(self, job_id: str, observation_id: int) -> Observation | None:
        """One reported run of the job, or None."""
        c = OBSERVATIONS.c
        row = (
            await self.session.execute(
                self._runs().where(c.job == job_id, c.id == int(observation_id))
            )
        ).first()
        if row is None:
            return None
        return stored_observation(tuple(row), f"the server's database, run {row[0]}")[1]

    async def observations_after(
        self, job_id: str, after: int
    ) -> list[tuple[int, Observation, str | None]]:
        """The job's runs with ids above ``after``, in order, each with the kind of the trial
        it reported (None for a run a client wrote into the store directly)."""
        c, t, k = OBSERVATIONS.c, TRIALS.c, ServerTrial.__table__.c
        rows = await self.session.execute(
            select(c.id, c.batch_size, c.time, c.energy, c.cost, c.reached, c.power_limit, k.kind)
            .outerjoin(TRIALS, (t.job == c.job) & (t.observation == c.id))
            .outerjoin(ServerTrial, (k.job == t.job) & (k.trial_number == t.trial_number))
            .where(c.job == job_id, c.id > int(after))
            .order_by(c.id)
        )
        out = []
        for r in rows:
            i, obs = stored_observation(tuple(r[:7]), f"the server's database, run {r[0]}")
            out.append((i, obs, r[7]))
        return out

    async def still_has(self, job_id: str, observation_id: int) -> bool:
        """Whether the job still has that run (False after the job was deleted and made anew)."""
        c = OBSERVATIONS.c
        found = await self.session.scalar(
            select(c.id).where(c.job == job_id, c.id == int(observation_id))
        )
        return found is not None

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

    async def add_trial(self, job_id: str, batch_size: int, kind: str, expires: float) -> int:
        """Hand out ``batch_size`` as the job's next trial, leased until ``expires`` (Unix s);
        returns its number (1, 2, ...)."""
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
        await self.session.execute(
            insert(ServerLease).values(job=job_id, trial_number=number, expires=float(expires))
        )
        return number

    async def renew(self, job_id: str, number: int, expires: float) -> None:
        """A trial that reported is running: its lease now ends at ``expires``."""
        lease = ServerLease.__table__.c
        await self.session.execute(
            update(ServerLease)
            .where(lease.job == job_id, lease.trial_number == int(number))
            .values(expires=float(expires))
        )

    async def expire(self, job_id: str, now: float) -> list[int]:
        """End as failed the job's dispatched trials whose lease ran out; their numbers."""
        lease = ServerLease.__table__.c
        numbers = list(
            await self.session.scalars(
                select(lease.trial_number).where(lease.job == job_id, lease.expires < now)
            )
        )
        for number in numbers:
            await self.end_trial(job_id, number, FAILED)
        return numbers

    async def lease_unleased(self, expires: float) -> int:
        """Give every dispatched trial without a lease (handed out by an older zeus-nb) one
        until ``expires``; how many. Start-up runs it, so no old trial stays out for ever."""
        t, lease = TRIALS.c, ServerLease.__table__.c
        rows = list(
            await self.session.execute(
                select(t.job, t.trial_number)
                .join(
                    ServerTrial,
                    (ServerTrial.job == t.job) & (ServerTrial.trial_number == t.trial_number),
                )
                .outerjoin(
                    ServerLease, (lease.job == t.job) & (lease.trial_number == t.trial_number)
                )
                .where(t.status == DISPATCHED, lease.expires.is_(None))
            )
        )
        for job, number in rows:
            await self.session.execute(
                insert(ServerLease).values(job=job, trial_number=number, expires=float(expires))
            )
        return len(rows)

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
        t, lease = TRIALS.c, ServerLease.__table__.c
        await self.session.execute(
            update(TRIALS)
            .where(t.job == job_id, t.trial_number == int(number), t.status == DISPATCHED)
            .values(status=status, observation=observation)
        )
        await self.session.execute(
            delete(ServerLease).where(lease.job == job_id, lease.trial_number == int(number))
        )

    async def delete(self, job_id: str) -> bool:
        """Forget a job the server registered, with all its runs; False if there is none."""
        if await self.record(job_id) is None:
            return False
        await self.session.execute(delete(ServerLease).where(ServerLease.job == job_id))
        await self.session.execute(delete(ServerTrial).where(ServerTrial.job == job_id))
        await self.session.execute(delete(ServerJob).where(ServerJob.job_id == job_id))
        for table in (TRIALS, OBSERVATIONS, POWER_LIMITS):
            await self.session.execute(delete(table).where(table.c.job == job_id))
        await self.session.execute(delete(JOBS).where(JOBS.c.name == job_id))
        return True
