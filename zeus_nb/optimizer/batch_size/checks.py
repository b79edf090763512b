"""The batch-size optimizer's inputs checked through their declared schemas.

A job's settings (new, or read back from a store), a reported run, and a row of a store each
pass :mod:`zeus_nb.inputs.kinds` (``JOB_SPEC``, ``OBSERVATION`` / ``FAILED_OBSERVATION``,
``STORED_RUN``): a batch size of 1.5, a run of 0 s that "reached the target", or a NaN
another program wrote into the store are errors naming the value, never a quietly wrong bandit.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import asdict, replace

from zeus_nb import device
from zeus_nb.errors import DeviceError, InputError, NoGPUError
from zeus_nb.inputs import check_record
from zeus_nb.inputs.kinds import FAILED_OBSERVATION, JOB_SPEC, OBSERVATION, STORED_RUN
from zeus_nb.optimizer.batch_size.store import (
    DEFAULT_EXPLORATION,
    JobSpec,
    Observation,
    StoreError,
)

log = logging.getLogger(__name__)

__all__ = [
    "checked_observation",
    "device_max_power",
    "spec_from_json",
    "stored_observation",
    "validated_spec",
    "with_max_power",
]


def validated_spec(spec: JobSpec | dict, where: str = "BatchSizeOptimizer") -> JobSpec:
    """``spec`` checked through :data:`~zeus_nb.inputs.kinds.JOB_SPEC` (types and ranges: a
    batch size of 1.5 is an error, never 1), with sorted, deduplicated batch sizes; the error
    names the knob."""
    d = asdict(spec) if isinstance(spec, JobSpec) else dict(spec)
    if d.get("beta") == math.inf:
        d["beta"] = None  # inf: no early stopping
    row = check_record(d, JOB_SPEC, where)
    sizes = tuple(sorted(set(row["batch_sizes"])))
    if row["default_batch_size"] not in sizes:
        raise InputError(
            f"{where}.default_batch_size: {row['default_batch_size']} must be one of the batch "
            f"sizes {list(sizes)}"
        )
    return JobSpec(
        row["name"],
        sizes,
        row["default_batch_size"],
        row["eta"],
        math.inf if row["beta"] is None else row["beta"],
        row.get("max_power"),
        row.get("seed", 0),
        row.get("pruning_rounds", 2),
        row.get("window", 0),
        row.get("exploration", DEFAULT_EXPLORATION),
    )


def stored_observation(r: tuple, where: str) -> tuple[int, Observation]:
    """(id, observation) of a store row ``(id, batch_size, time, energy, cost, reached,
    power_limit)``, checked: a row another program (or a damaged file) wrote is named."""
    fields = ("batch_size", "time", "energy", "cost", "reached", "power_limit")
    raw = dict(zip(fields, r[1:], strict=True))
    if isinstance(raw["reached"], int):
        raw["reached"] = bool(raw["reached"])  # SQLite keeps booleans as 0 and 1
    try:
        row = check_record({k: v for k, v in raw.items() if v is not None}, STORED_RUN, where)
    except InputError as e:
        raise StoreError(f"{e}; the store is damaged: delete the job to start it over") from None
    return int(r[0]), Observation(
        row["batch_size"], row["time"], row["energy"], row["cost"], row["reached"],
        row.get("power_limit"),
    )  # fmt: skip


def checked_observation(raw: dict, where: str) -> Observation:
    """A run's numbers through :data:`~zeus_nb.inputs.kinds.OBSERVATION`.

    A run that reached the target took time and energy at a power a GPU can draw: 0 s or 0 J
    is a mistake (a run that failed before it started may report 0 s and 0 J).
    """
    schema = OBSERVATION if raw.get("reached") is not False else FAILED_OBSERVATION
    row = check_record({k: v for k, v in raw.items() if v is not None}, schema, where)
    return Observation(
        row["batch_size"],
        row["time"],
        row["energy"],
        row.get("cost", 0.0),
        row["reached"],
        row.get("power_limit"),
    )


def spec_from_json(text: str, where: str = "a stored job") -> JobSpec:
    """A job's settings from a store, checked like a new job's (a damaged row is named)."""
    try:
        d = json.loads(text)
    except (TypeError, ValueError) as e:
        raise StoreError(f"{where}: the job's settings are not JSON ({e})") from None
    try:
        return validated_spec(d if isinstance(d, dict) else {"settings": d}, where)
    except InputError as e:
        raise StoreError(f"{e}; the store is damaged: delete the job to start it over") from None


def device_max_power() -> float:
    """The current GPU's maximum power limit: what an unset ``max_power`` means."""

    return float(device.current().gpu(0).power_limit_constraints()[1])


def with_max_power(spec: JobSpec, store) -> JobSpec:
    """``spec`` with ``max_power`` resolved once, when the job is created, and stored with it.

    Left unset, it used to be looked up at each report, from the reporting process's GPU: two
    reports of identical runs on different machines then cost differently. A job the store
    knows keeps its stored value (None for jobs stored before this was resolved).
    """
    if spec.max_power is not None:
        return spec
    known = store.job(spec.name)
    if known is not None:
        return replace(spec, max_power=known.max_power)
    try:
        return replace(spec, max_power=device_max_power())
    except (NoGPUError, DeviceError) as e:
        # No GPU to ask now (or a stale one): the job stays without it, and a report that needs
        # it resolves it then (the optimizer's ``_max_power``); callers that give costs, such as
        # the paper's simulator, never do.
        log.debug("job %s: max_power left unset (%s)", spec.name, e)
        return spec
