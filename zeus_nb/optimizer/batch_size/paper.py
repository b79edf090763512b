"""The Zeus paper's Thompson step, kept as a baseline for simulations and benchmarks."""

from __future__ import annotations

import math
from dataclasses import replace

from zeus_nb.optimizer.batch_size.optimizer import BatchSizeOptimizer
from zeus_nb.optimizer.batch_size.store import JobSpec, Observation

__all__ = ["PaperBatchSizeOptimizer"]


class PaperBatchSizeOptimizer(BatchSizeOptimizer):
    """The same pruning, with the Thompson step as the Zeus paper runs it: a baseline.

    Full-width draws (``exploration`` 1), each arm's own maximum-likelihood cost variance with
    no prior (two runs of equal cost freeze that arm's draw at its mean), and a failed run is
    learned at its own cost. A run that never started (reported with no time and no energy,
    as whole-epoch simulation does when one epoch would pass the threshold) is learned at
    100 x beta x the best cost, as the original Zeus simulator reports it. For simulations and
    benchmarks that compare with the published policy; new jobs should use
    :class:`BatchSizeOptimizer`.
    """

    def __init__(self, job: JobSpec | str, store=None, **kwargs) -> None:
        if isinstance(job, JobSpec):
            job = replace(job, exploration=1.0)
        else:
            kwargs["exploration"] = 1.0
        super().__init__(job, store, **kwargs)

    def _learned_cost(self, obs: Observation) -> float:
        if obs.reached or obs.cost > 0 or not math.isfinite(self.job.beta * self._best_cost):
            return obs.cost
        return 100 * self.job.beta * self._best_cost

    def _arm_posterior(self, bs: int, pooled_cv: float) -> tuple[float, float]:
        n, mean, sd = self._arm_stats(bs)
        if n == 0:
            return math.nan, math.inf
        return mean, sd / math.sqrt(n)
