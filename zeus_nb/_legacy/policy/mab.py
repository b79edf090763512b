"""Gaussian Thompson sampling with a known reward precision (Zeus's ``GaussianTS``).

Each arm's reward is Gaussian with a precision (inverse variance) the caller supplies; the belief
about its mean is Gaussian too, starting from the prior, and is updated in closed form (the
conjugate normal-normal update). :class:`GaussianTS` maximizes *reward*: the batch-size policies
feed it negative costs. zeus-nb's own bandit (:mod:`zeus_nb.optimizer.batch_size`) minimizes cost
and estimates each arm's variance itself; this class is the general building block Zeus exposes.
"""

from __future__ import annotations

import logging
import math
import warnings

import numpy as np

__all__ = ["GaussianTS"]

logger = logging.getLogger("zeus_nb._legacy.policy")


class GaussianTS:
    """Thompson sampling over ``arms`` whose rewards are Gaussian with known precision.

    ``reward_precision`` is one precision for every arm or a list, one per arm (``inf``: the
    arm's reward is its observed mean exactly). The mean of each arm starts from the prior
    N(``prior_mean``, 1 / ``prior_precision``); precision 0 is a flat prior. Until every arm has
    ``num_exploration`` observations, :meth:`predict` returns an under-explored arm, picked in a
    random order so that concurrent users of one bandit spread out. ``seed`` fixes every draw.
    """

    def __init__(
        self,
        arms: list[int],
        reward_precision: list[float] | float,
        prior_mean: float = 0.0,
        prior_precision: float = 0.0,
        num_exploration: int = 1,
        seed: int = 123456,
        verbose: bool = True,
    ) -> None:
        self.name = "GaussianTS"
        self.arms = list(arms)
        self.prior_mean = prior_mean
        self.prior_prec = prior_precision
        self.num_exploration = num_exploration
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.verbose = verbose
        if isinstance(reward_precision, list):
            if len(reward_precision) != len(self.arms):
                raise ValueError(
                    f"reward_precision lists {len(reward_precision)} values for "
                    f"{len(self.arms)} arms; give one per arm or a single number"
                )
            self.arm_reward_prec = dict(zip(self.arms, reward_precision, strict=True))
        else:
            self.arm_reward_prec = {arm: reward_precision for arm in self.arms}
        # The belief about each arm's mean reward, N(mean, 1 / precision).
        self.arm_param_mean = {arm: prior_mean for arm in self.arms}
        self.arm_param_prec = {arm: prior_precision for arm in self.arms}
        self.arm_num_observations = {arm: 0 for arm in self.arms}

    def fit(
        self,
        decisions: list[int] | np.ndarray,
        rewards: list[float] | np.ndarray,
        reset: bool,
    ) -> None:
        """Update every arm with the rewards observed when it was chosen.

        ``decisions[i]`` is the arm that earned ``rewards[i]``; ``reset`` forgets the previous
        observations first.
        """
        chosen = np.asarray(decisions)
        earned = np.asarray(rewards, dtype=float)
        for arm in self.arms:
            self.fit_arm(arm, earned[chosen == arm], reset)

    def fit_arm(self, arm: int, rewards: np.ndarray, reset: bool) -> None:
        """Update one arm's belief with ``rewards`` (conjugate normal update).

        With an infinite reward precision the belief collapses onto the observed mean.
        """
        if reset:
            self.arm_param_mean[arm] = self.prior_mean
            self.arm_param_prec[arm] = self.prior_prec
            self.arm_num_observations[arm] = 0
        rewards = np.asarray(rewards, dtype=float)
        if rewards.size == 0:
            return
        tau = float(self.arm_reward_prec[arm])
        if math.isinf(tau):
            precision, mean = math.inf, float(rewards.mean())
        else:
            prior_prec, prior_mean = self.arm_param_prec[arm], self.arm_param_mean[arm]
            precision = prior_prec + rewards.size * tau
            weighted = prior_prec * prior_mean + tau * float(rewards.sum())
            mean = weighted / precision if precision > 0 else math.nan
        self.arm_param_mean[arm] = mean
        self.arm_param_prec[arm] = precision
        self.arm_num_observations[arm] += int(rewards.size)

    def predict(self) -> int:
        """The arm to pull: an under-explored one if any, else the best sampled mean reward."""
        order = self.rng.choice(len(self.arms), size=len(self.arms), replace=False)
        for i in order:
            arm = self.arms[int(i)]
            if self.arm_num_observations[arm] < self.num_exploration:
                if self.verbose:
                    logger.info("[%s] Explore arm %s.", self.name, arm)
                return arm
        samples = self.predict_expectations()
        if self.verbose:
            for arm, sample in samples.items():
                logger.info(
                    "[%s] arm %s: mean ~ N(%.2f, 1/%.4g) -> %.2f",
                    self.name,
                    arm,
                    self.arm_param_mean[arm],
                    self.arm_param_prec[arm],
                    sample,
                )
        return max(samples, key=samples.__getitem__)

    def predict_expectations(self) -> dict[int, float]:
        """One draw of every arm's mean reward from its belief.

        An arm never observed is drawn from the prior, with a warning.
        """
        samples = {}
        for arm in self.arms:
            precision = self.arm_param_prec[arm]
            if precision == self.prior_prec:
                warnings.warn(f"arm {arm!r} has no observations yet", stacklevel=2)
            sd = math.inf if precision == 0 else math.sqrt(1.0 / precision)
            samples[arm] = float(self.rng.normal(self.arm_param_mean[arm], sd))
        return samples
