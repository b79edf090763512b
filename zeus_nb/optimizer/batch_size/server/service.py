"""What each route of the server does, over one request's database session.

:class:`BatchSizeService` registers, answers and forgets jobs. Its errors are the server's
(:mod:`.exceptions`, each with Zeus's HTTP status) or :class:`~zeus_nb.errors.InputError` for
values out of range (422). Verdicts after an epoch are the in-training client's
(:func:`zeus_nb.optimizer.batch_size.client.judge`), so a run is judged the same way whether
its client talks to this server or to a store directly.
"""

from __future__ import annotations

import logging
import math
import secrets
import time

from sqlalchemy.ext.asyncio import AsyncSession

from zeus_nb.optimizer.batch_size.checks import checked_observation, validated_spec
from zeus_nb.optimizer.batch_size.client import judge
from zeus_nb.optimizer.batch_size.common import (
    CreatedJob,
    JobSpecFromClient,
    ReportResponse,
    TrainingResult,
    TrialId,
)
from zeus_nb.optimizer.batch_size.server.config import settings
from zeus_nb.optimizer.batch_size.server.exceptions import (
    ZeusBSOJobConfigMismatchError,
    ZeusBSOServerNotFoundError,
    ZeusBSOServiceBadOperationError,
    ZeusBSOValueError,
)
from zeus_nb.optimizer.batch_size.server.jobs import Jobs, JobState, TrialRow
from zeus_nb.optimizer.batch_size.server.policy import POLICIES, new_policy, next_trial
from zeus_nb.optimizer.batch_size.store import JobSpec, Observation
from zeus_nb.optimizer.batch_size.trials import DISPATCHED, FAILED, SUCCEEDED

__all__ = ["BatchSizeService", "store_spec"]

log = logging.getLogger(__name__)

ID_ATTEMPTS = 100  # fresh job ids tried before giving up (8 hex digits each)
clock = time.time  # Unix seconds of leases (tests replace it)


def store_spec(job: CreatedJob) -> JobSpec:
    """The store's settings of a job registered through the server (the paper policy's).

    ``mab_seed`` None draws the job a random seed, as Zeus's server seeds it by the clock;
    the seed is stored, so the job's later decisions follow from its runs.
    """
    seed = job.mab_seed if job.mab_seed is not None else secrets.randbelow(2**32)
    spec = JobSpec(
        name=job.job_id,
        batch_sizes=tuple(job.batch_sizes),
        default_batch_size=int(job.default_batch_size),
        eta=float(job.eta_knob),
        beta=math.inf if job.beta_knob is None else float(job.beta_knob),
        max_power=float(job.max_power),
        seed=int(seed),
        pruning_rounds=int(job.num_pruning_rounds),
        window=int(job.window_size),
        exploration=1.0,
    )
    return validated_spec(spec, f"job {job.job_id!r}")


def _differences(known: CreatedJob, asked: CreatedJob) -> str:
    a, b = known.dict(), asked.dict()
    return "; ".join(f"{k}: registered {a[k]!r}, asked {b[k]!r}" for k in a if a[k] != b[k])


