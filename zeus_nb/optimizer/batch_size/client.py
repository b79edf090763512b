"""Zeus's in-training call shape for the batch-size optimizer, reading the store directly.

Zeus's recurring-job examples talk to a batch-size optimizer *server*::

    bso = BatchSizeOptimizer(monitor=ZeusMonitor(...), server_url=..., job=JobSpec(...), rank=0)
    batch_size = bso.get_batch_size()
    bso.on_train_begin()
    for epoch in ...:
        train_one_epoch(batch_size)
        bso.on_evaluate(validation_metric)   # raises TrainFailError to stop a hopeless run

zeus-nb has no server: ``server_url`` is the store itself (``sqlite:///PATH`` or
``postgresql://...``, see :mod:`zeus_nb.optimizer.batch_size.store_url`), so the examples run
with their imports changed. Each recurrence measures itself with the monitor and reports its
own result when it reaches the target, when its cost passes the early-stopping threshold, or
at ``max_epochs``.

Data-parallel runs: every rank makes the object with a monitor over its own GPUs and calls the
same methods. When ``torch.distributed`` is initialized, the job's time is its slowest rank's
and its energy (and max power) every rank's together; rank 0 alone reads and writes the store
and broadcasts the batch size and the stop decision, so all ranks stop together.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

from zeus_nb.errors import InputError, ZeusNbError
from zeus_nb.optimizer.batch_size.store import JobSpec as StoreJobSpec
from zeus_nb.utils.framework import all_sum, initialized_dist, reduce_time_energy

log = logging.getLogger(__name__)

WINDOW = "__zeus_nb_bso"


class TrainFailError(ZeusNbError):
    """This recurrence will not reach the target (too costly, or out of epochs): stop it.

    It has been reported to the store; the next recurrence tries another batch size.
    """


class OperationOrderError(ZeusNbError):
    """The optimizer's methods were called out of order (get_batch_size comes first)."""


@dataclass
class TrainingJobSpec:
    """A recurring job as Zeus's examples describe it (same field names).

    The job's state is kept under ``job_id``, or ``job_id_prefix`` when no id is given (every
    recurrence of a job must use the same one). ``beta_knob=None`` turns early stopping off.
    ``window_size`` > 0 makes each batch size learn from its last runs only; ``mab_seed`` seeds
    the Thompson draws. Zeus's ``mab_prior_*`` and ``mab_num_explorations`` are accepted for
    compatibility; zeus-nb's bandit has its own prior.
    """

    job_id_prefix: str
    batch_sizes: list[int]
    default_batch_size: int
    job_id: str | None = None
    eta_knob: float = 0.5
    beta_knob: float | None = 2.0
    target_metric: float = 0.50
    higher_is_better_metric: bool = True
    max_epochs: int = 100
    num_pruning_rounds: int = 2
    window_size: int = 0
    mab_prior_mean: float = 0.0
    mab_prior_precision: float = 0.0
    mab_num_explorations: int = 2
    mab_seed: int | None = None
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.job_id is not None and not self.job_id.startswith(self.job_id_prefix):
            raise InputError(
                f"job_id {self.job_id!r} must start with job_id_prefix {self.job_id_prefix!r}"
            )
        if self.max_epochs < 1:
            raise InputError(f"max_epochs must be >= 1, got {self.max_epochs}")

    @property
    def name(self) -> str:
        return self.job_id or self.job_id_prefix

    def store_spec(self, max_power: float) -> StoreJobSpec:
        """The bandit settings kept in the store (the same for every recurrence)."""
        return StoreJobSpec(
            name=self.name,
            batch_sizes=tuple(int(b) for b in self.batch_sizes),
            default_batch_size=int(self.default_batch_size),
            eta=float(self.eta_knob),
            beta=math.inf if self.beta_knob is None else float(self.beta_knob),
            max_power=float(max_power),
            seed=int(self.mab_seed or 0),
            pruning_rounds=int(self.num_pruning_rounds),
            window=int(self.window_size),
        )


def _from_rank0(value: Any) -> Any:
    dist = initialized_dist()
    if dist is None:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


