"""What the server decides for a job: zeus-nb's paper policy over the job's reported runs.

Zeus's server runs the published policy (pruning, then Gaussian Thompson sampling with each
arm's own variance, Zeus's prior and static explorations), which is
:class:`~zeus_nb.optimizer.batch_size.PaperBatchSizeOptimizer`. Each request rebuilds it from
the job's log in memory (:func:`policy_for`): its decisions are a pure function of the log, so
nothing of the bandit is stored besides the runs themselves.

Two rules of Zeus's server sit on top (:func:`next_trial`):

* only runs handed out as **explorations** advance pruning (:class:`ServerPolicy`); every
  reported run teaches the bandit;
* while pruning's exploration of a batch size is still out, a new run gets the cheapest batch
  size so far (the default before any run reached the target) as a **concurrent** trial,
  instead of exploring the same batch size twice.
"""

from __future__ import annotations

import logging
import math

from zeus_nb.optimizer.batch_size.paper import PaperBatchSizeOptimizer
from zeus_nb.optimizer.batch_size.server.database.schema import CONCURRENT, EXPLORATION, MAB
from zeus_nb.optimizer.batch_size.server.jobs import JobState
from zeus_nb.optimizer.batch_size.store import JobSpec, MemoryStore
from zeus_nb.optimizer.batch_size.trials import DISPATCHED

__all__ = ["ServerPolicy", "cheapest_batch_size", "next_trial", "policy_for"]

log = logging.getLogger(__name__)


class ServerPolicy(PaperBatchSizeOptimizer):
    """The paper policy in which only the observations in ``explorations`` advance pruning."""

    def __init__(self, spec: JobSpec, store: MemoryStore, explorations: set[int], **kwargs):
        self._explorations = explorations  # read while the constructor syncs the log
        super().__init__(spec, store, **kwargs)

    def _prunes(self, observation_id: int) -> bool:
        return observation_id in self._explorations


def policy_for(state: JobState) -> ServerPolicy:
    """The job's policy, having learned every reported run of ``state``."""
    store = MemoryStore()
    store.register(state.spec)
    kinds = {t.observation: t.kind for t in state.trials if t.observation is not None}
    explorations = set()
    for observation_id, obs in state.log:
        local_id = store.append(state.spec.name, obs)
        if kinds.get(observation_id) == EXPLORATION:
            explorations.add(local_id)
    job = state.job
    return ServerPolicy(
        state.spec,
        store,
        explorations,
        prior_mean=job.mab_prior_mean,
        prior_precision=job.mab_prior_precision,
        num_explorations=job.mab_num_explorations,
    )


def cheapest_batch_size(state: JobState) -> int:
    """The batch size of the cheapest run that reached the target; the default before any."""
    best, best_cost = state.job.default_batch_size, math.inf
    for _, obs in state.log:
        if obs.reached and obs.cost < best_cost:
            best, best_cost = obs.batch_size, obs.cost
    return int(best)


def next_trial(state: JobState, policy: ServerPolicy) -> tuple[int, str]:
    """(batch size, kind) of the job's next trial."""
    if policy.phase == "pruning":
        bs = policy.next_batch_size()
        out = any(
            t.kind == EXPLORATION and t.status == DISPATCHED and t.batch_size == bs
            for t in state.trials
        )
        if out:
            return cheapest_batch_size(state), CONCURRENT
        return bs, EXPLORATION
    if not any(t.kind == MAB for t in state.trials):
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
