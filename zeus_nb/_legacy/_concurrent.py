"""Concurrent submissions of one recurring job (``Simulator.simulate_one_alibaba_group``).

Submissions follow a production trace (the Zeus paper used Alibaba's): each has a start and an
end time. A submission that arrives while others run cannot wait for their results, so it runs
the cheapest batch size found so far; only a submission that finds nothing in flight asks the
batch-size policy. Results reach the policy when runs end, in order of end time (ties: in order
of launch). A run that fails is retried as soon as it ends, for as long again; the retry is
chosen by the same rule.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from zeus_nb._legacy._replay import MAX_TRIES, HistoryEntry, JobReplay
from zeus_nb.errors import InputError, SimulationError

if TYPE_CHECKING:
    import pandas as pd

GROUP_COLUMNS = ("start_time", "end_time", "runtime_ratio")


@dataclass
class _InFlight:
    """A launched run; its outcome is known at launch and revealed when it ends."""

    start: float
    end: float
    ratio: float
    bs: int
    pl: int | float
    energy: float
    time: float
    reached: bool
    cost: float
    tries: int


class _Group:
    def __init__(self, replay: JobReplay) -> None:
        self.replay = replay
        self.running: list[tuple[float, int, _InFlight]] = []  # heap of (end, launch order, run)
        self.launched = 0
        self.cheapest = math.inf  # the cheapest successful run so far
        self.best_bs = int(replay.job.default_bs)
        self.history: list[HistoryEntry] = []

    def launch(self, start: float, end: float, ratio: float, tries: int = 1) -> None:
        r = self.replay
        if tries > MAX_TRIES:
            raise SimulationError(
                f"{r.job}: a submission did not reach the target in {MAX_TRIES} runs"
            )
        if self.running:  # others in flight: no new information, run the best known
            bs, pl, profiled = self.best_bs, r.plo.predict(r.job, self.best_bs), False
            if pl is None:
                raise SimulationError(f"{r.job}: no power limit known for batch size {bs}")
        else:
            bs, pl, profiled = r.knobs()
        energy, time, reached = r.run(bs, pl, profiled, r.beta * self.cheapest)
        run = _InFlight(
            start, end, ratio, bs, pl, energy, time, reached, r.cost(energy, time), tries
        )
        heapq.heappush(self.running, (end, self.launched, run))
        self.launched += 1

    def reap(self, now: float) -> None:
        """Report every run that has ended by ``now``, retrying failures as they end."""
        r = self.replay
        while self.running and self.running[0][0] <= now:
            run = heapq.heappop(self.running)[2]
            r.bso.observe(r.job, run.bs, run.cost, run.reached)
            if run.energy or run.time or run.reached:  # a run that never started leaves no entry
                self.history.append(
                    HistoryEntry(
                        run.bs, run.pl, run.energy * run.ratio, run.reached, run.time * run.ratio
                    )
                )
            if run.reached:
                if run.cost < self.cheapest:
                    self.cheapest, self.best_bs = run.cost, run.bs
            else:
                self.launch(run.end, 2 * run.end - run.start, run.ratio, run.tries + 1)


def simulate_group(replay: JobReplay, group_df: pd.DataFrame) -> list[HistoryEntry]:
    """Replay the submissions of ``group_df`` (in start-time order) and every retry they need."""
    missing = [c for c in GROUP_COLUMNS if c not in group_df.columns]
    if missing:
        raise InputError(
            f"group_df lacks column(s) {', '.join(missing)}; it needs {', '.join(GROUP_COLUMNS)}"
        )
    group = _Group(replay)
    rows = group_df.sort_values("start_time", kind="stable")
    for start, end, ratio in rows[list(GROUP_COLUMNS)].itertuples(index=False):
        group.reap(float(start))
        group.launch(float(start), float(end), float(ratio))
    group.reap(math.inf)
    return group.history
