"""One job's state in the server's database, read and written through a request's session.

A request loads its job in one statement (:meth:`Jobs.load`: its records, its row locked, the
trials still out with their leases, its last trial number); the reported runs are read
incrementally (:meth:`Jobs.observations_after`, for :mod:`.policy`'s cache), so a request
costs the same whatever the job's history. It writes back what changed. Rows read from the
database are checked as the stores check them (:mod:`zeus_nb.optimizer.batch_size.checks`): a
damaged row is named, never used. Nothing here commits; the router commits once per request.

The statements are built once, at import, with bound parameters: each round trip to the
database costs a request more than the work the database does (with SQLite, a hop to the
driver's thread and back), so a request makes as few as it can, and none is rebuilt.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass, field

from sqlalchemy import and_, bindparam, delete, exists, func, insert, select, update
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
    ``job`` and ``spec`` may be shared between requests (parsed once per stored text): read
    them, never change them.
    """

    job: CreatedJob
    spec: JobSpec
    key: tuple[str, str]
    open: list[TrialRow] = field(default_factory=list)
    #: When each open trial's lease runs out (Unix s), by trial number.
    leases: dict[int, float] = field(default_factory=dict)
    #: The highest trial number handed out (0 before any).
    last_trial: int = 0
    #: (run id, whether the job still has it) for the run :meth:`Jobs.load` was asked about.
    run_kept: tuple[int, bool] | None = None


# -- the statements, built once ------------------------------------------------------------

_J, _R, _T, _O = JOBS.c, ServerJob.__table__.c, TRIALS.c, OBSERVATIONS.c
_K, _L = ServerTrial.__table__.c, ServerLease.__table__.c
_SERVER_JOBS, _SERVER_TRIALS = ServerJob.__table__, ServerTrial.__table__
_LEASES = ServerLease.__table__

_RECORD = select(_R.record).where(_R.job_id == bindparam("job"))
_IN_STORE = select(_J.name).where(_J.name == bindparam("job"))

# The job's settings and record, its row locked until the request ends (PostgreSQL; SQLite
# transactions hold the file's write lock from their start), its last trial number, whether it
# still has run ``known``, and a row per lease of the job, with its trial if that is still out
# (dispatched) and the trial's kind (else NULLs). The joins start from the job's leases (a few
# rows, by the leases' key), never from its trials, so the statement costs the same whatever the
# job's history.
_LAST = TRIALS.alias("last_trial")
_LOAD = (
    select(
        _J.spec,
        _R.record,
        select(func.max(_LAST.c.trial_number))
        .where(_LAST.c.job == _J.name)
        .scalar_subquery()
        .label("last_trial"),
        exists().where(_O.job == _J.name, _O.id == bindparam("known")).label("run_kept"),
        _T.trial_number,
        _T.batch_size,
        _K.kind,
        _T.observation,
        _L.expires,
    )
    .select_from(
        JOBS.join(_SERVER_JOBS, _R.job_id == _J.name)
        .outerjoin(_LEASES, _L.job == _J.name)
        .outerjoin(
            TRIALS,
            and_(
                _T.job == _L.job,
                _T.trial_number == _L.trial_number,
                _T.status == DISPATCHED,
            ),
        )
        .outerjoin(_SERVER_TRIALS, and_(_K.job == _L.job, _K.trial_number == _L.trial_number))
    )
    .where(_J.name == bindparam("job"))
    .order_by(_L.trial_number)
    .with_for_update(of=JOBS)
)
_TRIAL = (
    select(_T.trial_number, _T.batch_size, _T.status, _K.kind, _T.observation)
    .join(_SERVER_TRIALS, and_(_K.job == _T.job, _K.trial_number == _T.trial_number))
    .where(_T.job == bindparam("job"), _T.trial_number == bindparam("number"))
)
_RUN_COLUMNS = (_O.id, _O.batch_size, _O.time, _O.energy, _O.cost, _O.reached, _O.power_limit)
_RUN = select(*_RUN_COLUMNS).where(_O.job == bindparam("job"), _O.id == bindparam("id"))
_RUNS_AFTER = (
    select(*_RUN_COLUMNS, _K.kind)
    .outerjoin(TRIALS, and_(_T.job == _O.job, _T.observation == _O.id))
    .outerjoin(_SERVER_TRIALS, and_(_K.job == _T.job, _K.trial_number == _T.trial_number))
    .where(_O.job == bindparam("job"), _O.id > bindparam("after"))
    .order_by(_O.id)
)
_HAS_RUN = select(_O.id).where(_O.job == bindparam("job"), _O.id == bindparam("id"))
_LAST_TRIAL = select(func.max(_T.trial_number)).where(_T.job == bindparam("job"))
# (the values of an INSERT and of an UPDATE's SET come with each execution, by column name)
_ADD_TRIAL, _ADD_KIND, _ADD_LEASE = insert(TRIALS), insert(_SERVER_TRIALS), insert(_LEASES)
_APPEND = insert(OBSERVATIONS)
_RENEW = update(_LEASES).where(
    _L.job == bindparam("b_job"), _L.trial_number == bindparam("b_number")
)
_END_TRIAL = update(TRIALS).where(
    _T.job == bindparam("b_job"),
    _T.trial_number == bindparam("b_number"),
    _T.status == DISPATCHED,
)
_END_LEASE = delete(_LEASES).where(
    _L.job == bindparam("job"), _L.trial_number == bindparam("number")
)

