"""Pipeline-parallel training with per-instruction GPU measurement and frequency plans.

One process per pipeline stage (times ``--dp`` replicas), started by torchrun::

    torchrun --nproc_per_node 4 -m zeus_nb.train.pipeline --model tiny-gpt --pp 4 \\
        --microbatch-size 4 --num-microbatches 8 --backend sim             # CPU, gloo
    torchrun --nproc_per_node 4 -m zeus_nb.train.pipeline --model tiny-gpt --pp 4 \\
        --num-microbatches 1 --profile true --profile-clocks every:10      # instruction profile
    torchrun ... -m zeus_nb.train.pipeline ... --plan plan.json --results-json run.json

The model (see :mod:`zeus_nb.train.pipeline.models`) is cut into ``--pp`` stages
(:mod:`zeus_nb.train.pipeline.stages`) and trained on synthetic data with
``torch.distributed.pipelining``'s 1F1B or GPipe schedule. Each rank measures its own GPU per
instruction (:mod:`zeus_nb.train.pipeline.clock`); on simulated GPUs the instructions advance the
GPU's virtual clock by their modelled time at the current SM clock
(:mod:`zeus_nb.train.pipeline.cost`). Rank 0 writes the results JSON: the iteration time (the
slowest rank's) and energy (all ranks' together) per measured step.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from dataclasses import dataclass, fields
from typing import Any

from zeus_nb import device as zdevice
from zeus_nb.errors import InputError, ZeusNbError
from zeus_nb.inputs.args import ArgType, Parser, count, nonempty, real, seconds
from zeus_nb.inputs.env import env
from zeus_nb.inputs.registry import environ_read
from zeus_nb.train.cli import show_progress_lines
from zeus_nb.train.pipeline import models as pm
from zeus_nb.train.pipeline.clock import InstructionClock, TimestampLink, instrumented_stage
from zeus_nb.train.pipeline.cost import work_model_for
from zeus_nb.train.pipeline.layout import Layout, all_reduce_grads, setup_layout, teardown
from zeus_nb.train.pipeline.models import sample_batch
from zeus_nb.train.pipeline.plan import apply_plan, plan_here
from zeus_nb.train.pipeline.results import describe, rank_record, write_results
from zeus_nb.train.pipeline.stages import PARTITION_METHODS, build_stage, partition, stage_work
from zeus_nb.utils.boundary import run_main
from zeus_nb.utils.framework import gather, reduce_time_energy
from zeus_nb.utils.threads import local_processes, use_threads

log = logging.getLogger(__name__)

SCHEDULES = ("1f1b", "gpipe")


@dataclass
class PipelineConfig:
    """One pipeline run; the command-line flags map onto these fields."""

    model: str = "tiny-gpt"
    microbatch_size: int = 4
    num_microbatches: int = 4
    pp: int | None = None  # default: world size / dp
    dp: int = 1
    partition_method: str = "parameters"
    schedule: str = "1f1b"
    max_steps: int = 4
    num_warmup_steps: int = 1
    num_prof_steps: int = 2
    profile: bool = False
    profile_clocks: str | None = None  # all, every:N or MHz list
    profile_path: str | None = None
    plan: str | None = None
    plan_profile: str | None = None  # plan in-process from this profile (rank 0, broadcast)
    plan_deadline: float | None = None  # with plan_profile: seconds per iteration at most
    results_json: str | None = None
    backend: str | None = None
    lr: float = 1e-3
    seed: int = 0
    threads: int | None = None  # torch CPU threads; default OMP_NUM_THREADS, else by stage size

    def __post_init__(self) -> None:
        for name in ("microbatch_size", "num_microbatches", "dp", "max_steps", "num_prof_steps"):
            if getattr(self, name) < 1:
                raise InputError(
                    f"{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}"
                )
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads must be >= 1, got {self.threads}")
        if self.num_warmup_steps < 0:
            raise InputError("num-warmup-steps must be >= 0")
        if self.pp is not None and self.pp < 1:
            raise InputError(f"pp must be >= 1, got {self.pp}")
        if self.schedule not in SCHEDULES:
            raise InputError(f"schedule must be one of {', '.join(SCHEDULES)}")
        if self.profile and self.num_microbatches != 1:
            raise InputError(
                "instruction profiling runs one microbatch at a time: pass --num-microbatches 1"
            )
        if self.profile and (self.plan or self.plan_profile):
            raise InputError("--profile and --plan exclude each other: profile first, then plan")
        if self.plan and self.plan_profile:
            raise InputError("give either --plan (a plan file) or --plan-profile (plan here)")
        if self.plan_deadline is not None and not self.plan_profile:
            raise InputError("--plan-deadline needs --plan-profile PROFILE.csv")


class Trainer:
    """One rank's stage, schedule, optimizer and instruction clock."""

    def __init__(self, config: PipelineConfig, layout: Layout):
        import torch
        from torch.distributed.pipelining import Schedule1F1B, ScheduleGPipe

        self.config, self.layout = config, layout
        self.model_config = pm.get_config(config.model)
        self.partition = partition(
            pm.layer_parameters(self.model_config), layout.pp, config.partition_method
        )
        layers = self.partition[layout.stage]
        self.module = build_stage(self.model_config, layers, config.seed)
        self.work = stage_work(self.model_config, layers, config.microbatch_size)
        self.system = zdevice.current(config.backend)
        self.gpu_index = env("LOCAL_RANK", 0)
        model = work_model_for(self.system)
        works = None
        if model is not None:
            works = {name: model.work(name, self.work[name]) for name in ("forward", "backward")}
        link = TimestampLink(layout.link_group, layout.stage, layout.pp) if layout.pp > 1 else None
        self.clock = InstructionClock(self.system, self.gpu_index, works, link)
        stage = instrumented_stage(
            self.clock,
            self.module,
            layout.stage,
            layout.pp,
            torch.device("cpu"),
            group=layout.pp_group,
        )
        # one microbatch (profiling) runs the same under both; torch's 1F1B wants M >= stages
        one_f_one_b = config.schedule == "1f1b" and config.num_microbatches > 1
        if one_f_one_b and config.num_microbatches < layout.pp:
            raise ZeusNbError(
                f"the 1F1B schedule needs at least as many microbatches as stages: pass "
                f"--num-microbatches {layout.pp} or more (or --schedule gpipe)"
            )
        schedule_cls = Schedule1F1B if one_f_one_b else ScheduleGPipe
        self.schedule = schedule_cls(
            stage, config.num_microbatches, loss_fn=pm.loss_fn(self.model_config)
        )
        self.optimizer = torch.optim.AdamW(self.module.parameters(), lr=config.lr)
        self.batch_size = config.microbatch_size * config.num_microbatches

    def step(self, step: int) -> float:
        """One training iteration; returns the mean microbatch loss."""
        import torch

        g = torch.Generator().manual_seed(
            self.config.seed * 1_000_003 + step * 1009 + self.layout.replica
        )
        x, y = sample_batch(self.model_config, self.batch_size, generator=g)
        losses: list = []
        args = (x,) if self.layout.is_first else ()
        kwargs: dict[str, Any] = {}
        if self.layout.is_last:
            kwargs = {"target": y, "losses": losses}
        self.optimizer.zero_grad(set_to_none=True)
        hooks = self.clock.optimizer
        if hooks is not None:
            hooks.on_step_begin()
        self.schedule.step(*args, **kwargs)
        if hooks is not None:
            hooks.on_step_end()
        all_reduce_grads(self.module, self.layout)
        self.optimizer.step()
        self.clock.end_iteration()
        return self._loss(losses)

    def _loss(self, losses: list) -> float:
        """Mean microbatch loss of the last stages (all replicas), known on every rank."""
        import torch
        import torch.distributed as dist

        mine = torch.stack([x.detach() for x in losses]).mean() if losses else torch.zeros(())
        total = mine.to(torch.float64).reshape(1)
        dist.all_reduce(total)
        return float(total[0]) / self.layout.dp

    def measure(self, steps: range) -> list[dict[str, float]]:
        """Run ``steps``; each one's iteration time (max over ranks) and energy (sum)."""

        out = []
        for step in steps:
            t0, e0 = self.system.clock(), self.clock.gpu.energy()
            loss = self.step(step)
            t, e = self.system.clock() - t0, self.clock.gpu.energy() - e0
            t_max, e_sum, _ = reduce_time_energy(t, e, 1)
            out.append({"step": step, "time_s": t_max, "energy_j": e_sum, "loss": loss})
        return out


