"""What the server decides for a job: zeus-nb's paper policy over the job's reported runs.

Zeus's server runs the published policy (pruning, then Gaussian Thompson sampling with each
arm's own variance, Zeus's prior and static explorations), which is
:class:`~zeus_nb.optimizer.batch_size.PaperBatchSizeOptimizer`. Its decisions are a pure
function of the job's runs, so nothing of the bandit is stored besides the runs themselves;
:class:`PolicyCache` keeps each job's policy in memory and teaches it only the runs added since
the last request.

Two rules of Zeus's server sit on top (:func:`next_trial`):

* only runs handed out as **explorations** advance pruning (:class:`ServerPolicy`); every
  reported run teaches the bandit;
* while pruning's exploration of a batch size is still out, a new run gets the cheapest batch
  size so far (the default before any run reached the target) as a **concurrent** trial,
  instead of exploring the same batch size twice.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass

from zeus_nb.optimizer.batch_size.common import CreatedJob
from zeus_nb.optimizer.batch_size.paper import PaperBatchSizeOptimizer
from zeus_nb.optimizer.batch_size.server.database.schema import CONCURRENT, EXPLORATION, MAB
from zeus_nb.optimizer.batch_size.server.jobs import Jobs, JobState
from zeus_nb.optimizer.batch_size.store import JobSpec, MemoryStore
from zeus_nb.optimizer.batch_size.trials import DISPATCHED

__all__ = ["POLICIES", "PolicyCache", "ServerPolicy", "new_policy", "next_trial"]

log = logging.getLogger(__name__)


class ServerPolicy(PaperBatchSizeOptimizer):
    """The paper policy in which only the observations in ``explorations`` advance pruning."""

    def __init__(self, spec: JobSpec, store: MemoryStore, explorations: set[int], **kwargs):
        self._explorations = explorations  # read while the constructor syncs the log
        self.announced = False  # whether the end of pruning (the arms sampled) was logged
        super().__init__(spec, store, **kwargs)

    def _prunes(self, observation_id: int) -> bool:
        return observation_id in self._explorations


def new_policy(spec: JobSpec, job: CreatedJob) -> ServerPolicy:
    """A job's policy before any run (registration builds one, so settings it would refuse
    are refused there and never stored)."""
    store = MemoryStore()
    store.register(spec)
    return ServerPolicy(
        spec,
        store,
        set(),
        prior_mean=job.mab_prior_mean,
        prior_precision=job.mab_prior_precision,
        num_explorations=job.mab_num_explorations,
    )


@dataclass
class _Cached:
    """A job's policy and how far into the job's runs it has learned."""

    key: tuple[str, str]
    policy: ServerPolicy
    last_id: int = 0  # the database id of the last run learned
    best: tuple[float, int] | None = None  # (cost, batch size) of the cheapest success


class PolicyCache:
    """Each job's policy, kept between requests and taught only the runs added since.

    Rebuilding a policy from all of a job's runs at every request made a request at 1000 runs
    cost 3x one at 10. A cached policy is used while its job has the same settings (``key``)
    and still holds the last run it learned (a job deleted and registered anew does not); then
    only runs with higher ids are read. The policy's decisions are a pure function of the runs
    in order, so a cached one decides as a rebuilt one (tests/test_bso_server.py checks it).
    At most ``size`` jobs are kept (least recently used dropped).
    """

    def __init__(self, size: int = 1024) -> None:
        self.size = size
        self._jobs: OrderedDict[tuple[str, str], _Cached] = OrderedDict()

    def forget(self, job_id: str) -> None:
        for key in [k for k in self._jobs if k[1] == job_id]:
            del self._jobs[key]

    def clear(self) -> None:
        self._jobs.clear()

    @staticmethod
    def _key(jobs: Jobs, job_id: str) -> tuple[str, str]:
        return (str(jobs.session.bind.url), job_id)  # one process may serve several databases

    def last_run(self, jobs: Jobs, job_id: str) -> int:
        """The id of the last run the job's cached policy learned (0: none); the request loads
        whether the job still has it with the job (:meth:`Jobs.load`)."""
        entry = self._jobs.get(self._key(jobs, job_id))
        return 0 if entry is None else entry.last_id

    async def _kept(self, jobs: Jobs, state: JobState, run: int) -> bool:
        if state.run_kept is not None and state.run_kept[0] == run:
            return state.run_kept[1]
        return await jobs.still_has(state.job.job_id, run)

    async def policy(self, jobs: Jobs, state: JobState) -> tuple[ServerPolicy, int]:
        """The job's policy, having learned every reported run; and the batch size of the
        cheapest run that reached the target (the default before any)."""
        name = state.job.job_id
        key = self._key(jobs, name)
        entry = self._jobs.pop(key, None)
        if entry is not None and (
            entry.key != state.key
            or (entry.last_id and not await self._kept(jobs, state, entry.last_id))
        ):
            entry = None
        if entry is None:
            entry = _Cached(state.key, new_policy(state.spec, state.job))
        for observation_id, obs, kind in await jobs.observations_after(name, entry.last_id):
            local_id = entry.policy.store.append(name, obs)
            if kind == EXPLORATION:
                entry.policy._explorations.add(local_id)
            entry.last_id = observation_id
            if obs.reached and (entry.best is None or obs.cost < entry.best[0]):
                entry.best = (obs.cost, int(obs.batch_size))
        self._jobs[key] = entry
        while len(self._jobs) > self.size:
            self._jobs.popitem(last=False)
        cheapest = state.job.default_batch_size if entry.best is None else entry.best[1]
        return entry.policy, int(cheapest)


POLICIES = PolicyCache()


def next_trial(state: JobState, policy: ServerPolicy, cheapest: int) -> tuple[int, str]:
    """(batch size, kind) of the job's next trial; ``cheapest`` is what a concurrent run gets."""
    if policy.phase == "pruning":
        bs = policy.next_batch_size()
        out = any(
            t.kind == EXPLORATION and t.status == DISPATCHED and t.batch_size == bs
            for t in state.open
        )
        if out:
            return cheapest, CONCURRENT
        return bs, EXPLORATION
    if not policy.announced:  # once per policy built (a server that restarts says it again)
        policy.announced = True
        log.info(
            "job %s: pruning is over; Thompson sampling with arms %s",
            state.job.job_id,
            [int(b) for b in policy.survivors],
        )
    bs = policy.next_batch_size()
    if log.isEnabledFor(logging.DEBUG):
        for row in policy.posterior().itertuples():
            if row.survivor:
                log.debug(
                    "job %s: batch size %d, %d runs, mean cost %.6g J (posterior std %.3g)",
                    state.job.job_id,
                    row.batch_size,
                    row.observations,
                    row.mean_cost,
                    row.std,
                )
    return bs, MAB
