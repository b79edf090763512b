"""Zeus's trace-driven simulator API (``zeus._legacy.simulate``) over zeus-nb's simulator.

:class:`Simulator` takes the train and power traces and two pluggable policies (subclasses of
:class:`~zeus_nb._legacy.policy.BatchSizeOptimizer` and
:class:`~zeus_nb._legacy.policy.PowerLimitOptimizer`) and replays a recurring job, returning one
:class:`HistoryEntry` per run. Runs are replayed by zeus-nb's simulator under whole-epoch
accounting (:func:`zeus_nb.optimizer.batch_size.simulate` with ``accounting="epoch"``), with
the recurrence rules of the original simulator: at most 20 runs per recurrence; a run that
cannot afford one epoch under beta x the cheapest recurrence so far is not started, and the
policy learns it at 100 x beta x that recurrence's cost; the default batch size must reach the
target in the first recurrence.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import TYPE_CHECKING

from zeus_nb._legacy._concurrent import simulate_group
from zeus_nb._legacy._replay import (
    MAX_TRIES,
    HistoryEntry,
    JobReplay,
    check_knobs,
    job_workload,
    profile_costs,
)
from zeus_nb._legacy.job import Job
from zeus_nb._legacy.policy import BatchSizeOptimizer, PowerLimitOptimizer
from zeus_nb.data.traces import load_power_trace, load_train_trace
from zeus_nb.errors import InputError, SimulationError
from zeus_nb.optimizer.batch_size.simulator import WorkloadModel, workload_model

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["HistoryEntry", "Simulator"]

logger = logging.getLogger("zeus_nb._legacy.simulate")


class Simulator:
    """Replays recurring jobs on the traces under the policies it is given.

    ``summary_train`` and ``summary_power`` are CSV paths or DataFrames of the Zeus trace schema
    (validated like every trace zeus-nb reads). The policies are copied at the start of every
    simulation, so a simulation never changes them and, under ``seed``, always gives the same
    history. ``verbose`` logs each step at INFO level (logger ``zeus_nb._legacy``).
    """

    def __init__(
        self,
        summary_train: str | pd.DataFrame,
        summary_power: str | pd.DataFrame,
        batch_size_optimizer: BatchSizeOptimizer,
        power_limit_optimizer: PowerLimitOptimizer,
        seed: int = 123456,
        verbose: bool = True,
    ) -> None:
        self._train = load_train_trace(_as_trace(summary_train, "summary_train"))
        self._power = load_power_trace(_as_trace(summary_power, "summary_power"))
        df = self._train.merge(self._power, how="inner")
        df["TTA"] = df["target_epoch"] * df["time_per_epoch"]
        df["ETA"] = df["TTA"] * df["average_power"]
        df["energy_per_epoch"] = df["time_per_epoch"] * df["average_power"]
        self.df = df
        self.bso = batch_size_optimizer
        self.plo = power_limit_optimizer
        self.seed = seed
        self.verbose = verbose
        self._models: dict[tuple[Job, float], WorkloadModel] = {}

    def _model(self, job: Job, eta_knob: float = 0.5) -> WorkloadModel:
        key = (job, float(eta_knob))
        if key not in self._models:
            wl = job_workload(job)
            self._models[key] = workload_model(wl, self._power, float(eta_knob), self._train)
        return self._models[key]

    def _replay(self, job: Job, beta_knob: float, eta_knob: float) -> JobReplay:
        check_knobs(beta_knob, eta_knob)
        model = self._model(job, eta_knob)
        replay = JobReplay(job, model, self.bso, self.plo, self.seed, eta_knob, beta_knob)
        replay.bso.register_job(job, model.batch_sizes)
        self._log(f"{job}: batch sizes {model.batch_sizes}, max power {model.max_power:g} W")
        return replay

    def simulate_one_job(
        self,
        job: Job,
        num_recurrence: int,
        beta_knob: float,
        eta_knob: float,
    ) -> list[HistoryEntry]:
        """Run ``job`` ``num_recurrence`` times in sequence; one entry per run, retries included.

        A run that fails (or is stopped at beta_knob x the cheapest recurrence so far; ``inf``:
        never) is retried within its recurrence. ``eta_knob`` weighs energy against time in the
        cost eta x energy + (1 - eta) x MaxPower x time. A run that cannot afford one epoch is
        not started and leaves no entry.
        """
        if num_recurrence < 0:
            raise InputError(f"num_recurrence must be >= 0, got {num_recurrence}")
        replay = self._replay(job, beta_knob, eta_knob)
        history: list[HistoryEntry] = []
        cheapest = math.inf  # the cheapest recurrence so far, all its runs summed
        for rec in range(num_recurrence):
            spent = 0.0
            for _ in range(MAX_TRIES):
                bs, pl, profiled = replay.knobs()
                energy, time, reached = replay.run(bs, pl, profiled, beta_knob * cheapest)
                if energy == 0 and time == 0 and not reached:
                    # Not started: the policy learns that this batch size is far too expensive.
                    replay.bso.observe(job, bs, 100 * beta_knob * cheapest, False)
                    continue
                cost = replay.cost(energy, time)
                spent += cost
                replay.bso.observe(job, bs, cost, reached)
                history.append(HistoryEntry(bs, pl, energy, reached, time))
                if reached:
                    cheapest = min(cheapest, spent)
                    self._log(f"recurrence {rec + 1}: reached with BS {bs} at {pl} W")
                    break
                if rec == 0:
                    raise SimulationError(
                        f"{job}: the default batch size {job.default_bs} did not reach the "
                        "target in the first recurrence; choose a default that converges"
                    )
            else:
                raise SimulationError(
                    f"{job}: recurrence {rec + 1} did not reach the target in {MAX_TRIES} runs"
                )
        return history

    def simulate_one_alibaba_group(
        self,
        job: Job,
        group_df: pd.DataFrame,
        beta_knob: float,
        eta_knob: float,
    ) -> list[HistoryEntry]:
        """Replay one group of recurring submissions with their own start and end times.

        ``group_df`` has one row per submission with ``start_time``, ``end_time`` and
        ``runtime_ratio`` (the run's length relative to the dataset's mean). A submission that
        starts while another is in flight runs the cheapest batch size found so far; results
        reach the policy when runs end. Entries come in the order runs end, their time and
        energy scaled by the runtime ratio. See :mod:`zeus_nb._legacy._concurrent`.
        """

        if job.default_bs is None:
            raise InputError(f"{job} has no default batch size; pass default_bs= to Job")
        replay = self._replay(job, beta_knob, eta_knob)
        return simulate_group(replay, group_df)

    def _profile_power_limit(self, job: Job, batch_size: int, eta_knob: float) -> dict:
        """Cost (J) of one epoch of ``batch_size`` at every power limit, highest limit first."""
        return profile_costs(self._model(job, eta_knob), batch_size)

    def _profile_batch_size_range(self, job: Job) -> list[int]:
        """The job's batch sizes present in both traces."""
        return self._model(job).batch_sizes

    def _log(self, message: str) -> None:
        if self.verbose:
            logger.info("[Simulator] %s", message)


def _as_trace(trace: str | Path | pd.DataFrame, name: str):
    """A trace argument as the loaders take it, or a one-line error naming the argument."""
    import pandas as pd

    if isinstance(trace, str | Path | pd.DataFrame):
        return trace
    raise InputError(f"{name} must be a CSV path or a DataFrame, got {type(trace).__name__}")
