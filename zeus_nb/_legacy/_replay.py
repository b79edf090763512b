"""One simulated job on the traces: knobs from the pluggable policies, runs from zeus-nb's model.

:class:`JobReplay` is what both run methods of :class:`zeus_nb._legacy.simulate.Simulator`
share. It asks the batch-size and power-limit policies for the knobs of each run (profiling the
power limits the first time a batch size runs) and replays the run under whole-epoch accounting
with :func:`zeus_nb.optimizer.batch_size.simulator.run_by_epochs`, on a
:class:`~zeus_nb.optimizer.batch_size.simulator.WorkloadModel` built from the job's row of the
traces: the same model, run rule and random draws as ``simulate(..., accounting="epoch")``.
"""

from __future__ import annotations

import logging
import math
from copy import deepcopy
from dataclasses import dataclass

from zeus_nb._legacy.job import Job
from zeus_nb._legacy.policy.interface import BatchSizeOptimizer, PowerLimitOptimizer
from zeus_nb.data.traces import WORKLOADS, Workload, name_key
from zeus_nb.errors import InputError, SimulationError
from zeus_nb.optimizer.batch_size.simulator import (
    WorkloadModel,
    run_by_epochs,
    trace_rng,
)
from zeus_nb.tradeoff import zeus_cost

MAX_TRIES = 20  # runs per recurrence before the target counts as unreachable


@dataclass
class HistoryEntry:
    """One simulated run: batch size, power limit (W), energy (J), reached, time (s)."""

    bs: int
    pl: int
    energy: float
    reached: bool
    time: float


logger = logging.getLogger("zeus_nb._legacy.simulate")


def job_workload(job: Job) -> Workload:
    """The :class:`~zeus_nb.data.traces.Workload` a :class:`Job` describes.

    The sample count (which only step-wise accounting needs) is the traced dataset's when known.
    Without a default batch size the model falls back to the smallest traced one; the batch-size
    policy decides what a missing ``default_bs`` means.
    """
    known = WORKLOADS.get(name_key(job.dataset))
    return Workload(
        job.dataset,
        job.network,
        job.optimizer.lower(),
        float(job.target_metric),
        int(job.max_epochs),
        int(job.default_bs or 0),
        known.num_samples if known else 1,
    )


def watts(limit: float) -> int | float:
    """A power limit as the traces write it (an int when it is whole, as Zeus hands them out)."""
    return int(limit) if float(limit).is_integer() else float(limit)


def profile_costs(model: WorkloadModel, batch_size: int) -> dict[int | float, float]:
    """Cost (J) of one epoch at each power limit of ``batch_size``, highest limit first."""
    arm = model.arms[batch_size]
    costs = model.epoch_cost(batch_size)
    order = sorted(range(arm.power_limits.size), key=lambda i: -arm.power_limits[i])
    return {watts(arm.power_limits[i]): float(costs[i]) for i in order}


class JobReplay:
    """Private copies of the policies, the run-sampling generator and the job's model."""

    def __init__(
        self,
        job: Job,
        model: WorkloadModel,
        bso: BatchSizeOptimizer,
        plo: PowerLimitOptimizer,
        seed: int,
        eta_knob: float,
        beta_knob: float,
    ) -> None:
        self.job = job
        self.model = model
        # Copies, so a simulation leaves the caller's policies as they were and two runs of the
        # same simulator agree.
        self.bso = deepcopy(bso)
        self.plo = deepcopy(plo)
        self.rng = trace_rng(seed)
        self.eta = eta_knob
        self.beta = beta_knob

    def cost(self, energy: float, time: float) -> float:
        return zeus_cost(energy, time, self.eta, self.model.max_power)

    def knobs(self, batch_size: int | None = None) -> tuple[int, int | float, bool]:
        """(batch size, power limit, whether this run profiles the limits).

        The batch size is the policy's choice unless given. A limit the power-limit policy does
        not know yet is profiled: every limit's epoch cost is reported to it, then it is asked
        again.
        """
        bs = self.bso.predict(self.job) if batch_size is None else batch_size
        if bs not in self.model.arms:
            raise InputError(
                f"{self.job}: batch size {bs} is not in the traces; choose one of "
                f"{self.model.batch_sizes}"
            )
        limit = self.plo.predict(self.job, bs)
        if limit is not None:
            return int(bs), limit, False
        for pl, cost in profile_costs(self.model, bs).items():
            self.plo.observe(self.job, bs, pl, cost)
        limit = self.plo.predict(self.job, bs)
        if limit is None:
            raise SimulationError(
                f"{self.job}: the power-limit policy chose no limit after profiling"
            )
        return int(bs), limit, True

    def run(self, bs: int, limit: int | float, profiled: bool, threshold: float):
        """Replay one run: (energy J, time s, reached). (0, 0, False): it could not afford one
        epoch under ``threshold`` and never started."""
        arm = self.model.arms[bs]
        hits = [i for i, p in enumerate(arm.power_limits) if p == limit]
        if not hits:
            raise InputError(
                f"{self.job}: power limit {limit} W is not traced for batch size {bs}; "
                f"choose one of {[watts(p) for p in arm.power_limits]}"
            )
        target = arm.sample_target(self.rng)
        epochs, time, energy, reached, _ = run_by_epochs(
            self.model, arm, target, threshold, profiled, limit=hits[0]
        )
        logger.debug("%s @ %s, %s W: %s epochs, reached %s", self.job, bs, limit, epochs, reached)
        return energy, time, reached


def check_knobs(beta_knob: float, eta_knob: float) -> None:
    """One-line errors for knobs the simulation cannot use."""
    if not (0.0 <= eta_knob <= 1.0):
        raise InputError(f"eta_knob must be within [0, 1] (1: energy only), got {eta_knob}")
    if not beta_knob > 0 or math.isnan(beta_knob):
        raise InputError(f"beta_knob must be > 0 (inf: no early stopping), got {beta_knob}")