class TrainingBatchSizeOptimizer:
    """One recurrence of a job, driven from inside its training script.

    Args:
        monitor: a :class:`~zeus_nb.monitor.ZeusMonitor` over all and only the GPUs this
            process trains on; it measures the run. Max power for the cost is the sum of the
            job's GPUs' maximum power limits.
        server_url: where the job's state lives: a SQLite path or ``sqlite:///PATH``, or
            ``postgresql://USER:PASSWORD@HOST:PORT/DATABASE`` (``http(s)://`` is refused).
        job: a :class:`TrainingJobSpec` (Zeus's ``JobSpec`` fields).
        rank: this process's data-parallel rank; only rank 0 touches the store.
    """

    def __init__(self, monitor, server_url: Any, job: TrainingJobSpec, rank: int = 0) -> None:
        from zeus_nb.optimizer.batch_size.optimizer import BatchSizeOptimizer as Recurrences
        from zeus_nb.optimizer.batch_size.store_url import open_store

        if not isinstance(job, TrainingJobSpec):
            raise TypeError(
                f"job= must be a zeus_nb.optimizer.batch_size.common.JobSpec (Zeus's fields: "
                f"job_id_prefix, batch_sizes, default_batch_size, target_metric, max_epochs...), "
                f"not {type(job).__name__}"
            )
        self.monitor = monitor
        self.job = job
        self.rank = int(rank)
        self.current_batch_size = 0
        self.epoch = 0
        self.time = 0.0  # the job's, over all ranks
        self.energy = 0.0
        self._local = (0.0, 0.0)  # this rank's time and energy
        self.finished = False
        self._bso = None
        local_max = sum(g.power_limit_constraints()[1] for g in monitor.gpus)
        max_power = all_sum([local_max])[0]  # every rank takes part
        if self.rank == 0:
            store = open_store(server_url)
            self._bso = Recurrences(job.store_spec(max_power), store)

    @property
    def optimizer(self):
        """The recurrence-level :class:`~zeus_nb.optimizer.batch_size.BatchSizeOptimizer`."""
        return self._bso

    def get_batch_size(self) -> int:
        """The batch size this recurrence trains with (the same on every call and rank)."""
        if self.current_batch_size:
            return self.current_batch_size
        if self.rank != 0 and initialized_dist() is None:
            raise OperationOrderError(
                "only rank 0 asks for the batch size: call get_batch_size() on rank 0 and "
                "broadcast it, or initialize torch.distributed so this object broadcasts it"
            )
        bs = self._bso.next_batch_size() if self._bso is not None else None
        self.current_batch_size = int(_from_rank0(bs))
        log.info("batch-size optimizer: job %s trains at batch size %d", self.job.name, bs)
        return self.current_batch_size

    def on_train_begin(self) -> None:
        """Start measuring the run (call once, before the first epoch)."""
        self.finished = False
        self.epoch, self.time, self.energy = 0, 0.0, 0.0
        self._local = (0.0, 0.0)
        self.monitor.begin_window(WINDOW, restart=True)

    def _reached(self, metric: float) -> bool:
        t = self.job.target_metric
        return metric >= t if self.job.higher_is_better_metric else metric <= t

    def on_evaluate(self, metric: float) -> None:
        """Account one epoch; report and stop the run when it is over.

        Returns normally while training should go on and once the target is reached (the run
        is reported as a success). Raises :class:`TrainFailError` after reporting a failure:
        the cost passed beta x the best cost so far, or ``max_epochs`` ran out.
        """
        if not self.current_batch_size:
            raise OperationOrderError("call get_batch_size() before on_evaluate()")
        if self.finished:
            return
        self.epoch += 1
        m = self.monitor.end_window(WINDOW)
        t, e = self._local[0] + m.time, self._local[1] + m.total_energy
        self._local = (t, e)
        self.time, self.energy, _ = reduce_time_energy(t, e, len(self.monitor.gpus))
        verdict = None
        if self._bso is not None:
            verdict = self._verdict(float(metric))
            if verdict is not None:
                reached, _ = verdict
                self._bso.report(
                    self.current_batch_size, time=self.time, energy=self.energy, reached=reached
                )
        verdict = _from_rank0(verdict)
        if verdict is None:
            self.monitor.begin_window(WINDOW, restart=True)
            return
        self.finished = True
        reached, why = verdict
        if not reached:
            raise TrainFailError(
                f"job {self.job.name!r} at batch size {self.current_batch_size}: {why}; the "
                "run is reported and this recurrence stops here (the next one picks again)"
            )
        log.info("job %s reached its target at epoch %d", self.job.name, self.epoch)

    def _verdict(self, metric: float) -> tuple[bool, str] | None:
        """(reached, why) when the run is over, else None."""
        if self._reached(metric):
            return True, "reached the target"
        if self._bso.should_stop(time=self.time, energy=self.energy):
            cost = self._bso.cost(self.time, self.energy)
            return False, (
                f"cost {cost:.4g} J passed the early-stopping threshold "
                f"{self._bso.cost_threshold:.4g} J (beta x the best cost so far)"
            )
        if self.epoch >= self.job.max_epochs:
            return False, f"the target was not reached in max_epochs={self.job.max_epochs}"
        return None


# Zeus's names, so its examples run with ``zeus`` replaced by ``zeus_nb`` in their imports.
BatchSizeOptimizer = TrainingBatchSizeOptimizer
ZeusBSOTrainFailError = TrainFailError
