"""Apply a frequency plan while a pipeline stage trains, one instruction at a time.

The training loop calls :meth:`PipelineFrequencyOptimizer.on_instruction_begin` and
:meth:`~PipelineFrequencyOptimizer.on_instruction_end` around each forward and backward (Zeus's
hook names), and :meth:`~PipelineFrequencyOptimizer.on_step_begin` /
:meth:`~PipelineFrequencyOptimizer.on_step_end` around each iteration. No planning server is
involved. Two call shapes build it:

* **zeus-nb's**: ``PipelineFrequencyOptimizer(plan, stage, gpu, backend="auto")`` (or
  :meth:`PipelineFrequencyOptimizer.from_plan`), with a plan from the in-process planner;
  :func:`plan_on_rank0` solves it on rank 0 and broadcasts it over ``torch.distributed``.
* **Zeus's**: ``PipelineFrequencyOptimizer(rank, dp_rank, pp_rank, tp_rank, device_id,
  dp_degree, pp_degree, tp_degree, world_size, server_url, job_metadata=None)``, where
  ``server_url`` names the schedule file Zeus's PFO server would serve (see
  :mod:`~zeus_nb.optimizer.pipeline_frequency.schedule_file`); the rank runs its stage's list
  (its own, if the file lists every rank). As in Zeus the GPU starts at its default power limit
  and highest clock, and an iteration must run exactly the scheduled instructions.

The first argument decides: a :class:`~zeus_nb.optimizer.pipeline_frequency.FrequencyPlan`
(or ``plan=``) selects zeus-nb's shape. Either way the GPU's original clocks come back on
:meth:`~PipelineFrequencyOptimizer.close`, at exit, on errors and signals, and through
``zeus-nb restore``.
"""

from __future__ import annotations

import logging

from zeus_nb.callback import Callback
from zeus_nb.device.base import GPU
from zeus_nb.errors import InputError
from zeus_nb.optimizer.pipeline_frequency.common import JobInfo
from zeus_nb.optimizer.pipeline_frequency.frequency_controller import FrequencyController
from zeus_nb.optimizer.pipeline_frequency.profile import InstructionProfile
from zeus_nb.optimizer.pipeline_frequency.schedule import FrequencyPlan
from zeus_nb.optimizer.pipeline_frequency.schedule_file import ScheduleSourceError, load_schedules
from zeus_nb.optimizer.pipeline_frequency.solver import solve_frontier
from zeus_nb.utils.framework import initialized_dist, sync_execution

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


