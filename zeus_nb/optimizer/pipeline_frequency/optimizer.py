"""Apply a frequency plan while a pipeline stage trains, one instruction at a time.

The training loop calls :meth:`PipelineFrequencyOptimizer.on_instruction_begin` and
:meth:`~PipelineFrequencyOptimizer.on_instruction_end` around each forward and backward (Zeus's
hook names), and :meth:`~PipelineFrequencyOptimizer.on_step_begin` at each iteration. The plan is
computed in-process: rank 0 solves the frontier and broadcasts the chosen plan over
``torch.distributed`` when a process group is initialized; no planning server is involved.
"""

from __future__ import annotations

import logging

from zeus_nb.device.base import GPU
from zeus_nb.device.guard import SettingsGuard
from zeus_nb.errors import InputError
from zeus_nb.optimizer.pipeline_frequency.profile import InstructionProfile
from zeus_nb.optimizer.pipeline_frequency.schedule import FrequencyPlan
from zeus_nb.optimizer.pipeline_frequency.solver import solve_frontier

logger = logging.getLogger(__name__)


def plan_on_rank0(
    profile: InstructionProfile | None,
    microbatches: int,
    deadline: float | None = None,
    unit_time: float | None = None,
) -> FrequencyPlan:
    """Solve on rank 0 (or alone) and share the plan with every rank.

    Only rank 0 needs ``profile``; the others may pass None. With no deadline the fastest
    frontier point (same iteration time as all-max clocks, less energy) is chosen.
    """
    import torch.distributed as dist

    distributed = dist.is_available() and dist.is_initialized()
    rank = dist.get_rank() if distributed else 0
    payload: list[str | None] = [None]
    if rank == 0:
        if profile is None:
            raise InputError("rank 0 needs the instruction profile to plan")
        frontier = solve_frontier(profile, profile.num_stages, microbatches, unit_time)
        point = frontier.fastest() if deadline is None else frontier.for_deadline(deadline)
        logger.info(
            "planned iteration %.4g s, %.4g J (all max clocks: %.4g s, %.4g J)",
            point.iteration_time,
            point.energy,
            frontier.max_clock.iteration_time,
            frontier.max_clock.energy,
        )
        payload = [point.plan.to_json()]
    if distributed:
        dist.broadcast_object_list(payload, src=0)
    return FrequencyPlan.from_json(payload[0])


class PipelineFrequencyOptimizer:
    """Locks ``gpu``'s SM clock to the plan's frequency before each instruction of ``stage``.

    Before the first change a :class:`~zeus_nb.device.guard.SettingsGuard` records the GPU's
    clock state, so the original clocks come back on :meth:`close` (also when used as a context
    manager), at exit, on an exception, Ctrl-C or SIGTERM, and through ``zeus-nb restore`` after
    SIGKILL.

    Args:
        plan: the frequency plan of the whole pipeline.
        stage: this rank's pipeline stage.
        gpu: the device to drive (simulated or NVML).
        backend: the GPU system's backend name, for ``zeus-nb restore`` to reopen the GPU.
    """

    def __init__(self, plan: FrequencyPlan, stage: int, gpu: GPU, backend: str = "auto"):
        if not 0 <= stage < plan.num_stages:
            raise InputError(f"stage {stage} is outside the plan's 0..{plan.num_stages - 1}")
        self.plan = plan
        self.stage = stage
        self.gpu = gpu
        self._schedule = plan.stages[stage]
        self._next = 0
        self._current: int | None = None
        self._active: str | None = None
        self.applied: list[tuple[str, int]] = []  # (instruction, MHz) of the running iteration
        self._guard = SettingsGuard([gpu], ("locked_clocks",), backend=backend)

    def on_step_begin(self) -> None:
        """Start a new iteration of the plan."""
        self._next = 0
        self.applied = []

    def on_step_end(self) -> None:
        if self._next != len(self._schedule):
            logger.warning(
                "stage %d ran %d of the plan's %d instructions this iteration",
                self.stage,
                self._next,
                len(self._schedule),
            )

    def on_instruction_begin(self, name: str) -> None:
        """Set the clock for the next planned instruction, which must be ``name``."""
        if self._active is not None:
            raise RuntimeError(f"instruction {self._active!r} has not ended")
        if self._next >= len(self._schedule):
            raise RuntimeError(
                f"stage {self.stage}: the plan has {len(self._schedule)} instructions per "
                "iteration; call on_step_begin() at the start of each iteration"
            )
        inst, mb, freq = self._schedule[self._next]
        if name != inst:
            raise RuntimeError(
                f"stage {self.stage}: instruction {self._next} is {inst} of microbatch {mb} in "
                f"the plan, but the trainer began {name!r}; plan and schedule must both be 1F1B "
                "with the same number of stages and microbatches"
            )
        if freq != self._current:
            self._guard.record()  # once: the original clocks, before the first change
            self.gpu.set_locked_clocks(freq, freq)
            self._current = freq
        self._active = name
        self.applied.append((name, freq))

    def on_instruction_end(self, name: str) -> None:
        if name != self._active:
            raise RuntimeError(f"on_instruction_end({name!r}) without a matching begin")
        self._active = None
        self._next += 1

    def close(self) -> None:
        """Put the GPU's original clocks back."""
        self._guard.restore()
        self._current = None

    def __enter__(self) -> PipelineFrequencyOptimizer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
