"""The policies of the Zeus paper behind Zeus's legacy simulator API.

:class:`PruningGTSBatchSizeOptimizer` and :class:`JITPowerLimitOptimizer` are the published
policies (NSDI '23): pruning exploration, then Gaussian Thompson sampling over the surviving
batch sizes, with the least-cost power limit found just in time for each batch size. The batch-size
policy is zeus-nb's :class:`~zeus_nb.optimizer.batch_size.PaperBatchSizeOptimizer` (one per job,
in memory) seen through Zeus's ``register_job`` / ``predict`` / ``observe``;
:class:`PruningExploreManager` is zeus-nb's :class:`~zeus_nb.optimizer.batch_size.PruningExplorer`
seen through Zeus's ``next_batch_size`` / ``report_batch_size_result``.
:class:`GTSBatchSizeOptimizer` (Thompson sampling with no pruning) has no zeus-nb counterpart and
runs on :class:`~zeus_nb._legacy.policy.mab.GaussianTS`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from functools import partial

import numpy as np

from zeus_nb._legacy.job import Job
from zeus_nb._legacy.policy.interface import BatchSizeOptimizer, PowerLimitOptimizer
from zeus_nb._legacy.policy.mab import GaussianTS
from zeus_nb.errors import CallbackOrderError, InputError
from zeus_nb.optimizer.batch_size import (
    MemoryStore,
    Observation,
    PaperBatchSizeOptimizer,
    PruningExplorer,
)
from zeus_nb.optimizer.batch_size.store import JobSpec

__all__ = [
    "GTSBatchSizeOptimizer",
    "JITPowerLimitOptimizer",
    "PruningExploreManager",
    "PruningGTSBatchSizeOptimizer",
]


def _precision(rewards: np.ndarray) -> float:
    """1 / (maximum-likelihood variance); infinite when every reward is the same."""
    var = float(np.var(rewards))
    return math.inf if var == 0.0 else 1.0 / var


class GTSBatchSizeOptimizer(BatchSizeOptimizer):
    """One :class:`GaussianTS` bandit per job over all its batch sizes, no pruning.

    ``learn_reward_precision``: estimate each arm's reward precision from its own rewards
    (infinite while they are all equal) instead of the fixed ``reward_precision``. The other
    arguments are :class:`GaussianTS`'s.
    """

    def __init__(
        self,
        learn_reward_precision: bool,
        reward_precision: float = 0.0,
        prior_mean: float = 0.0,
        prior_precision: float = 0.0,
        num_exploration: int = 1,
        seed: int = 123456,
        verbose: bool = True,
    ) -> None:
        self.learn_reward_precision = learn_reward_precision
        self.reward_precision = reward_precision
        self.prior_mean = prior_mean
        self.prior_precision = prior_precision
        self.num_exploration = num_exploration
        self.seed = seed
        self.verbose = verbose
        self.mabs: dict[Job, GaussianTS] = {}
        self.batch_sizes: dict[Job, list[int]] = {}
        self.history: dict[Job, defaultdict[int, list[float]]] = {}  # rewards per batch size

    @property
    def name(self) -> str:
        return "GaussianTS BSO"

    def register_job(self, job: Job, batch_sizes: list[int]) -> None:
        """Start a bandit for ``job``; a job registered before keeps its state."""
        if job in self.mabs:
            return
        self.mabs[job] = GaussianTS(
            arms=batch_sizes,
            reward_precision=self.reward_precision,
            prior_mean=self.prior_mean,
            prior_precision=self.prior_precision,
            num_exploration=self.num_exploration,
            seed=self.seed,
            verbose=self.verbose,
        )
        self.batch_sizes[job] = batch_sizes
        self.history[job] = defaultdict(list)
        if self.verbose:
            self._log(f"Registered {job}")

    def predict(self, job: Job) -> int:
        batch_size = self.mabs[_registered(self.mabs, job)].predict()
        if self.verbose:
            self._log(f"{job} -> BS = {batch_size}")
        return batch_size

    def observe(
        self, job: Job, batch_size: int, cost: float, converged: bool | None = None
    ) -> None:
        """Learn the reward -``cost``; ``converged`` is not used."""
        if batch_size not in self.batch_sizes[_registered(self.mabs, job)]:
            raise InputError(
                f"batch size {batch_size} is not one of {job}'s {self.batch_sizes[job]}"
            )
        rewards = self.history[job][batch_size]
        rewards.append(-cost)
        mab = self.mabs[job]
        if not self.learn_reward_precision:
            mab.fit([batch_size], [-cost], reset=False)
        else:
            mab.arm_reward_prec[batch_size] = _precision(np.array(rewards))
            mab.fit_arm(batch_size, np.array(rewards), reset=True)
        if self.verbose:
            self._log(f"{job} @ {batch_size}: reward = {-cost:.2f}")


class PruningExploreManager:
    """The pruning phase, one batch size at a time (zeus-nb's :class:`PruningExplorer`).

    Call :meth:`next_batch_size`, run it, then :meth:`report_batch_size_result`. When pruning is
    over, :meth:`next_batch_size` raises ``StopIteration`` whose ``value`` is the sorted list of
    surviving batch sizes.
    """

    def __init__(self, batch_sizes: list[int], default: int, num_pruning_rounds: int = 2) -> None:
        if default not in batch_sizes:
            raise InputError(
                f"the default batch size {default} is not among the batch sizes "
                f"{sorted(batch_sizes)}; pick one of them"
            )
        self.num_pruning_rounds = num_pruning_rounds
        self._explorer = PruningExplorer(list(batch_sizes), default, num_pruning_rounds)

    @property
    def batch_sizes(self) -> list[int]:
        """The candidates of the current round; the survivors once pruning is over."""
        return list(self._explorer.survivors)

    @property
    def default(self) -> int:
        """The batch size the next round is centred on (the cheapest that reached so far)."""
        return self._explorer.center

    @property
    def expecting(self) -> int:
        """The batch size whose result pruning waits for; 0 once pruning is over."""
        expected = self._explorer.expected
        return 0 if expected is None else int(expected)

    def next_batch_size(self) -> int:
        """The batch size to explore next; ``StopIteration(survivors)`` when pruning is over."""
        expected = self._explorer.expected
        if expected is None:
            raise StopIteration(sorted(self._explorer.survivors))
        return int(expected)

    def report_batch_size_result(self, batch_size: int, cost: float, reached: bool) -> None:
        """The outcome of running the batch size :meth:`next_batch_size` returned."""
        if batch_size != self.expecting:
            raise CallbackOrderError(
                f"pruning waits for batch size {self.expecting}, got a result for {batch_size}; "
                "report results in the order next_batch_size() gave them"
            )
        self._explorer.observe(int(batch_size), float(cost), bool(reached))


class PruningGTSBatchSizeOptimizer(BatchSizeOptimizer):
    """The Zeus paper's batch-size policy: two rounds of pruning, then Gaussian Thompson sampling.

    Each job gets a :class:`~zeus_nb.optimizer.batch_size.PaperBatchSizeOptimizer` (in memory,
    seeded with ``seed``) that learns exactly the costs it is given. ``window_size`` > 0: each
    arm learns from its last ``window_size`` costs. ``concurrency``: during pruning, accept
    results of batch sizes other than the one pruning waits for (learned, but not advancing
    pruning) instead of raising. ``prior_mean`` and ``prior_precision`` put a Gaussian prior on
    each arm's mean reward (-cost); precision 0, the default, is the paper's flat prior.
    """

    def __init__(
        self,
        prior_mean: float = 0.0,
        prior_precision: float = 0.0,
        window_size: int = 0,
        concurrency: bool = False,
        seed: int = 123456,
        verbose: bool = True,
    ) -> None:
        if not prior_precision >= 0:
            raise InputError(f"prior_precision must be >= 0 (0: flat prior), got {prior_precision}")
        if window_size < 0:
            raise InputError(f"window_size must be >= 0 (0: every run), got {window_size}")
        self.prior_mean = prior_mean
        self.prior_precision = prior_precision
        self.window_size = window_size
        self.concurrency = concurrency
        self.seed = seed
        self.verbose = verbose
        self.bandits: dict[Job, PaperBatchSizeOptimizer] = {}

    @property
    def name(self) -> str:
        return "Pruning GaussianTS BSO"

    @property
    def history(self) -> dict[Job, list[tuple[int, float]]]:
        """Per job, every (batch size, reward = -cost) observed, oldest first."""
        return {
            job: [(int(r.batch_size), -float(r.cost)) for r in b.history().itertuples()]
            for job, b in self.bandits.items()
        }

    def register_job(self, job: Job, batch_sizes: list[int]) -> None:
        """Start (or restart) pruning for ``job`` from its ``default_bs``."""
        if job.default_bs is None:
            raise InputError(f"{job} has no default batch size; pass default_bs= to Job")
        if not batch_sizes:
            raise InputError(f"{job}: the list of batch sizes is empty")
        if job.default_bs not in batch_sizes:
            raise InputError(
                f"{job}: the default batch size {job.default_bs} is not among the batch sizes "
                f"{sorted(batch_sizes)}; pick one of them"
            )
        spec = JobSpec(
            str(job),
            tuple(int(b) for b in batch_sizes),
            int(job.default_bs),
            beta=math.inf,  # learn each cost as given: the caller charges stopped runs
            seed=int(self.seed),
            window=int(self.window_size),
        )
        self.bandits[job] = PaperBatchSizeOptimizer(
            spec, MemoryStore(), prior_mean=self.prior_mean, prior_precision=self.prior_precision
        )
        if self.verbose:
            self._log(f"Registered {job}")

    def predict(self, job: Job) -> int:
        bandit = self.bandits[_registered(self.bandits, job)]
        batch_size = bandit.next_batch_size()
        if self.verbose:
            self._log(f"{job} in {bandit.phase} stage -> BS = {batch_size}")
        return batch_size

    def observe(
        self, job: Job, batch_size: int, cost: float, converged: bool | None = None
    ) -> None:
        """Learn that ``batch_size`` cost ``cost`` (J); ``converged`` is required in pruning."""
        bandit = self.bandits[_registered(self.bandits, job)]
        if bandit.phase == "pruning":
            if converged is None:
                raise InputError(f"{job} is pruning: pass converged=True/False to observe()")
            expected = bandit.next_batch_size()
            if batch_size != expected and not self.concurrency:
                raise CallbackOrderError(
                    f"{job}: pruning waits for batch size {expected}, got {batch_size}; "
                    "pass concurrency=True to accept results in any order"
                )
        if batch_size not in bandit.job.batch_sizes:
            raise InputError(f"batch size {batch_size} is not one of {job}'s")
        obs = Observation(int(batch_size), 0.0, 0.0, float(cost), bool(converged))
        bandit.store.append(bandit.job.name, obs)
        if self.verbose:
            self._log(f"{job} @ {batch_size}: cost = {cost:.2f}, converged = {converged}")


class JITPowerLimitOptimizer(PowerLimitOptimizer):
    """Per job and batch size, the power limit with the least observed cost.

    :meth:`predict` returns None until a batch size has been profiled (any :meth:`observe`).
    """

    def __init__(self, verbose: bool = True) -> None:
        self.verbose = verbose
        self.best_pl: defaultdict[Job, dict[int, int]] = defaultdict(dict)
        self.best_cost: defaultdict[Job, dict[int, float]] = defaultdict(dict)
        self.observe_count: defaultdict[Job, defaultdict[int, int]] = defaultdict(
            partial(defaultdict, int)
        )

    @property
    def name(self) -> str:
        return "JITPSO"

    def predict(self, job: Job, batch_size: int) -> int | None:
        limit = self.best_pl[job].get(batch_size)
        if self.verbose:
            self._log(f"{job} @ {batch_size} -> PL = {'profile' if limit is None else limit}")
        return limit

    def observe(self, job: Job, batch_size: int, power_limit: int, cost: float) -> None:
        """Keep ``power_limit`` if it is the cheapest seen for ``batch_size`` (first on ties)."""
        self.observe_count[job][batch_size] += 1
        best = self.best_cost[job].get(batch_size)
        if best is None or cost < best:
            self.best_pl[job][batch_size] = power_limit
            self.best_cost[job][batch_size] = cost


def _registered(states: dict, job: Job) -> Job:
    if job not in states:
        raise InputError(f"{job} is not registered; call register_job(job, batch_sizes) first")
    return job