class PipelineFrequencyOptimizer(Callback):
    """Locks this rank's GPU's SM clock to the scheduled frequency of each instruction.

    See the module docstring for the two call shapes. Attributes of Zeus's shape: ``rank``,
    ``dp_rank``, ``pp_rank``, ``tp_rank``, ``device_id``, ``server_url``, ``job_id``,
    ``frequency_controller``, ``freq_schedule`` (the (instruction, MHz) list of one iteration)
    and ``freq_schedule_iter``. Of zeus-nb's: ``plan``, ``stage``, ``gpu``. Both: ``applied``,
    the (instruction, MHz) pairs of the running iteration.
    """

    def __init__(
        self,
        rank=None,
        dp_rank=None,
        pp_rank=None,
        tp_rank=None,
        device_id: int | None = None,
        dp_degree: int | None = None,
        pp_degree: int | None = None,
        tp_degree: int | None = None,
        world_size: int | None = None,
        server_url: str | None = None,
        job_metadata: str | None = None,
        *,
        plan: FrequencyPlan | None = None,
        stage: int | None = None,
        gpu: GPU | None = None,
        backend: str = "auto",
    ) -> None:
        if plan is not None or isinstance(rank, FrequencyPlan):
            plan = plan if plan is not None else rank
            stage = stage if stage is not None else dp_rank
            gpu = gpu if gpu is not None else pp_rank
            backend = tp_rank if isinstance(tp_rank, str) else backend  # the old 4th argument
            self._init_plan(plan, stage, gpu, backend)
            return
        degrees = dict(dp_degree=dp_degree, pp_degree=pp_degree, tp_degree=tp_degree)
        ranks = dict(rank=rank, dp_rank=dp_rank, pp_rank=pp_rank, tp_rank=tp_rank)
        given = {**ranks, **degrees, "device_id": device_id, "world_size": world_size}
        missing = [k for k, v in {**given, "server_url": server_url}.items() if v is None]
        if missing:
            raise TypeError(
                "PipelineFrequencyOptimizer takes Zeus's arguments (rank, dp_rank, pp_rank, "
                "tp_rank, device_id, dp_degree, pp_degree, tp_degree, world_size, server_url) "
                f"or zeus-nb's (plan, stage, gpu); missing {', '.join(missing)}"
            )
        job = JobInfo(**degrees, world_size=world_size, job_metadata=job_metadata)
        self._init_zeus(ranks, int(device_id), job, str(server_url), backend)

    @classmethod
    def from_plan(
        cls, plan: FrequencyPlan, stage: int, gpu: GPU, backend: str = "auto"
    ) -> PipelineFrequencyOptimizer:
        """zeus-nb's shape: run ``plan``'s schedule of ``stage`` on ``gpu``."""
        return cls(plan=plan, stage=stage, gpu=gpu, backend=backend)

    def _init_plan(self, plan: FrequencyPlan, stage: int, gpu: GPU, backend: str) -> None:
        if not isinstance(stage, int) or not 0 <= stage < plan.num_stages:
            raise InputError(f"stage {stage} is outside the plan's 0..{plan.num_stages - 1}")
        if gpu is None:
            raise TypeError("zeus-nb's call shape is PipelineFrequencyOptimizer(plan, stage, gpu)")
        self.plan, self.stage, self.gpu = plan, stage, gpu
        self.rank = self.pp_rank = stage
        self.device_id = gpu.index
        self._strict = False  # an iteration that ran fewer instructions is logged, not fatal
        self._labels = [f"{i} of microbatch {j}" for i, j, _ in plan.stages[stage]]
        self.freq_schedule = [(i, f) for i, _, f in plan.stages[stage]]
        self.frequency_controller = FrequencyController(
            gpu=gpu, backend=backend, start_at_max=False
        )
        self._start_iteration()

    def _init_zeus(self, ranks: dict, device_id: int, job: JobInfo, server_url: str, backend):
        self.rank, self.dp_rank = int(ranks["rank"]), int(ranks["dp_rank"])
        self.pp_rank, self.tp_rank = int(ranks["pp_rank"]), int(ranks["tp_rank"])
        self.device_id, self.server_url, self.stage = device_id, server_url, self.pp_rank
        schedules = load_schedules(server_url)  # every rank reads the file: nothing to share
        if len(schedules) == job.world_size:
            mine = schedules[self.rank]
        elif len(schedules) == job.pp_degree:
            mine = schedules[self.pp_rank]
        else:
            raise ScheduleSourceError(
                f"{server_url}: {len(schedules)} schedules, but the job has {job.pp_degree} "
                f"stages and {job.world_size} ranks; give one per stage or one per rank"
            )
        job.set_job_id("PointSolution")
        dist = initialized_dist()
        if dist is not None:  # one id for the whole job, as Zeus's server hands out
            box = [job.job_id]
            dist.broadcast_object_list(box, src=0)
            job.job_id = box[0]
        self.job_id = job.job_id
        self._strict = True
        self._labels = [name for name, _ in mine]
        self.freq_schedule = list(mine)
        self.frequency_controller = FrequencyController(device_id, backend=backend)
        self.gpu = self.frequency_controller.gpu
        self._start_iteration()

    def _start_iteration(self, keep_applied: bool = False) -> None:
        self._next = 0
        self._active: str | None = None
        if not keep_applied:
            self.applied: list[tuple[str, int]] = []
        self._fresh = True  # the next instruction starts a new list of applied clocks
        self.freq_schedule_iter = iter(self.freq_schedule)

    def on_step_begin(self) -> None:
        """Start a new iteration of the schedule."""
        self._start_iteration()

    def on_step_end(self) -> None:
        """End the iteration; Zeus's shape requires that it ran the whole schedule."""
        if self._next != len(self.freq_schedule):
            message = (
                f"stage {self.stage} ran {self._next} of the schedule's "
                f"{len(self.freq_schedule)} instructions this iteration"
            )
            if self._strict:
                raise RuntimeError(message + "; the trainer and the schedule disagree")
            logger.warning(message)
        self._start_iteration(keep_applied=True)  # ``applied`` shows the finished iteration

    def on_instruction_begin(self, name: str) -> None:
        """Set the clock for the next scheduled instruction, which must be ``name``."""
        if self._active is not None:
            raise RuntimeError(f"instruction {self._active!r} has not ended")
        if self._next >= len(self.freq_schedule):
            raise RuntimeError(
                f"stage {self.stage}: the schedule has {len(self.freq_schedule)} instructions per "
                "iteration; call on_step_end() (or on_step_begin()) at each iteration's edge"
            )
        inst, freq = self.freq_schedule[self._next]
        if name != inst:
            raise RuntimeError(
                f"stage {self.stage}: instruction {self._next} is {self._labels[self._next]} in "
                f"the schedule, but the trainer began {name!r}; plan and schedule must both be "
                "1F1B with the same number of stages and microbatches"
            )
        if self._strict:  # Zeus's shape: let the previous instruction finish at its clock
            sync_execution([self.device_id], sync_with="torch")
        next(self.freq_schedule_iter, None)
        self.frequency_controller.set_frequency(freq)
        if self._fresh:
            self.applied, self._fresh = [], False
        self._active = name
        self.applied.append((name, freq))

    def on_instruction_end(self, name: str) -> None:
        if name != self._active:
            raise RuntimeError(f"on_instruction_end({name!r}) without a matching begin")
        self._active = None
        self._next += 1

    def close(self) -> None:
        """Put the GPU's original clocks back."""
        self.frequency_controller.end()

    def __enter__(self) -> PipelineFrequencyOptimizer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
