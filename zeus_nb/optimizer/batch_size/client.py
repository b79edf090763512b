"""Zeus's in-training batch-size optimizer: through a server, or reading the store directly.

Zeus's recurring-job scripts talk to a batch-size optimizer *server*::

    bso = BatchSizeOptimizer(monitor=ZeusMonitor(...), server_url=..., job=JobSpec(...), rank=0)
    batch_size = bso.get_batch_size()
    bso.on_train_begin()
    for epoch in ...:
        train_one_epoch(batch_size)
        bso.on_evaluate(validation_metric)   # raises ZeusBSOTrainFailError to stop a hopeless run
        if bso.training_finished:
            break

``server_url`` is either

* a server's ``http://`` or ``https://`` URL (``zeus-nb bso serve`` runs one, see
  :mod:`zeus_nb.optimizer.batch_size.server`; Zeus's own server works too): every request
  goes there, as with Zeus's client; or
* a store (``sqlite:///PATH``, a path, or ``postgresql://...``, see
  :mod:`zeus_nb.optimizer.batch_size.store_url`): no server, the client does what the server
  would, in the training process, with zeus-nb's own bandit.

None means ``$ZEUS_SERVER_URL``, else ``$ZEUS_NB_BSO_STORE``, else the default SQLite file; the
empty string means ``$ZEUS_SERVER_URL``, else Zeus's literal meaning: routes relative to an
empty base URL (what Zeus's tests route to an app). Either way:

* **Jobs.** A ``job_id`` names the job; with ``job_id=None`` every run registers a fresh job
  ``<job_id_prefix>-<8 hex>`` (logged), as Zeus's server does, so pass that id next time to
  continue learning. A known job must come with the same settings.
* **Trials.** Each :meth:`BatchSizeOptimizer.get_batch_size` hands out the bandit's choice as
  the job's next trial (``trial_number`` 1, 2, ... per job, unique under concurrency). A trial
  ends when the run's verdict is reported, or as failed when the process exits before that
  (the bandit then learns nothing from it).
* **Verdicts.** After each epoch the run stops when the metric reaches the target, when its cost
  passes ``beta_knob`` x the cheapest successful run's, or at ``max_epochs``; only the first
  within the cost bound counts as converged (:func:`judge`, which the server uses too). With a
  store, the stopped run is recorded with the power limit its first GPU ended at (what a
  power-limit optimizer chose just in time).

Data-parallel runs: every rank makes the object with a monitor over its own GPUs. When
``torch.distributed`` is initialized before that, the constructor agrees on the job, the batch
size and the trial number with rank 0 (so ``get_batch_size`` answers on every rank, and Zeus's
own pattern of broadcasting them by hand works as well); each epoch the job's time is its
slowest rank's and its energy every rank's together; rank 0 alone reports and its verdict is
broadcast, so all ranks stop together. Without ``torch.distributed``, ranks > 0 talk to a
server themselves, as Zeus's client does (a result already reported by rank 0 is answered as
such), and cannot report to a store.
"""

from __future__ import annotations

import atexit
import logging
import math
import secrets
from typing import Any

from zeus_nb.callback import Callback
from zeus_nb.device import get_gpus
from zeus_nb.inputs.env import env
from zeus_nb.optimizer.batch_size.common import (
    CreatedJob,
    JobSpec,
    JobSpecFromClient,
    ReportResponse,
    TrainingResult,
    TrialId,
    plausible_report,
)
from zeus_nb.optimizer.batch_size.exceptions import (
    JobSpecError,
    ZeusBSOBadOperationError,
    ZeusBSOConfigError,
    ZeusBSOOperationOrderError,
    ZeusBSORuntimError,
    ZeusBSOTrainFailError,
)
from zeus_nb.optimizer.batch_size.optimizer import LocalBatchSizeOptimizer
from zeus_nb.optimizer.batch_size.remote import ServerConnection, server_base
from zeus_nb.optimizer.batch_size.store import JobSpec as StoreJobSpec
from zeus_nb.optimizer.batch_size.trials import FAILED, SUCCEEDED
from zeus_nb.utils.framework import all_sum, get_world_size, initialized_dist, reduce_time_energy

log = logging.getLogger(__name__)

SERVER_URL_ENV = "ZEUS_SERVER_URL"
WINDOW = "__zeus_nb_bso"


def resolve_server_url(server_url: Any) -> Any:
    """``server_url``, or ``$ZEUS_SERVER_URL`` when it is None or empty.

    None with the variable unset stays None (the default store); the empty string stays empty
    (Zeus's relative routes).
    """
    if server_url is None or server_url == "":
        from_env = env(SERVER_URL_ENV)
        return server_url if from_env is None else from_env
    return server_url


