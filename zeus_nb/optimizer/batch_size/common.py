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

import math
import re
from dataclasses import dataclass
from typing import Any

from zeus_nb.errors import InputError
from zeus_nb.inputs.validate import (
    COUNTER_PERIOD,
    DURATION,
    ENERGY,
    POWER_LIMIT,
    Quantity,
    integer,
    number,
)
from zeus_nb.optimizer.batch_size.exceptions import JobSpecError
from zeus_nb.optimizer.records import Record

#: A job's max power: the sum of its GPUs' maximum limits (as the store keeps it).
JOB_MAX_POWER = Quantity(
    "max_power (all the job's GPUs)", "W", 1.0, 2e6, open_low=True, mistakes=POWER_LIMIT.mistakes
)

# Zeus's server routes, served by zeus_nb.optimizer.batch_size.server.router.
REGISTER_JOB_URL = "/jobs"
DELETE_JOB_URL = "/jobs"
GET_NEXT_BATCH_SIZE_URL = "/jobs/batch_size"
REPORT_RESULT_URL = "/report"
REPORT_END_URL = "/trials"


#: Longest job id (and prefix, model name): an id travels in every URL's query string and in
#: every row of the job; 50 MB ids once filled a database (docs/batch_size_optimizer.md).
MAX_ID_LENGTH = 256
#: Most batch sizes one job may list (each is an arm of the bandit).
MAX_BATCH_SIZES = 1024
MAX_EPOCHS = 10**6
MAX_TRIALS = 2**31 - 1
MAX_SEED = 2**32 - 1
#: A report's time and energy, per :mod:`zeus_nb.inputs.validate`'s ranges (0 is a run that
#: failed before it started); a metric or prior is any finite number.
_TIME = Quantity("time", "s", 0.0, DURATION.high)
_ENERGY = ENERGY
_PRECISION = Quantity("prior precision", "", 0.0, 1e300)
_ETA = Quantity("eta_knob", "", 0.0, 1.0)
_BETA = Quantity("beta_knob", "", 0.0, 1e300, open_low=True)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _fail(e: InputError) -> JobSpecError:
    return JobSpecError(str(e))


def _real(name: str, value: Any, quantity: Quantity | None = None) -> float:
    """A finite float in ``quantity``'s range: no bool, no text, no NaN or infinity."""
    try:
        return number(value, name, quantity, text_ok=False)
    except InputError as e:
        raise _fail(e) from None


def _whole(name: str, value: Any, low: int = 1, high: int = 10**7) -> int:
    """``value`` as an int in ``[low, high]`` (NumPy's and ``64.0`` included, bool not)."""
    try:
        return integer(value, name, low, high, text_ok=False)
    except InputError as e:
        raise _fail(e) from None


