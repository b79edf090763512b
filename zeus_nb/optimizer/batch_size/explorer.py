"""The pruning phase of the batch-size optimizer (Zeus, NSDI '23, section 4.2).

Starting at the default batch size, try smaller batch sizes in descending order, then larger ones
in ascending order; a direction stops at its first batch size that fails to reach the target. A
second round repeats this over the survivors, re-centred on the cheapest batch size of the first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from zeus_nb.errors import InputError

__all__ = ["PruningExplorer"]


@dataclass
class PruningExplorer:
    """The pruning phase as a small state machine: ``expected`` is the batch size to run next.

    Observations of any other batch size (a concurrent recurrence that reports late) are ignored
    here; the bandit still learns from them.
    """

    batch_sizes: list[int]
    center: int
    rounds: int = 2
    round: int = 0
    survivors: list[int] = field(default_factory=list)
    _queue: list[list[int]] = field(default_factory=list)
    _good: list[int] = field(default_factory=list)
    _best: float = math.inf
    tried: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.batch_sizes = sorted(set(self.batch_sizes))
        if self.center not in self.batch_sizes:
            raise InputError(
                f"default batch size {self.center} is not among the batch sizes {self.batch_sizes}"
            )
        self.survivors = list(self.batch_sizes)
        self._start_round()

    def _start_round(self) -> None:
        i = self.survivors.index(self.center)
        self._queue = [self.survivors[: i + 1][::-1], self.survivors[i + 1 :]]
        self._good = []
        self._best = math.inf
        self._skip_empty()

    def _skip_empty(self) -> None:
        while self._queue and not self._queue[0]:
            self._queue.pop(0)

    @property
    def done(self) -> bool:
        return self.round >= self.rounds

    @property
    def expected(self) -> int | None:
        """The batch size pruning wants to run next, or None once pruning is over."""
        return None if self.done else self._queue[0][0]

    def observe(self, batch_size: int, cost: float, reached: bool) -> bool:
        """Feed one result; returns whether pruning used it."""
        if self.done or batch_size != self.expected:
            return False
        self._queue[0].pop(0)
        self.tried.append(batch_size)
        if reached:
            self._good.append(batch_size)
            if cost < self._best:
                self._best, self.center = cost, batch_size
        else:
            self._queue[0] = []  # stop this direction at its first failure
        self._skip_empty()
        if not self._queue:
            self._end_round()
        return True

    def _end_round(self) -> None:
        # With no survivor at all, keep the previous set: the user's default must be feasible,
        # and a single unlucky (or early-stopped) run should not leave the bandit with no arms.
        if self._good:
            self.survivors = sorted(self._good)
        if self.center not in self.survivors:
            self.center = self.survivors[0]
        self.round += 1
        if not self.done:
            self._start_round()
