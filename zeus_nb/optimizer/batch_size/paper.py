"""The Zeus paper's Thompson step, kept as a baseline and as the policy Zeus's server runs."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from zeus_nb.errors import InputError
from zeus_nb.optimizer.batch_size.optimizer import LocalBatchSizeOptimizer
from zeus_nb.optimizer.batch_size.store import JobSpec, Observation

__all__ = ["PaperBatchSizeOptimizer"]


class PaperBatchSizeOptimizer(LocalBatchSizeOptimizer):
    """The same pruning, with the Thompson step as the Zeus paper runs it: a baseline.

    Full-width draws (``exploration`` 1), each arm's own maximum-likelihood cost variance with
    no prior (two runs of equal cost freeze that arm's draw at its mean), and a failed run is
    learned at its own cost. A run that never started (reported with no time and no energy,
    as whole-epoch simulation does when one epoch would pass the threshold) is learned at
    100 x beta x the best cost, as the original Zeus simulator reports it. For simulations and
    benchmarks that compare with the published policy; new jobs should use
    :class:`BatchSizeOptimizer`.

    Zeus's Gaussian Thompson sampling knobs: ``prior_mean`` and ``prior_precision`` put a
    Gaussian prior N(prior_mean, 1 / prior_precision) on each arm's mean *reward* (-cost);
    precision 0, the default, is the paper's flat prior. ``num_explorations`` > 0 runs every
    surviving batch size until it has that many observations before sampling, picking among the
    under-explored ones at random (seeded like the draws).
    """

    def __init__(
        self,
        job: JobSpec | str,
        store=None,
        *,
        prior_mean: float = 0.0,
        prior_precision: float = 0.0,
        num_explorations: int = 0,
        **kwargs,
    ) -> None:
        if not prior_precision >= 0:
            raise InputError(f"prior_precision must be >= 0 (0: flat prior), got {prior_precision}")
        if num_explorations < 0:
            raise InputError(f"num_explorations must be >= 0, got {num_explorations}")
        self.prior_mean = float(prior_mean)
        self.prior_precision = float(prior_precision)
        self.num_explorations = int(num_explorations)
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
        """(mean, std) of the arm's mean cost: the conjugate normal update of Zeus's bandit,
        with the arm's reward precision estimated from its own runs."""
        n, mean, sd = self._arm_stats(bs)
        if self.prior_precision == 0:
            return (math.nan, math.inf) if n == 0 else (mean, sd / math.sqrt(n))
        if n == 0:
            return -self.prior_mean, math.sqrt(1.0 / self.prior_precision)
        if sd == 0:  # infinite reward precision: the belief is the observed mean
            return mean, 0.0
        tau = 1.0 / (sd * sd)
        precision = self.prior_precision + n * tau
        posterior = (self.prior_precision * -self.prior_mean + tau * n * mean) / precision
        return posterior, math.sqrt(1.0 / precision)

    def next_batch_size(self) -> int:
        """As :meth:`LocalBatchSizeOptimizer.next_batch_size`, after the static explorations."""
        if self.num_explorations and self.phase == "thompson":
            cold = [b for b in self.survivors if self._arm_stats(b)[0] < self.num_explorations]
            if cold:
                rng = np.random.default_rng([self.job.seed, len(self._log), 1])
                return int(cold[int(rng.integers(len(cold)))])
        return super().next_batch_size()
