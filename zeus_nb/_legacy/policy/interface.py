"""What a policy must offer to plug into :class:`zeus_nb._legacy.simulate.Simulator`.

Zeus's ``zeus._legacy.policy.interface``: subclass :class:`BatchSizeOptimizer` or
:class:`PowerLimitOptimizer`, implement the abstract members, and hand an instance to the
simulator. One optimizer may serve several jobs; :class:`~zeus_nb._legacy.job.Job` is hashable,
so per-job state can live in a dictionary keyed by the job.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod

from zeus_nb._legacy.job import Job

__all__ = ["BatchSizeOptimizer", "PowerLimitOptimizer"]

logger = logging.getLogger("zeus_nb._legacy.policy")


class BatchSizeOptimizer(ABC):
    """Chooses the batch size of each recurrence of a job and learns from the outcome."""

    @property
    @abstractmethod
    def name(self) -> str:
        """A short name, used to tag log messages."""

    @abstractmethod
    def register_job(self, job: Job, batch_sizes: list[int]) -> None:
        """Set up the state for ``job``, whose feasible batch sizes are ``batch_sizes``."""

    @abstractmethod
    def predict(self, job: Job) -> int:
        """The batch size ``job`` should run with next."""

    @abstractmethod
    def observe(
        self, job: Job, batch_size: int, cost: float, converged: bool | None = None
    ) -> None:
        """Learn from one run of ``job`` at ``batch_size`` that cost ``cost`` (J).

        ``converged``: whether the run reached the target metric (it may have been stopped
        early or hit the epoch cap); None for policies that do not use it.
        """

    def _log(self, message: str) -> None:
        """Log ``message`` tagged with the optimizer's name (INFO, logger zeus_nb._legacy)."""
        logger.info("[%s] %s", self.name, message)


class PowerLimitOptimizer(ABC):
    """Chooses the GPU power limit of a job at a given batch size."""

    @property
    @abstractmethod
    def name(self) -> str:
        """A short name, used to tag log messages."""

    @abstractmethod
    def predict(self, job: Job, batch_size: int) -> int | None:
        """The power limit (W) to use, or None when this batch size must be profiled first.

        After a None, the simulator profiles every limit and reports each through
        :meth:`observe`, then asks again.
        """

    @abstractmethod
    def observe(self, job: Job, batch_size: int, power_limit: int, cost: float) -> None:
        """Learn that ``job`` at ``batch_size`` and ``power_limit`` W costs ``cost``."""

    def _log(self, message: str) -> None:
        """Log ``message`` tagged with the optimizer's name (INFO, logger zeus_nb._legacy)."""
        logger.info("[%s] %s", self.name, message)
