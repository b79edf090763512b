"""The batch-size optimizer's job and trial records, with Zeus's names and fields.

They are what Zeus's client and optimizer server exchange, and so do zeus-nb's: the client
(:mod:`zeus_nb.optimizer.batch_size.client`) sends them to the server
(:mod:`zeus_nb.optimizer.batch_size.server`) as JSON, or uses them with a store directly, so a
script that builds a ``JobSpec`` runs unchanged. They are keyword-only dataclasses that check
their values on construction (a :class:`~zeus_nb.optimizer.batch_size.exceptions.JobSpecError`,
also a ``ValueError``, names the field) and offer the pydantic-v1 methods Zeus code calls on
them (:class:`~zeus_nb.optimizer.records.Record`); numbers may be NumPy scalars, as pydantic
accepts them.

The recurrence-level settings kept in the store are another class,
:class:`zeus_nb.optimizer.batch_size.store.JobSpec`.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

from zeus_nb.inputs.validate import POWER_LIMIT
from zeus_nb.optimizer.batch_size.exceptions import JobSpecError
from zeus_nb.optimizer.records import Record

# Zeus's server routes, served by zeus_nb.optimizer.batch_size.server.router.
REGISTER_JOB_URL = "/jobs"
DELETE_JOB_URL = "/jobs"
GET_NEXT_BATCH_SIZE_URL = "/jobs/batch_size"
REPORT_RESULT_URL = "/report"
REPORT_END_URL = "/trials"


def _positive(name: str, value: Any, strict: bool = True) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise JobSpecError(f"{name} must be a number, got {value!r}")
    if not value >= 0 or (strict and value == 0):
        raise JobSpecError(f"{name} must be {'> 0' if strict else '>= 0'}, got {value!r}")


def _whole(name: str, value: Any, strict: bool = True) -> int:
    """``value`` as an int: a positive (or non-negative) whole number, NumPy's included."""
    _positive(name, value, strict)
    if int(value) != value:
        raise JobSpecError(f"{name} must be a whole number, got {value!r}")
    return int(value)


@dataclass(kw_only=True)
class JobParams(Record):
    """A recurring job's settings (Zeus's fields and defaults).

    ``eta_knob`` weighs energy against time in the cost; ``beta_knob`` stops a run whose cost
    passes beta x the cheapest successful run (None: never); a run succeeds when its metric
    reaches ``target_metric`` (``higher_is_better_metric`` says which way) within
    ``max_epochs``. ``num_pruning_rounds`` and ``window_size`` drive the bandit; the ``mab_*``
    knobs are Zeus's (see ``docs/batch_size_optimizer.md`` for which zeus-nb uses).
    """

    job_id: str
    job_id_prefix: str
    batch_sizes: list[int]
    default_batch_size: int
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

    def _check(self) -> None:
        if not self.batch_sizes:
            raise JobSpecError(f"batch_sizes = {self.batch_sizes!r} is empty; list at least one")
        self.batch_sizes = sorted(_whole("every batch size", b) for b in self.batch_sizes)
        self.default_batch_size = _whole("default_batch_size", self.default_batch_size)
        if self.default_batch_size not in self.batch_sizes:
            raise JobSpecError(
                f"default_batch_size {self.default_batch_size} is not in batch_sizes "
                f"{self.batch_sizes}"
            )
        if not 0 <= self.eta_knob <= 1:
            raise JobSpecError(f"eta_knob must be in [0, 1], got {self.eta_knob}")
        if self.beta_knob is not None and not self.beta_knob > 0:
            raise JobSpecError(
                f"beta_knob must be > 0, got {self.beta_knob}; beta_knob=None turns early "
                "stopping off"
            )
        self.max_epochs = _whole("max_epochs", self.max_epochs)
        self.num_pruning_rounds = _whole("num_pruning_rounds", self.num_pruning_rounds, False)
        self.window_size = _whole("window_size", self.window_size, strict=False)
        self.mab_num_explorations = _whole("mab_num_explorations", self.mab_num_explorations, False)


@dataclass(kw_only=True)
class GpuConfig(Record):
    """The GPUs a job trains on: max power (W, all GPUs together), how many, which model."""

    max_power: float
    number_of_gpus: int
    gpu_model: str

    def _check(self) -> None:
        _positive("max_power", self.max_power)
        self.number_of_gpus = _whole("number_of_gpus", self.number_of_gpus)
        # The store keeps the job's max_power without its GPU count (so up to 2 MW); here the
        # count is known, and each GPU's share must be a power limit: mW is caught.
        share = self.max_power / self.number_of_gpus
        if not POWER_LIMIT.low < share <= POWER_LIMIT.high:
            hint = POWER_LIMIT.likely_unit(share) or "give the GPUs' maximum limits summed, in W"
            raise JobSpecError(
                f"max_power {self.max_power:g} W over {self.number_of_gpus} GPU(s) is "
                f"{share:g} W per GPU, outside {POWER_LIMIT.describe()}; {hint}"
            )
        if not self.gpu_model:
            raise JobSpecError("gpu_model must name the GPU model, got an empty string")


@dataclass(kw_only=True)
class JobSpec(JobParams):
    """What a training script passes: ``job_id`` may be None (a new job is made per run).

    With ``job_id`` None each run registers a fresh job named ``<job_id_prefix>-<8 hex>`` and
    logs it; pass that id (e.g. through ``$ZEUS_JOB_ID``) so later runs continue its learning.
    A given ``job_id`` must start with ``job_id_prefix``.
    """

    job_id: str | None = None

    def _check(self) -> None:
        if self.job_id is not None and not self.job_id.startswith(self.job_id_prefix):
            raise JobSpecError(
                f"job_id {self.job_id!r} does not start with job_id_prefix "
                f"{self.job_id_prefix!r}; give an id with the prefix, or job_id=None"
            )


@dataclass(kw_only=True)
class JobSpecFromClient(JobSpec, GpuConfig):
    """A ``JobSpec`` plus the GPUs it trains on (``job_id`` still optional)."""


@dataclass(kw_only=True)
class CreatedJob(JobParams, GpuConfig):
    """A registered job: ``job_id`` is set."""


@dataclass(kw_only=True)
class TrialId(Record):
    """One run of a job: the batch size it trains with and its trial number (1, 2, ...)."""

    job_id: str
    batch_size: int
    trial_number: int


@dataclass(kw_only=True)
class TrainingResult(TrialId):
    """A run's totals so far: seconds, joules, the last metric and the epochs done."""

    time: float
    energy: float
    metric: float
    current_epoch: int


@dataclass(kw_only=True)
class ReportResponse(Record):
    """The verdict after an epoch: stop or go on, and whether the run reached its target."""

    stop_train: bool
    converged: bool
    message: str


__all__ = [
    "DELETE_JOB_URL",
    "GET_NEXT_BATCH_SIZE_URL",
    "REGISTER_JOB_URL",
    "REPORT_END_URL",
    "REPORT_RESULT_URL",
    "CreatedJob",
    "GpuConfig",
    "JobParams",
    "JobSpec",
    "JobSpecFromClient",
    "ReportResponse",
    "TrainingResult",
    "TrialId",
]
