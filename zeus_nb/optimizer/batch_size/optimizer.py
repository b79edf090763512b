"""The batch-size optimizer for recurring training jobs (Zeus, NSDI '23, section 4).

A job that re-runs (nightly retraining, a course assignment, a hyperparameter sweep) can learn its
cost-optimal batch size across recurrences. Each recurrence is one pull of a multi-armed bandit:

1. **Pruning.** Starting at the default batch size b0, try smaller batch sizes in descending
   order, then larger ones in ascending order; a direction stops at the first batch size that
   fails to reach the target metric (larger or smaller ones would likely fail too). A second round
   repeats this over the survivors, re-centred on the cheapest batch size of the first round.
2. **Gaussian Thompson sampling** over the survivors: each arm's mean cost gets a Gaussian
   posterior whose variance is estimated from that arm's observed costs; each recurrence draws one
   sample per arm and runs the cheapest draw. An arm's cost variance is its own sample variance
   shrunk towards the variance the other arms' coefficient of variation implies (a variance from
   two runs is too noisy to trust alone: two equal runs give 0 and freeze the arm). The draws use
   the posterior's width times ``exploration`` (default 0.35): a recurring job lives for tens to
   hundreds of recurrences, too few to pay back the exploration of full-width draws between arms
   a few percent apart (on the Zeus traces, 300 paired seeds, this width with the shrunk variance
   raised ImageNet's mean energy saving by about 0.1 point over width 0.5 with the arm's own
   variance, and left the other workloads unchanged within their noise). ``exploration=1`` gives
   textbook Thompson sampling. A run that fails counts its own cost plus the best cost so far,
   for the retry it forces.
   :class:`~zeus_nb.optimizer.batch_size.paper.PaperBatchSizeOptimizer` keeps the published
   Thompson step as a baseline.

Cost = eta x energy + (1 - eta) x MaxPower x time (:func:`zeus_nb.tradeoff.zeus_cost`).
**Early stopping**: a run whose cost would pass beta x the cheapest successful run so far is
stopped and counts as not reaching the target (beta = inf disables this). The GPU power limit is
chosen **just in time** per batch size: the first run of a batch size profiles the limits and
:meth:`LocalBatchSizeOptimizer.set_power_limit` records the least-cost one for later runs.

Every decision is a pure function of the job's settings and its observation log, and the random
draw of recurrence *n* is seeded by (seed, n): any process that reads the same log makes the same
choice, which is what lets the state live in a shared SQLite file.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from zeus_nb.errors import InputError
from zeus_nb.inputs.api import checked_methods
from zeus_nb.inputs.validate import POWER_LIMIT, integer, number
from zeus_nb.optimizer.batch_size.checks import (
    checked_observation,
    device_max_power,
    validated_spec,
    with_max_power,
)
from zeus_nb.optimizer.batch_size.explorer import PruningExplorer
from zeus_nb.optimizer.batch_size.sqlite_store import SQLiteStore
from zeus_nb.optimizer.batch_size.store import (
    DEFAULT_EXPLORATION,
    JobSpec,
    MemoryStore,
    Observation,
    StoreError,
)
from zeus_nb.utils.metric import zeus_cost

if TYPE_CHECKING:
    import pandas as pd

# How many observations the pooled variance prior of an arm is worth (see
# LocalBatchSizeOptimizer._arm_posterior). Weights 2 to 8 did about equally well on the Zeus traces
# (300 paired seeds, within their noise); 8 had the best mean relative saving there. The prior
# matters most for arms with two or three runs.
VARIANCE_PRIOR_WEIGHT = 8.0

__all__ = [
    "LocalBatchSizeOptimizer",
    "JobSpec",
    "MemoryStore",
    "Observation",
    "PruningExplorer",
    "SQLiteStore",
]


@checked_methods
class LocalBatchSizeOptimizer:
    """Learns the cost-optimal batch size of a recurring job, one recurrence at a time.

    ``job`` is a :class:`JobSpec` or a job name; with a name, pass ``batch_sizes`` and
    ``default_batch_size`` the first time (later processes may pass the name alone: the settings
    come from the store). ``store`` is an opened store (:class:`SQLiteStore`,
    :class:`MemoryStore`, a PostgreSQL ``SQLStore``), a SQLite file path, a URL
    (``sqlite:///PATH``, ``postgresql://USER:PASSWORD@HOST:PORT/DATABASE``), or None for
    ``$ZEUS_NB_BSO_STORE``, else the SQLite file at the default location (see
    :mod:`zeus_nb.optimizer.batch_size.store_url`).

    :func:`zeus_nb.optimizer.batch_size.BatchSizeOptimizer` builds this class for that call
    shape and Zeus's in-training client for Zeus's (:mod:`.factory`).

    A recurrence::

        bso = LocalBatchSizeOptimizer("nightly-resnet", store=..., batch_sizes=[64, 128, 256],
                                 default_batch_size=128)
        bs = bso.next_batch_size()
        ... train with bs; stop when bso.should_stop(time=t, energy=e) ...
        bso.report(bs, time=t, energy=e, reached=hit_target)
    """

    def __init__(
        self,
        job: JobSpec | str,
        store: MemoryStore | SQLiteStore | str | Path | None = None,
        *,
        batch_sizes: list[int] | tuple[int, ...] | None = None,
        default_batch_size: int | None = None,
        eta: float = 0.5,
        beta: float = 2.0,
        max_power: float | None = None,
        seed: int = 0,
        pruning_rounds: int = 2,
        window: int = 0,
        exploration: float = DEFAULT_EXPLORATION,
    ) -> None:
        from zeus_nb.optimizer.batch_size.store_url import open_store

        store = open_store(store)
        self.store = store
        if isinstance(job, JobSpec):
            spec = job
        else:
            name = str(job)
            if not name:
                raise InputError("the job name must not be empty")
            if batch_sizes is None and default_batch_size is None:
                known = store.job(name)
                if known is None:
                    raise StoreError(
                        f"job {name!r} is not in the store yet; pass batch_sizes= and "
                        "default_batch_size= to start its bandit"
                    )
                spec = known
            else:
                # as given: validated_spec checks each value (1.5 is no batch size, not 1)
                spec = JobSpec(
                    name,
                    batch_sizes if batch_sizes is not None else (),  # type: ignore[arg-type]
                    default_batch_size,  # type: ignore[arg-type]
                    eta,
                    beta,
                    max_power,
                    seed,
                    pruning_rounds,
                    window,
                    exploration,
                )
        spec = with_max_power(validated_spec(spec), store)
        self.job = store.register(spec)
        self._explorer = PruningExplorer(
            list(self.job.batch_sizes), self.job.default_batch_size, self.job.pruning_rounds
        )
        self._last_id = 0
        self.last_observation_id: int | None = None  # the store's id of this object's last report
        self._log: list[Observation] = []
        self._costs: dict[int, list[float]] = {b: [] for b in self.job.batch_sizes}
        self._stats: dict[int, tuple[int, float, float]] = {}  # bs -> (n, mean, sd), cached
        self._running: dict[int, tuple[int, float, float]] = {}  # bs -> (n, mean, m2), no window
        self._best_cost = math.inf
        self._sync()

    # -- state ------------------------------------------------------------------------------

    def _sync(self) -> None:
        """Apply observations other processes (or this one) appended since the last look."""
        for i, obs in self.store.observations(self.job.name, self._last_id):
            self._apply(obs, self._prunes(i))
            self._last_id = i

    def _prunes(self, observation_id: int) -> bool:
        """Whether an observation may advance pruning: every one here. The optimizer server
        counts only the runs it handed out as explorations (Zeus's rule for concurrent runs)."""
        return True

    def _learned_cost(self, obs: Observation) -> float:
        """The cost the bandit learns from one run.

        A run that did not reach the target has to be retried: its cost to the job is what it
        spent plus at least one successful run, so the bandit sees that sum.
        """
        if obs.reached:
            return obs.cost
        return obs.cost + (self._best_cost if math.isfinite(self._best_cost) else obs.cost)

    def _apply(self, obs: Observation, prunes: bool = True) -> None:
        self._log.append(obs)
        self._costs.setdefault(obs.batch_size, []).append(self._learned_cost(obs))
        self._update_stats(obs.batch_size)
        if prunes:
            self._explorer.observe(obs.batch_size, obs.cost, obs.reached)
        if obs.reached and obs.cost < self._best_cost:
            self._best_cost = obs.cost

    @property
    def phase(self) -> str:
        """``"pruning"`` or ``"thompson"``."""
        self._sync()
        return "thompson" if self._explorer.done else "pruning"

    @property
    def survivors(self) -> list[int]:
        """Batch sizes still in the running (all of them until pruning ends a round)."""
        self._sync()
        return list(self._explorer.survivors)

    @property
    def best_cost(self) -> float:
        """Cost (J) of the cheapest run that reached the target so far; inf before any."""
        self._sync()
        return self._best_cost

    @property
    def cost_threshold(self) -> float:
        """Early-stopping threshold: beta x best cost (inf: no run has reached the target yet)."""
        best = self.best_cost
        return self.job.beta * best if math.isfinite(best) else math.inf

    @property
    def num_observations(self) -> int:
        self._sync()
        return len(self._log)

    # -- decisions --------------------------------------------------------------------------

    def next_batch_size(self) -> int:
        """The batch size this recurrence should train with."""
        self._sync()
        expected = self._explorer.expected
        if expected is not None:
            return int(expected)
        rng = np.random.default_rng([self.job.seed, len(self._log)])
        draws = self._sample_means(rng)
        return int(min(draws, key=draws.get))

    def _update_stats(self, bs: int) -> None:
        """Fold an arm's newest cost into its statistics.

        Without a window every cost counts, so the statistics are updated in place (Welford's
        running mean and sum of squared deviations): a recurrence costs the same after 10,000
        runs as after ten. A window's statistics are recomputed over its few costs.
        """
        if self.job.window > 0:
            self._stats.pop(bs, None)
            return
        x = self._costs[bs][-1]
        n, mean, m2 = self._running.get(bs, (0, 0.0, 0.0))
        n += 1
        delta = x - mean
        mean += delta / n
        m2 += delta * (x - mean)
        self._running[bs] = (n, mean, m2)
        self._stats[bs] = (n, mean, math.sqrt(max(m2, 0.0) / n))

    def _arm_stats(self, bs: int) -> tuple[int, float, float]:
        """(n, mean, maximum-likelihood standard deviation) of the costs an arm learns from."""
        stats = self._stats.get(bs)
        if stats is None:
            c = self._costs.get(bs, [])
            if self.job.window > 0:
                c = c[-self.job.window :]
            n = len(c)
            mean = math.fsum(c) / n if n else math.nan
            sd = math.sqrt(math.fsum((x - mean) ** 2 for x in c) / n) if n else math.nan
            stats = self._stats[bs] = (n, mean, sd)
        return stats

    def _arm_posterior(self, bs: int, pooled_cv: float) -> tuple[float, float]:
        """(mean, std) of the Gaussian posterior of an arm's mean cost, flat prior on the mean.

        The cost variance is the arm's own (maximum-likelihood) sample variance shrunk towards
        the variance the other arms' mean coefficient of variation implies for this arm's mean,
        as if that prior were worth :data:`VARIANCE_PRIOR_WEIGHT` observations (the posterior
        mode of a conjugate inverse-gamma prior). A variance estimated from two or three runs is
        itself very noisy: two runs that happen to take the same number of epochs give 0,
        which would freeze the arm's draw at its mean and could rule out the cheapest batch size
        for good after one unlucky pair of runs. A single observation relies on the prior alone.
        """
        n, mean, sd = self._arm_stats(bs)
        if n == 0:
            return math.nan, math.inf
        own = n if n >= 2 else 0
        k = VARIANCE_PRIOR_WEIGHT
        prior_var = (pooled_cv * mean) ** 2
        var = (own * sd * sd + k * prior_var) / (own + k) if own + k > 0 else 0.0
        return mean, math.sqrt(var / n)

    def _pooled_cv(self, arms: list[int]) -> float:
        """Mean coefficient of variation of the arms with at least two observations (0: none)."""
        cvs = []
        for bs in arms:
            n, mean, sd = self._arm_stats(bs)
            if n >= 2 and mean > 0:
                cvs.append(sd / mean)
        return math.fsum(cvs) / len(cvs) if cvs else 0.0

    def _sample_means(self, rng: np.random.Generator) -> dict[int, float]:
        arms = self._explorer.survivors
        cv = self._pooled_cv(arms)
        draws: dict[int, float] = {}
        normals = rng.standard_normal(len(arms))
        for bs, z in zip(arms, normals, strict=True):
            mean, std = self._arm_posterior(bs, cv)
            if math.isnan(mean):  # never observed (only after a concurrent mix-up): try it
                return {bs: -math.inf}
            std *= self.job.exploration
            draws[bs] = mean + std * float(z) if std > 0 else mean
        return draws

    def posterior(self) -> pd.DataFrame:
        """Per batch size: runs, mean cost, posterior std of the mean, survivor, runs that reached.

        ``mean_cost`` averages the costs the bandit learns from: a run that failed counts its own
        cost plus the best cost at the time (the retry it forced).
        """
        import pandas as pd

        self._sync()
        cv = self._pooled_cv(self._explorer.survivors)
        reached = {b: 0 for b in self.job.batch_sizes}
        for o in self._log:
            reached[o.batch_size] = reached.get(o.batch_size, 0) + int(o.reached)
        rows = []
        for bs in self.job.batch_sizes:
            n = self._arm_stats(bs)[0]
            mean, std = self._arm_posterior(bs, cv)
            rows.append(
                {
                    "batch_size": bs,
                    "observations": n,
                    "mean_cost": mean,
                    "std": std if n else math.nan,
                    "survivor": bs in self._explorer.survivors,
                    "reached": reached[bs],
                }
            )
        return pd.DataFrame(rows)

    def history(self) -> pd.DataFrame:
        """Every reported run, oldest first."""
        import pandas as pd

        self._sync()
        cols = ["batch_size", "power_limit", "time", "energy", "cost", "reached"]
        return pd.DataFrame(
            [[o.batch_size, o.power_limit, o.time, o.energy, o.cost, o.reached] for o in self._log],
            columns=cols,
        )

    # -- reporting --------------------------------------------------------------------------

    def cost(self, time: float, energy: float) -> float:
        """The job's cost (J) of a run that took ``time`` s and ``energy`` J."""
        return zeus_cost(float(energy), float(time), self.job.eta, self._max_power())

    def _max_power(self) -> float:
        """The job's ``max_power``: stored with the job, so every process's report of the same
        run costs the same. A job stored without one (before it was resolved at creation)
        takes the value its first report used, recovered from that report's cost."""
        if self.job.max_power is not None:
            return self.job.max_power
        eta = self.job.eta
        for obs in self._log:
            if eta < 1 and obs.time > 0:
                return (obs.cost - eta * obs.energy) / ((1 - eta) * obs.time)
        return device_max_power()

    def should_stop(self, time: float, energy: float, epochs: int | None = None) -> bool:
        """Whether to stop the running recurrence early (call it at the end of each epoch).

        With ``epochs`` (epochs done so far), stops when one more epoch at the average cost per
        epoch so far would pass the threshold; without, when the cost has passed it.
        """
        limit = self.cost_threshold
        if not math.isfinite(limit):
            return False
        spent = self.cost(time, energy)
        if epochs:
            return spent * (epochs + 1) / epochs > limit
        return spent > limit

    def report(
        self,
        batch_size: int,
        *,
        time: float,
        energy: float,
        reached: bool,
        power_limit: float | None = None,
    ) -> float:
        """Record a finished or stopped run; returns its cost (J).

        Report every run, including failed and early-stopped ones: a run that did not reach
        the target is what prunes a batch size.
        """
        obs = checked_observation(
            {
                "batch_size": batch_size,
                "time": time,
                "energy": energy,
                "reached": reached,
                "power_limit": power_limit,
            },
            f"report() of job {self.job.name!r}",
        )
        bs = obs.batch_size
        if bs not in self.job.batch_sizes:
            raise InputError(
                f"batch size {bs} is not one of job {self.job.name!r}'s batch sizes "
                f"{list(self.job.batch_sizes)}"
            )
        cost = self.cost(obs.time, obs.energy)
        obs = Observation(bs, obs.time, obs.energy, cost, obs.reached, obs.power_limit)
        self.last_observation_id = self.store.append(self.job.name, obs)
        self._sync()
        return cost

    # -- just-in-time power limit -----------------------------------------------------------

    def power_limit(self, batch_size: int) -> float | None:
        """The least-cost power limit recorded for ``batch_size``; None: profile it this run."""
        bs = integer(batch_size, "power_limit(): batch_size", 1, 10**7, text_ok=False)
        return self.store.power_limits(self.job.name).get(bs)

    def set_power_limit(self, batch_size: int, watts: float) -> None:
        """Record the power limit that profiling found cheapest for ``batch_size``."""
        where = f"set_power_limit() of job {self.job.name!r}"
        bs = integer(batch_size, f"{where}: batch_size", 1, 10**7, text_ok=False)
        w = number(watts, f"{where}: watts", POWER_LIMIT, "give the limit in W", text_ok=False)
        if bs not in self.job.batch_sizes:
            raise InputError(f"batch size {bs} is not one of job {self.job.name!r}'s")
        self.store.set_power_limit(self.job.name, bs, w)