@environ_read("saves ZEUS_NB_BACKEND to restore it afterwards")
def run(config: PipelineConfig | None = None) -> dict[str, Any]:
    """Train (or profile) in this process, one rank of the pipeline; rank 0 writes the results."""
    config = config or PipelineConfig()

    saved = os.environ.get("ZEUS_NB_BACKEND")
    if config.backend is not None:
        os.environ["ZEUS_NB_BACKEND"] = zdevice.resolve_backend(config.backend)
    layout = None
    ok = False
    try:
        layout = setup_layout(config)
        trainer = Trainer(config, layout)
        # a stage is a small model and the ranks share the cores: one thread unless told
        use_threads(config.threads, model=trainer.module, processes=local_processes())
        if config.profile:
            from zeus_nb.train.pipeline.profiling import profile

            results = profile(trainer)
        else:
            results = train(trainer)
        ok = True
        return results
    finally:
        teardown(layout, ok)
        if saved is None:
            os.environ.pop("ZEUS_NB_BACKEND", None)
        else:
            os.environ["ZEUS_NB_BACKEND"] = saved


def train(trainer: Trainer) -> dict[str, Any]:
    """``max_steps`` iterations; measured: ``num_prof_steps`` after ``num_warmup_steps``."""

    config = trainer.config
    plan = None
    if config.plan:
        plan = apply_plan(trainer, config.plan)
    elif config.plan_profile:
        plan = plan_here(trainer, config.plan_profile, config.plan_deadline)
    warm = min(config.num_warmup_steps, config.max_steps - 1)
    measured_steps = range(warm, min(config.max_steps, warm + config.num_prof_steps))
    try:
        for step in range(warm):
            trainer.step(step)
        trainer.clock.reset()
        rows = trainer.measure(measured_steps)
        n = len(rows)
        rank = rank_record(trainer, n)
        for step in range(measured_steps.stop, config.max_steps):
            trainer.step(step)
    finally:
        if trainer.clock.optimizer is not None:
            trainer.clock.optimizer.close()  # the GPU's clock back to the driver
    results = describe(trainer)
    results.update(
        iterations=rows,
        iteration_time_s=sum(r["time_s"] for r in rows) / n,
        energy_j=sum(r["energy_j"] for r in rows) / n,
        losses=[r["loss"] for r in rows],
        ranks=gather(rank),
    )
    if plan is not None:
        results["plan"] = plan
    write_results(trainer, results)
    return results