#: Parsed records by their stored texts: a job's settings are parsed once, not per request.
_PARSED: OrderedDict[tuple[str, str, str], tuple[CreatedJob, JobSpec]] = OrderedDict()
_PARSED_SIZE = 1024


def _record(job_id: str, text: str) -> CreatedJob:
    try:
        return CreatedJob.parse_obj(json.loads(text))
    except (TypeError, ValueError) as e:
        raise StoreError(
            f"the server's record of job {job_id!r} is damaged ({e}); delete the job "
            "(DELETE /jobs) to start it over"
        ) from None


def _parsed(job_id: str, spec_text: str, record_text: str) -> tuple[CreatedJob, JobSpec]:
    """The job's record and settings from their stored texts, each checked (and parsed once
    per text: a damaged one fails every request that reads it)."""
    key = (job_id, spec_text, record_text)
    found = _PARSED.get(key)
    if found is None:
        job = _record(job_id, record_text)
        spec = spec_from_json(spec_text, f"the server's database, job {job_id!r}")
        found = _PARSED[key] = (job, spec)
        while len(_PARSED) > _PARSED_SIZE:
            _PARSED.popitem(last=False)
    return found


class Jobs:
    """The jobs of the server's database, through one request's session."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    # -- reading ----------------------------------------------------------------------------

    async def record(self, job_id: str) -> CreatedJob | None:
        """Zeus's record of a job registered through the server; None if there is none."""
        text = await self.session.scalar(_RECORD, {"job": job_id})
        return None if text is None else _record(job_id, text)

    async def in_store(self, job_id: str) -> bool:
        """Whether the store has a job of that name (registered here or by a client directly)."""
        return await self.session.scalar(_IN_STORE, {"job": job_id}) is not None

    async def load(self, job_id: str, known_run: int = 0) -> JobState | None:
        """The job's records and open trials, its row locked until the request ends; None if
        the server never registered it. ``known_run``: a run id to check the job still has
        (:attr:`JobState.run_kept`; the policy cache's last run)."""
        rows = (await self.session.execute(_LOAD, {"job": job_id, "known": known_run})).all()
        if not rows:
            return None
        spec_text, record_text, last, kept = rows[0][:4]
        job, spec = _parsed(job_id, spec_text, record_text)
        state = JobState(job, spec, (spec_text, record_text), last_trial=int(last or 0))
        if known_run:
            state.run_kept = (known_run, bool(kept))
        for *_, number, batch_size, kind, observation, expires in rows:
            if number is not None and kind is not None:  # a lease of a trial still out
                state.open.append(
                    TrialRow(int(number), int(batch_size), DISPATCHED, kind, observation)
                )
                state.leases[int(number)] = float(expires)
        return state

    async def trial(self, job_id: str, number: int) -> TrialRow | None:
        """One trial of the job, or None."""
        params = {"job": job_id, "number": int(number)}
        row = (await self.session.execute(_TRIAL, params)).first()
        return None if row is None else TrialRow(int(row[0]), int(row[1]), row[2], row[3], row[4])

    async def observation(self, job_id: str, observation_id: int) -> Observation | None:
        """One reported run of the job, or None."""
        params = {"job": job_id, "id": int(observation_id)}
        row = (await self.session.execute(_RUN, params)).first()
        if row is None:
            return None
        return stored_observation(tuple(row), f"the server's database, run {row[0]}")[1]

    async def observations_after(
        self, job_id: str, after: int
    ) -> list[tuple[int, Observation, str | None]]:
        """The job's runs with ids above ``after``, in order, each with the kind of the trial
        it reported (None for a run a client wrote into the store directly)."""
        rows = await self.session.execute(_RUNS_AFTER, {"job": job_id, "after": int(after)})
        out = []
        for r in rows:
            i, obs = stored_observation(tuple(r[:7]), f"the server's database, run {r[0]}")
            out.append((i, obs, r[7]))
        return out

    async def still_has(self, job_id: str, observation_id: int) -> bool:
        """Whether the job still has that run (False after the job was deleted and made anew)."""
        params = {"job": job_id, "id": int(observation_id)}
        return await self.session.scalar(_HAS_RUN, params) is not None

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
        await self.session.execute(
            insert(_SERVER_JOBS).values(job_id=job.job_id, record=job.json())
        )

    async def add_trial(
        self, job_id: str, batch_size: int, kind: str, expires: float, number: int | None = None
    ) -> int:
        """Hand out ``batch_size`` as the job's next trial, leased until ``expires`` (Unix s);
        returns its number (1, 2, ...). ``number``: the job's last trial number + 1, if the
        caller knows it (:attr:`JobState.last_trial`, read with the job's row locked)."""
        if kind not in TRIAL_KINDS:
            raise ValueError(f"a trial is one of {TRIAL_KINDS}, not {kind!r}")
        if number is None:
            last = await self.session.scalar(_LAST_TRIAL, {"job": job_id})
            number = int(last or 0) + 1
        key = {"job": job_id, "trial_number": int(number)}
        trial = dict(key, batch_size=int(batch_size), status=DISPATCHED)
        await self.session.execute(_ADD_TRIAL, trial)
        await self.session.execute(_ADD_KIND, dict(key, kind=kind))
        await self.session.execute(_ADD_LEASE, dict(key, expires=float(expires)))
        return int(number)

    async def renew(self, job_id: str, number: int, expires: float) -> None:
        """A trial that reported is running: its lease now ends at ``expires``."""
        params = {"b_job": job_id, "b_number": int(number), "expires": float(expires)}
        await self.session.execute(_RENEW, params)

    async def expire(self, state: JobState, now: float) -> list[int]:
        """End as failed the job's open trials whose lease ran out (``state`` no longer lists
        them); their numbers."""
        lost = [t.number for t in state.open if state.leases[t.number] < now]
        for number in lost:
            await self.end_trial(state.job.job_id, number, FAILED)
            del state.leases[number]
        state.open = [t for t in state.open if t.number in state.leases]
        return lost

    async def lease_unleased(self, expires: float) -> int:
        """Give every dispatched trial without a lease (handed out by an older zeus-nb) one
        until ``expires``; how many. Start-up runs it, so no old trial stays out for ever."""
        rows = list(
            await self.session.execute(
                select(_T.job, _T.trial_number)
                .join(_SERVER_TRIALS, and_(_K.job == _T.job, _K.trial_number == _T.trial_number))
                .outerjoin(_LEASES, and_(_L.job == _T.job, _L.trial_number == _T.trial_number))
                .where(_T.status == DISPATCHED, _L.expires.is_(None))
            )
        )
        for job, number in rows:
            params = {"job": job, "trial_number": number, "expires": float(expires)}
            await self.session.execute(_ADD_LEASE, params)
        return len(rows)

    async def append(self, job_id: str, obs: Observation) -> int:
        """Add a reported run to the job's log; returns its id."""
        result = await self.session.execute(
            _APPEND,
            {
                "job": job_id,
                "batch_size": int(obs.batch_size),
                "time": float(obs.time),
                "energy": float(obs.energy),
                "cost": float(obs.cost),
                "reached": bool(obs.reached),
                "power_limit": None if obs.power_limit is None else float(obs.power_limit),
            },
        )
        return int(result.inserted_primary_key[0])

    async def end_trial(
        self, job_id: str, number: int, status: str, observation: int | None = None
    ) -> None:
        """A dispatched trial ends as succeeded (with its run) or failed."""
        check_status(status)
        ended = {"status": status, "observation": observation}
        await self.session.execute(_END_TRIAL, dict(ended, b_job=job_id, b_number=int(number)))
        await self.session.execute(_END_LEASE, {"job": job_id, "number": int(number)})

    async def delete(self, job_id: str) -> bool:
        """Forget a job the server registered, with all its runs; False if there is none."""
        if await self.record(job_id) is None:
            return False
        for table in (_LEASES, _SERVER_TRIALS):
            await self.session.execute(delete(table).where(table.c.job == job_id))
        await self.session.execute(delete(_SERVER_JOBS).where(_R.job_id == job_id))
        for table in (TRIALS, OBSERVATIONS, POWER_LIMITS):
            await self.session.execute(delete(table).where(table.c.job == job_id))
        await self.session.execute(delete(JOBS).where(_J.name == job_id))
        return True