def _from_rank0(value: Any) -> Any:
    dist = initialized_dist()
    if dist is None:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def _store_spec(job: JobSpecFromClient, job_id: str) -> StoreJobSpec:
    """The bandit settings kept in the store, the same for every run of the job."""
    return StoreJobSpec(
        name=job_id,
        batch_sizes=tuple(job.batch_sizes),
        default_batch_size=int(job.default_batch_size),
        eta=float(job.eta_knob),
        beta=math.inf if job.beta_knob is None else float(job.beta_knob),
        max_power=float(job.max_power),
        seed=int(job.mab_seed or 0),
        pruning_rounds=int(job.num_pruning_rounds),
        window=int(job.window_size),
    )


class BatchSizeOptimizer(Callback):
    """One run of a recurring job, driven from inside its training script (Zeus's client).

    Args:
        monitor: a :class:`~zeus_nb.monitor.ZeusMonitor` over all and only the GPUs this
            process trains on (one GPU model); it measures the run. The cost's max power is the
            sum of the job's GPUs' maximum power limits. A monitor without zeus-nb's GPU list
            (Zeus's, or a mock of it) is read as Zeus reads it: its ``gpu_indices`` and
            :func:`zeus_nb.device.get_gpus`.
        server_url: a server's ``http(s)://`` URL or a store (see the module docstring).
        job: a :class:`~zeus_nb.optimizer.batch_size.common.JobSpec`.
        rank: this process's data-parallel rank; rank 0 asks for the batch size.
    """

    def __init__(self, monitor, server_url: Any, job: JobSpec, rank: int = 0) -> None:
        if not isinstance(job, JobSpec):
            raise TypeError(
                f"job= must be a zeus_nb.optimizer.batch_size.common.JobSpec (Zeus's fields: "
                f"job_id_prefix, batch_sizes, default_batch_size, target_metric, max_epochs...), "
                f"not {type(job).__name__}"
            )
        self.monitor = monitor
        self.server_url = resolve_server_url(server_url)
        self.rank = int(rank)
        self.cur_epoch = 0
        self.running_time = 0.0  # the job's, over all ranks
        self.consumed_energy = 0.0
        self.training_finished = False
        self.trial_number = 0
        self.current_batch_size = 0
        self._local = (0.0, 0.0)  # this rank's time and energy
        self._bso = None
        self._store = None
        base = server_base(self.server_url)
        self._server = None if base is None else ServerConnection(base)
        self._trial_open = False
        self.job_spec = self._job_spec(job)
        if self._server is None and self.rank == 0:
            from zeus_nb.optimizer.batch_size.store_url import open_store

            self._store = open_store(self.server_url)
        # Without torch.distributed a rank > 0 asks a server itself (Zeus's way), if it can
        # name the job; with it, rank 0's answers are broadcast.
        alone = initialized_dist() is None and self._server is not None and job.job_id
        self._reports = self.rank == 0 or bool(alone)
        created = self.register_job().dict() if self._reports else None
        created = _from_rank0(created)  # None: a rank > 0 outside torch.distributed
        fallback = {**self.job_spec.dict(), "job_id": self.job_spec.job_id or ""}
        self.job: CreatedJob = CreatedJob.parse_obj(created or fallback)
        if get_world_size() > 1:  # agree on the run now, so every rank knows it
            if self.rank == 0:
                self._dispatch()
            shared = _from_rank0((self.current_batch_size, self.trial_number))
            self.current_batch_size, self.trial_number = shared

    def _job_spec(self, job: JobSpec) -> JobSpecFromClient:
        gpus = getattr(self.monitor, "gpus", None)
        if gpus is None:  # a monitor without zeus-nb's GPU list: read it as Zeus does
            names, local_max, count = _device_gpus(self.monitor)
        else:
            names = sorted({g.name for g in gpus})
            local_max = sum(g.power_limit_constraints()[1] for g in gpus)
            count = len(gpus)
        if not count:
            raise ZeusBSOConfigError("the monitor measures no GPU; give it the training GPUs")
        if len(names) > 1:
            raise ZeusBSOConfigError(
                f"the batch-size optimizer needs one GPU model, the monitor has {names}"
            )
        self._gpu_count = count
        max_power, total = all_sum([local_max, count])  # every rank takes part
        return JobSpecFromClient(
            **job.dict(), max_power=max_power, number_of_gpus=int(total), gpu_model=names[0]
        )

    def register_job(self) -> CreatedJob:
        """Register the job with the server or in the store (the constructor does it), or
        check that the registered job has the same settings. Returns the job with its
        ``job_id``."""
        if self._server is not None:
            return self._server.register(self.job_spec)
        if self._store is None:
            raise ZeusBSOBadOperationError("only rank 0 registers the job in the store")
        spec = self.job_spec
        job_id = spec.job_id
        if job_id is None:
            job_id = f"{spec.job_id_prefix}-{secrets.token_hex(4)}"
            while self._store.job(job_id) is not None:
                job_id = f"{spec.job_id_prefix}-{secrets.token_hex(4)}"
            log.warning(
                "registered the new batch-size optimizer job %r; pass job_id=%r (for example "
                "through $ZEUS_JOB_ID) so later runs continue its learning",
                job_id,
                job_id,
            )
        try:
            self._bso = LocalBatchSizeOptimizer(_store_spec(spec, job_id), self._store)
        except ValueError as e:
            raise JobSpecError(f"job {job_id!r}: {e}") from e
        return CreatedJob.parse_obj({**spec.dict(), "job_id": job_id})

    @property
    def optimizer(self):
        """The recurrence-level :class:`~zeus_nb.optimizer.batch_size.BatchSizeOptimizer`
        (rank 0 with a store; None on other ranks and with a server)."""
        return self._bso

    def get_batch_size(self) -> int:
        """The batch size this run trains with (the same on every call)."""
        if self.current_batch_size:
            return self.current_batch_size
        if self.rank != 0:
            raise ZeusBSOBadOperationError(
                "only rank 0 asks for the batch size: call get_batch_size() on rank 0 and "
                "broadcast it, or initialize torch.distributed before making the optimizer so "
                "every rank gets it"
            )
        self._dispatch()
        return self.current_batch_size

    def _dispatch(self) -> None:
        """Take the bandit's choice as the job's next trial (rank 0)."""
        if self._server is not None:
            trial = self._server.next_trial(self.job.job_id)
            bs, number = trial.batch_size, trial.trial_number
        else:
            bs = self._bso.next_batch_size()
            number = None
        if bs not in self.job.batch_sizes:
            raise ZeusBSORuntimError(
                f"the optimizer proposed batch size {bs}, not one of the job's"
            )
        self.trial_number = self._store.new_trial(self.job.job_id, bs) if number is None else number
        self.current_batch_size = bs
        self.cur_epoch = 0
        self._trial_open = True
        atexit.register(self._end_trial_at_exit)
        log.info(
            "batch-size optimizer: job %s trial %d trains at batch size %d",
            self.job.job_id,
            self.trial_number,
            bs,
        )

    def _end_trial_at_exit(self) -> None:
        """A run that exits before its verdict leaves a failed trial and no observation."""
        if not self._trial_open:
            return
        self._trial_open = False
        if self._server is not None:
            trial = TrialId(
                job_id=self.job.job_id,
                batch_size=self.current_batch_size,
                trial_number=self.trial_number,
            )
            try:
                self._server.end_trial(trial)
            except ZeusBSORuntimError as e:  # at exit there is nobody left to tell but the log
                log.warning("could not end trial %d: %s", self.trial_number, e)
        else:
            self._store.end_trial(self.job.job_id, self.trial_number, FAILED)

    def on_train_begin(self) -> None:
        """Start measuring the run (call once, before the first epoch)."""
        self.training_finished = False
        self.cur_epoch, self.running_time, self.consumed_energy = 0, 0.0, 0.0
        self._local = (0.0, 0.0)
        self.monitor.begin_window(WINDOW, restart=True)

    def on_evaluate(self, metric: float) -> None:
        """Account one epoch; report and stop the run when it is over.

        Returns normally while training should go on and once the target is reached (the run
        is reported as converged; ``training_finished`` turns True). Raises
        :class:`~zeus_nb.optimizer.batch_size.exceptions.ZeusBSOTrainFailError` after
        reporting a run that passed the cost bound or ran out of epochs.
        """
        if not self.current_batch_size:
            raise ZeusBSOOperationOrderError("call get_batch_size() before on_evaluate()")
        if self.training_finished:
            return
        try:
            value = float(metric)  # a Python, NumPy or PyTorch scalar
        except (TypeError, ValueError):
            value = None
        if isinstance(metric, (bool, str, bytes)) or value is None:
            raise JobSpecError(
                f"on_evaluate(metric={metric!r}): the metric must be a number (the validation "
                "metric of this epoch)"
            )
        if not math.isfinite(value):
            raise JobSpecError(
                f"on_evaluate(metric={metric!r}): the metric is not finite, so the run cannot "
                "be judged against target_metric; nothing was reported. Check the evaluation "
                "(a diverged loss?) and pass a finite number"
            )
        self.cur_epoch += 1
        m = self.monitor.end_window(WINDOW)
        t, e = self._local[0] + m.time, self._local[1] + m.total_energy
        self._local = (t, e)
        self.running_time, self.consumed_energy, _ = reduce_time_energy(t, e, self._gpu_count)
        alone = initialized_dist() is None
        if not self._reports and alone:
            why = "a store" if self._server is None else "the server without a job_id"
            raise ZeusBSOBadOperationError(
                f"rank {self.rank} cannot report to {why} outside torch.distributed: "
                "initialize it before making the optimizer, so rank 0 reports for every rank"
            )
        verdict = self._report(float(metric)).dict() if self._reports else None
        response = ReportResponse.parse_obj(verdict if alone else _from_rank0(verdict))
        if not response.stop_train:
            self.monitor.begin_window(WINDOW, restart=True)
            return
        self.training_finished = True
        if not response.converged:
            raise ZeusBSOTrainFailError(
                f"job {self.job.job_id!r} at batch size {self.current_batch_size}: "
                f"{response.message}; the run is reported and this recurrence stops here (the "
                "next one picks again)"
            )
        log.info("job %s reached its target at epoch %d", self.job.job_id, self.cur_epoch)

    def _report(self, metric: float) -> ReportResponse:
        """Judge the run after this epoch; a stopped run is recorded (once)."""
        result = TrainingResult(
            job_id=self.job.job_id,
            batch_size=self.current_batch_size,
            trial_number=self.trial_number,
            time=self.running_time,
            energy=self.consumed_energy,
            metric=metric,
            current_epoch=self.cur_epoch,
        )
        if self._server is not None:
            response = self._server.report(result)
        else:
            response = judge(self._bso, self.job, result)
        if not (response.stop_train and self._trial_open):
            return response
        self._trial_open = False
        atexit.unregister(self._end_trial_at_exit)
        if self._server is None:
            self._bso.report(
                result.batch_size,
                time=result.time,
                energy=result.energy,
                reached=response.converged,
                power_limit=float(self.monitor.gpus[0].get_power_limit()),
            )
            self._store.end_trial(
                self.job.job_id, self.trial_number, SUCCEEDED, self._bso.last_observation_id
            )
        return response

    # zeus-nb's earlier names for the same state
    @property
    def finished(self) -> bool:
        return self.training_finished

    @property
    def time(self) -> float:
        return self.running_time

    @property
    def energy(self) -> float:
        return self.consumed_energy

    @property
    def epoch(self) -> int:
        return self.cur_epoch