# --- command line -----------------------------------------------------------------------------
def _bool_value(value: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "1", "yes", "on"):
        return True
    if v in ("false", "0", "no", "off"):
        return False
    raise InputError(f"the value: {value!r} is not true or false")


_bool = ArgType("true or false", _bool_value, ("", "maybe", "2"))


def parser() -> argparse.ArgumentParser:
    d = PipelineConfig()
    p = Parser(
        prog="zeus_nb.train.pipeline",
        description="Pipeline-parallel training on synthetic data, measured per instruction.",
    )

    def opt(name: str, **kw: Any) -> None:  # Merak spells the flags with underscores
        p.add_argument(f"--{name}", f"--{name.replace('-', '_')}", **kw)

    text, path = nonempty("name"), nonempty("path")
    opt("model", type=text, default=d.model, help="a name from the model table, e.g. tiny-gpt")
    opt("microbatch-size", type=count(1), default=d.microbatch_size)
    opt("num-microbatches", type=count(1), default=d.num_microbatches)
    opt("pp", type=count(1, 1024), help="pipeline stages (default: processes / dp)")
    opt("dp", type=count(1, 1024), default=d.dp, help="data-parallel replicas of the pipeline")
    opt(
        "partition-method",
        type=text,
        default=d.partition_method,
        help=" | ".join(PARTITION_METHODS),
    )
    opt("schedule", choices=SCHEDULES, default=d.schedule)
    opt("max-steps", type=count(1), default=d.max_steps)
    opt("num-warmup-steps", type=count(0), default=d.num_warmup_steps)
    opt("num-prof-steps", type=count(1), default=d.num_prof_steps, help="steps measured")
    opt("profile", type=_bool, default=d.profile, help="true: instruction profiling")
    opt("profile-clocks", type=text, help="all (default), every:N, or MHz values like 1740,1500")
    opt("profile-path", type=path, help="profile CSV (default runs/profile_<model>_mb<size>.csv)")
    opt("plan", type=path, help="frequency plan JSON (a point of `zeus-nb perseus plan --json`)")
    opt("plan-profile", type=path, help="plan in-process from this profile CSV (rank 0 solves)")
    opt(
        "plan-deadline",
        type=seconds,
        help="with --plan-profile: least-energy plan within this many seconds per iteration "
        "(default: the fastest plan)",
    )
    opt("results-json", type=path, help="results JSON (default runs/pipeline_<model>.json)")
    opt("backend", choices=("auto", "sim", "nvml"), help="zeus-nb GPU backend")
    opt("lr", type=real(low=0.0), default=d.lr)
    opt("seed", type=count(0, 2**32 - 1), default=d.seed)
    opt(
        "threads",
        type=count(1, 1024),
        help="torch CPU threads per rank (default: OMP_NUM_THREADS, else by the stage's size)",
    )
    return p


def config_from_args(argv: list[str] | None = None) -> PipelineConfig:
    args = vars(parser().parse_args(argv))
    known = {f.name for f in fields(PipelineConfig)}
    return PipelineConfig(**{k: v for k, v in args.items() if k in known})


def rank_main(argv: list[str] | None = None) -> int:
    """One rank inside the one error boundary (:mod:`zeus_nb.utils.boundary`): a user's mistake
    is one line per rank, exit status 2. Returns the exit status."""

    show_progress_lines()

    def train_here(args: list[str]) -> int:
        run(config_from_args(args))
        return 0

    return run_main("zeus_nb.train.pipeline", train_here, argv)


def main(argv: list[str] | None = None) -> int:
    """``torchrun ... -m zeus_nb.train.pipeline``."""

    code = rank_main(argv)
    if code != 0:
        return code
    # see zeus_nb.train.cli.main: a finished gloo worker leaves without interpreter teardown
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