def _flag(name: str, value: Any) -> bool:
    if isinstance(value, bool) or getattr(getattr(value, "dtype", None), "kind", "") == "b":
        return bool(value)
    raise JobSpecError(f"{name}: {_short(value)} is not true or false")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_id(name: str, value: Any, limit: int = MAX_ID_LENGTH) -> str:
    """A job id (or prefix, or GPU model): text of 1 to ``limit`` characters that UTF-8 can
    store (no lone surrogate) and without control characters, so every database and URL
    keeps it as given."""
    if not isinstance(value, str):
        raise JobSpecError(f"{name}: {_short(value)} is not text")
    if not value:
        raise JobSpecError(f"{name} is empty; give a name")
    if len(value) > limit:
        raise JobSpecError(
            f"{name} is {len(value)} characters long ({_short(value)}); at most {limit} are allowed"
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise JobSpecError(
            f"{name} {_short(value)} holds a lone surrogate, which no database stores; give "
            "valid Unicode text"
        ) from None
    if _CONTROL.search(value):
        raise JobSpecError(f"{name} {_short(value)} holds a control character; remove it")
    return value


def _batch_sizes(value: Any) -> list[int]:
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise JobSpecError(f"batch_sizes: {_short(value)} is not a list of batch sizes")
    if not value:
        raise JobSpecError(f"batch_sizes = {value!r} is empty; list at least one")
    if len(value) > MAX_BATCH_SIZES:
        raise JobSpecError(f"batch_sizes lists {len(value)}; at most {MAX_BATCH_SIZES} are allowed")
    sizes = [_whole(f"batch_sizes[{i}]", b) for i, b in enumerate(value)]
    if len(set(sizes)) != len(sizes):
        raise JobSpecError(f"batch_sizes {sizes} repeat a batch size; list each once")
    return sorted(sizes)


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
        # One check for Python callers and the server's HTTP bodies alike (strict types:
        # true is no batch size, "0.5" no knob; finite numbers; bounded sizes).
        if self.job_id is not None:
            self.job_id = check_id("job_id", self.job_id)
        self.job_id_prefix = check_id("job_id_prefix", self.job_id_prefix, MAX_ID_LENGTH - 9)
        self.batch_sizes = _batch_sizes(self.batch_sizes)
        self.default_batch_size = _whole("default_batch_size", self.default_batch_size)
        if self.default_batch_size not in self.batch_sizes:
            raise JobSpecError(
                f"default_batch_size {self.default_batch_size} is not in batch_sizes "
                f"{self.batch_sizes}"
            )
        self.eta_knob = _real("eta_knob", self.eta_knob, _ETA)
        if self.beta_knob is not None:
            try:
                self.beta_knob = number(self.beta_knob, "beta_knob", _BETA, text_ok=False)
            except InputError as e:
                raise JobSpecError(f"{e}; beta_knob=None turns early stopping off") from None
        self.target_metric = _real("target_metric", self.target_metric)
        self.higher_is_better_metric = _flag(
            "higher_is_better_metric", self.higher_is_better_metric
        )
        self.max_epochs = _whole("max_epochs", self.max_epochs, 1, MAX_EPOCHS)
        self.num_pruning_rounds = _whole("num_pruning_rounds", self.num_pruning_rounds, 0, 1000)
        self.window_size = _whole("window_size", self.window_size, 0, 10**9)
        self.mab_prior_mean = _real("mab_prior_mean", self.mab_prior_mean)
        self.mab_prior_precision = _real(
            "mab_prior_precision (0: a flat prior)", self.mab_prior_precision, _PRECISION
        )
        self.mab_num_explorations = _whole(
            "mab_num_explorations", self.mab_num_explorations, 0, MAX_EPOCHS
        )
        if self.mab_seed is not None:
            self.mab_seed = _whole("mab_seed", self.mab_seed, 0, MAX_SEED)


@dataclass(kw_only=True)
class GpuConfig(Record):
    """The GPUs a job trains on: max power (W, all GPUs together), how many, which model."""

    max_power: float
    number_of_gpus: int
    gpu_model: str

    def _check(self) -> None:
        self.max_power = _real("max_power", self.max_power, JOB_MAX_POWER)
        self.number_of_gpus = _whole("number_of_gpus", self.number_of_gpus, 1, 10**5)
        # The store keeps the job's max_power without its GPU count (so up to 2 MW); here the
        # count is known, and each GPU's share must be a power limit: mW is caught.
        share = self.max_power / self.number_of_gpus
        if not POWER_LIMIT.low < share <= POWER_LIMIT.high:
            hint = POWER_LIMIT.likely_unit(share) or "give the GPUs' maximum limits summed, in W"
            raise JobSpecError(
                f"max_power {self.max_power:g} W over {self.number_of_gpus} GPU(s) is "
                f"{share:g} W per GPU, outside {POWER_LIMIT.describe()}; {hint}"
            )
        self.gpu_model = check_id("gpu_model", self.gpu_model)


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

    def _check(self) -> None:
        self.job_id = check_id("job_id", self.job_id)
        self.batch_size = _whole("batch_size", self.batch_size)
        self.trial_number = _whole("trial_number", self.trial_number, 1, MAX_TRIALS)


@dataclass(kw_only=True)
class TrainingResult(TrialId):
    """A run's totals so far: seconds, joules, the last metric and the epochs done."""

    time: float
    energy: float
    metric: float
    current_epoch: int

    def _check(self) -> None:
        # Alone, each number is only checked for type and range; energy over time against the
        # job's GPUs is :func:`plausible_report`'s, which knows the job.
        self.time = _real("time", self.time, _TIME)
        self.energy = _real("energy", self.energy, _ENERGY)
        self.metric = _real("metric", self.metric)
        self.current_epoch = _whole("current_epoch", self.current_epoch, 0, MAX_EPOCHS)


def plausible_report(result: TrainingResult, job: GpuConfig) -> None:
    """A report's energy over time is a power the job's GPUs can draw.

    The job's ``max_power`` sums its GPUs' maximum limits; a run draws at most 1.5x that on
    average (a limit is enforced over about a second), plus one update of the energy counter
    (:data:`~zeus_nb.inputs.validate.COUNTER_PERIOD`) at that power: 1e7 J in 10 s on one GPU is
    a unit mistake, never a run that reached its target.
    """
    cap = 1.5 * job.max_power
    if result.energy > cap * (result.time + COUNTER_PERIOD):
        watts = result.energy / result.time if result.time > 0 else math.inf
        raise JobSpecError(
            f"the report of trial {result.trial_number} of job {result.job_id!r}: "
            f"{result.energy:g} J over {result.time:g} s is {watts:.4g} W on average, more than "
            f"1.5x the job's max_power {job.max_power:g} W ({job.number_of_gpus} GPU(s)); "
            "report the run's seconds and joules (check the units)"
        )


@dataclass(kw_only=True)
class ReportResponse(Record):
    """The verdict after an epoch: stop or go on, and whether the run reached its target."""

    stop_train: bool
    converged: bool
    message: str


__all__ = [
    "MAX_ID_LENGTH",
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
    "check_id",
    "plausible_report",
]
