"""Applying a frequency plan to a live pipeline: each instruction at its planned SM clock.

A plan file is one frontier point of ``zeus-nb perseus plan PROFILE.csv --json``: an object with
the predicted ``iteration_time`` (s) and ``energy`` (J) and, under ``plan``, every stage's
instructions in execution order with their clocks (:class:`FrequencyPlan`'s JSON).
``--plan-profile PROFILE.csv [--plan-deadline S]`` plans inside the job instead: rank 0 solves
the frontier and broadcasts the chosen plan. Either way a :class:`PipelineFrequencyOptimizer`
locks the clock before each instruction. Plans describe the 1F1B schedule, so they need
``--schedule 1f1b``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from zeus_nb.errors import TraceFormatError, ZeusNbError
from zeus_nb.inputs import check_record, read_json, reader
from zeus_nb.inputs.kinds import PLAN


class PlanError(ZeusNbError, ValueError):
    """A plan file that does not fit this pipeline."""


@reader(PLAN)
def load_plan(path: str | Path) -> dict[str, Any]:
    """The frontier point in ``path``: ``{"iteration_time", "energy", "plan"}``."""
    p = Path(path)
    try:
        data = read_json(p, "frequency plan")
    except FileNotFoundError:
        raise PlanError(f"{p}: no such plan file; write one with `zeus-nb perseus plan`") from None
    except (OSError, TraceFormatError) as e:
        raise PlanError(str(e)) from None
    if isinstance(data, list) and len(data) == 1:
        data = data[0]
    if isinstance(data, list):
        raise PlanError(
            f"{p} holds a whole frontier ({len(data)} points); save one point, e.g. "
            "`zeus-nb perseus plan ... --deadline SECONDS --json > plan.json`"
        )
    if not isinstance(data, dict) or "plan" not in data:
        raise PlanError(f"{p}: expected an object with 'plan', 'iteration_time' and 'energy'")
    try:
        return dict(check_record(data, PLAN, str(p)))
    except TraceFormatError as e:
        raise PlanError(str(e)) from None


def _attach(trainer, plan, source: str) -> None:
    from zeus_nb.optimizer.pipeline_frequency import PipelineFrequencyOptimizer

    config, layout = trainer.config, trainer.layout
    if config.schedule != "1f1b":
        raise PlanError("frequency plans are planned for the 1F1B schedule; use --schedule 1f1b")
    if plan.num_stages != layout.pp or plan.num_microbatches != config.num_microbatches:
        raise PlanError(
            f"{source} plans {plan.num_stages} stages x {plan.num_microbatches} microbatches; "
            f"this pipeline runs {layout.pp} x {config.num_microbatches}"
        )
    trainer.clock.optimizer = PipelineFrequencyOptimizer(
        plan, layout.stage, trainer.clock.gpu, backend=trainer.system.backend
    )


def apply_plan(trainer, path: str) -> dict[str, Any]:
    """Attach a :class:`PipelineFrequencyOptimizer` for ``path``'s plan to the trainer's clock.

    Returns the plan's prediction, for the results JSON.
    """
    from zeus_nb.optimizer.pipeline_frequency import FrequencyPlan

    point = load_plan(path)
    try:
        plan = FrequencyPlan.from_json(point["plan"])
    except (KeyError, TypeError, ValueError) as e:
        raise PlanError(f"{path}: the 'plan' entry is not a frequency plan ({e})") from None
    _attach(trainer, plan, str(path))
    return {
        "path": str(path),
        "predicted_iteration_time_s": point.get("iteration_time"),
        "predicted_energy_j": point.get("energy"),
    }


def plan_here(trainer, profile_path: str, deadline: float | None) -> dict[str, Any]:
    """Plan from a profile in this job: rank 0 solves and broadcasts (``plan_on_rank0``).

    Without a deadline the fastest frontier point is used. Returns the plan's prediction.
    """
    import torch.distributed as dist

    from zeus_nb.optimizer.pipeline_frequency import evaluate, load_profile, plan_on_rank0

    rank0 = trainer.layout.rank == 0
    profile = load_profile(profile_path) if rank0 else None
    plan = plan_on_rank0(profile, trainer.config.num_microbatches, deadline)
    predicted: list[Any] = [None]
    if rank0:
        timeline = evaluate(plan, profile)
        predicted = [(timeline.iteration_time, timeline.energy)]
    dist.broadcast_object_list(predicted, src=0)
    _attach(trainer, plan, str(profile_path))
    return {
        "profile": str(profile_path),
        "deadline_s": deadline,
        "predicted_iteration_time_s": predicted[0][0],
        "predicted_energy_j": predicted[0][1],
    }