class BatchSizeService:
    """The server's operations on the jobs of one session's database."""

    def __init__(self, session: AsyncSession, lease: float | None = None) -> None:
        self.jobs = Jobs(session)
        #: Seconds a dispatched trial counts as running without a report (``ZEUS_BSO_TRIAL_LEASE``).
        self.lease = settings.trial_lease if lease is None else float(lease)

    async def register_job(self, job: JobSpecFromClient) -> tuple[CreatedJob, bool]:
        """Register ``job``; returns it with its id, and whether it is new.

        A known id must come with the same settings (else 409); ``job_id`` None registers a
        new job ``<job_id_prefix>-<8 hex digits>``.
        """
        job_id = job.job_id if job.job_id is not None else await self._fresh_id(job)
        created = CreatedJob.parse_obj({**job.dict(), "job_id": job_id})
        known = await self.jobs.record(job_id)
        if known is not None:
            if known != created:
                raise ZeusBSOJobConfigMismatchError(
                    f"job {job_id!r} is registered with other settings "
                    f"({_differences(known, created)}); use a new job_id for new settings, or "
                    "delete the job (DELETE /jobs) to start it over"
                )
            log.info("job %s is registered already, with the same settings", job_id)
            return created, False
        if await self.jobs.in_store(job_id):
            raise ZeusBSOJobConfigMismatchError(
                f"the database has a job {job_id!r} that a client wrote directly, not through "
                "this server; use another job_id"
            )
        spec = store_spec(created)
        new_policy(spec, created)  # settings the policy refuses are never stored
        await self.jobs.create(created, spec)
        log.info("registered job %s: batch sizes %s", job_id, created.batch_sizes)
        return created, True

    async def _fresh_id(self, job: JobSpecFromClient) -> str:
        for _ in range(ID_ATTEMPTS):
            job_id = f"{job.job_id_prefix}-{secrets.token_hex(4)}"
            if not await self.jobs.in_store(job_id):
                return job_id
        raise ZeusBSOValueError(
            f"no free job id with the prefix {job.job_id_prefix!r} after {ID_ATTEMPTS} tries"
        )

    async def _state(self, job_id: str, error: type) -> JobState:
        """The job, after its trials whose lease ran out were ended as lost (failed)."""
        state = await self.jobs.load(job_id, POLICIES.last_run(self.jobs, job_id))
        if state is None:
            raise error(
                f"unknown job {job_id!r}; register it first (POST /jobs, which the client's "
                "constructor does)"
            )
        lost = await self.jobs.expire(state, clock())
        if lost:
            log.warning(
                "job %s: trial(s) %s sent no report for %g s (the lease): counted as lost",
                job_id,
                lost,
                self.lease,
            )
        return state

    async def predict(self, job_id: str) -> TrialId:
        """Hand out the job's next trial: the batch size to train with and its number."""
        state = await self._state(job_id, ZeusBSOValueError)
        policy, cheapest = await POLICIES.policy(self.jobs, state)
        bs, kind = next_trial(state, policy, cheapest)
        expires = clock() + self.lease
        number = await self.jobs.add_trial(job_id, bs, kind, expires, state.last_trial + 1)
        log.info("job %s: trial %d trains at batch size %d (%s)", job_id, number, bs, kind)
        return TrialId(job_id=job_id, batch_size=int(bs), trial_number=number)

    async def _trial(self, state: JobState, trial: TrialId, error: type) -> TrialRow:
        """The trial, from the open ones the request loaded, else from the database."""
        row = next((t for t in state.open if t.number == trial.trial_number), None)
        if row is None:
            row = await self.jobs.trial(trial.job_id, trial.trial_number)
        if row is None or row.batch_size != trial.batch_size:
            raise error(
                f"job {trial.job_id!r} has no trial {trial.trial_number} at batch size "
                f"{trial.batch_size}; report the trial number and batch size GET "
                "/jobs/batch_size handed out"
            )
        return row

    async def report(self, result: TrainingResult) -> ReportResponse:
        """Judge a run after an epoch; a run that stops is recorded (once)."""
        state = await self._state(result.job_id, ZeusBSOServiceBadOperationError)
        trial = await self._trial(state, result, ZeusBSOServiceBadOperationError)
        if trial.status != DISPATCHED:
            obs = None
            if trial.observation is not None:
                obs = await self.jobs.observation(result.job_id, trial.observation)
            if obs is None:
                raise ZeusBSOValueError(
                    f"trial {trial.number} of job {result.job_id!r} ended without a result "
                    f"(its run exited early, or sent no report for {self.lease:g} s, the "
                    "trial lease); ask for a new batch size"
                )
            return ReportResponse(
                stop_train=True,
                converged=obs.reached,
                message=f"The result of trial {trial.number} is already reported.",
            )
        policy, _ = await POLICIES.policy(self.jobs, state)
        response = judge(policy, state.job, result)
        if not response.stop_train:
            await self.jobs.renew(result.job_id, trial.number, clock() + self.lease)
        if response.stop_train:
            where = f"the report of trial {trial.number} of job {result.job_id!r}"
            obs = checked_observation(
                {
                    "batch_size": result.batch_size,
                    "time": result.time,
                    "energy": result.energy,
                    "reached": response.converged,
                },
                where,
            )
            cost = policy.cost(obs.time, obs.energy)
            run = Observation(obs.batch_size, obs.time, obs.energy, cost, obs.reached)
            observation_id = await self.jobs.append(result.job_id, run)
            await self.jobs.end_trial(result.job_id, trial.number, SUCCEEDED, observation_id)
            log.info(
                "job %s: trial %d at batch size %d %s (cost %.6g J): %s",
                result.job_id,
                trial.number,
                result.batch_size,
                "reached the target" if response.converged else "did not reach the target",
                cost,
                response.message,
            )
        return response

    async def end_trial(self, trial: TrialId) -> None:
        """A trial that is still out ends as failed (its run exited without a verdict)."""
        state = await self._state(trial.job_id, ZeusBSOServerNotFoundError)
        row = await self._trial(state, trial, ZeusBSOServerNotFoundError)
        if row.status == DISPATCHED:
            await self.jobs.end_trial(trial.job_id, row.number, FAILED)
            log.info("job %s: trial %d ended without a result", trial.job_id, row.number)

    async def delete_job(self, job_id: str) -> None:
        """Forget a job and all its runs."""
        POLICIES.forget(job_id)
        if not await self.jobs.delete(job_id):
            raise ZeusBSOServerNotFoundError(f"no job {job_id!r} to delete")
        log.info("deleted job %s", job_id)