def _device_gpus(monitor) -> tuple[list[str], float, int]:
    """(GPU model names, summed maximum power limit in W, count) of ``monitor.gpu_indices``,
    from :func:`zeus_nb.device.get_gpus`, as Zeus's client reads them."""

    indices = list(getattr(monitor, "gpu_indices", None) or [])
    if not indices:
        return [], 0.0, 0
    gpus = get_gpus(ensure_homogeneous=True)
    names = sorted({gpus.get_name(i) for i in indices})
    watts = sum(gpus.get_power_management_limit_constraints(i)[1] for i in indices) / 1000.0
    return names, watts, len(indices)


def judge(bso, job: CreatedJob, result: TrainingResult) -> ReportResponse:
    """Zeus's verdict on a run after an epoch: go on, or stop (converged or not).

    The run goes on while its cost is within ``beta_knob`` x the cheapest successful run's,
    its metric has not reached the target and epochs are left. It converged if it stopped at
    the target within the cost bound. A report whose energy over time no GPU of the job draws
    is refused first (:func:`~zeus_nb.optimizer.batch_size.common.plausible_report`), by the
    server and by a client that judges against a store alike.
    """
    plausible_report(result, job)
    cost = bso.cost(result.time, result.energy)
    bound = bso.cost_threshold
    within = cost <= bound
    target = job.target_metric
    reached = result.metric >= target if job.higher_is_better_metric else result.metric <= target
    if within and not reached and result.current_epoch < job.max_epochs:
        return ReportResponse(stop_train=False, converged=False, message="keep training")
    if reached and within:
        message = "reached the target"
    elif not within:
        message = (
            f"cost {cost:.4g} J passed the early-stopping threshold {bound:.4g} J "
            "(beta_knob x the best cost so far)"
        )
    else:
        message = f"the target was not reached in max_epochs={job.max_epochs}"
    return ReportResponse(stop_train=True, converged=reached and within, message=message)


# zeus-nb's earlier names
TrainingBatchSizeOptimizer = BatchSizeOptimizer
TrainingJobSpec = JobSpec
TrainFailError = ZeusBSOTrainFailError
OperationOrderError = ZeusBSOOperationOrderError
