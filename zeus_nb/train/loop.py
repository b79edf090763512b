"""The training loop shared by the single-GPU, DDP and FSDP entry points.

One process drives one GPU. Each process measures its own GPU with a ``ZeusMonitor`` on the GPU
system :func:`~zeus_nb.train.distributed.gpu_system` gives it, and runs a
``GlobalPowerLimitOptimizer`` on it; under torch.distributed the optimizer aggregates the
measurements of all ranks before choosing, so every rank applies the same limit. The system's
``step()`` is called once per training step: it advances simulated GPUs and does nothing on real
ones. Rank 0 writes a results JSON and shows progress.

Real GPUs use CUDA and NCCL; without CUDA the same code runs on the CPU with gloo, which is how
``--data synthetic --backend sim`` works on a laptop.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from zeus_nb.data.datasets import SYNTHETIC, check_imagenet_folder
from zeus_nb.device.gpu.access import HOW_TO_CHANGE, READ_ONLY
from zeus_nb.monitor import ZeusMonitor
from zeus_nb.optimizer import GlobalPowerLimitOptimizer
from zeus_nb.optimizer.power_limit import MaxSlowdownConstraint
from zeus_nb.optimizer.power_limit.optimizer import _monitored_gpus
from zeus_nb.optimizer.power_limit.states import steps_to_profile
from zeus_nb.train import results as results_
from zeus_nb.train.config import TrainConfig, max_slowdown_factor
from zeus_nb.train.distributed import Context, gpu_system, setup, teardown, wrap_model
from zeus_nb.train.loaders import datasets, evaluate, loaders
from zeus_nb.train.models import build_model
from zeus_nb.utils.framework import all_sum, reduce_time_energy
from zeus_nb.utils.threads import local_processes, use_threads

if TYPE_CHECKING:
    from zeus_nb.device import GPUSystem

log = logging.getLogger(__name__)


class _NoOptimizer:
    """Stands in for the power-limit optimizer when it is switched off."""

    optimal_power_limit = None
    measurements: tuple = ()
    abandoned: dict = {}
    profiling_time = profiling_energy = 0.0

    def on_epoch_begin(self) -> None: ...

    def on_epoch_end(self) -> None: ...

    def on_step_begin(self) -> None: ...

    def on_step_end(self) -> None: ...

    def close(self) -> None: ...


def _read_only_gpus(monitor) -> list[str]:
    """Why each monitored GPU this process may not change is so (empty: all may be changed).

    Every rank asks together (a sum over ranks): all of them run the optimizer or none does.
    """
    found = [(g, g.settings_access()) for g in _monitored_gpus(monitor)]
    why = [f"GPU {g.index} ({g.name}): {a.why}" for g, a in found if a.mode == READ_ONLY]
    (anywhere,) = all_sum([len(why)])
    return why or (["a GPU of another rank may not be changed"] if anywhere else [])


def _power_limit_optimizer(monitor, config: TrainConfig, factor: float, verbose: bool):
    if not config.power_limit_optimizer:
        return _NoOptimizer()

    read_only = _read_only_gpus(monitor)
    if read_only:  # train and measure at the limit the GPU has; say what was not done
        if verbose:
            log.warning(
                "the power-limit optimizer is off: %s; training runs and is measured at the "
                "GPU's current power limit. To optimize it: %s",
                "; ".join(read_only),
                HOW_TO_CHANGE,
            )
        return _NoOptimizer()

    return GlobalPowerLimitOptimizer(
        monitor,
        optimum_selector=MaxSlowdownConstraint(factor),
        wait_steps=config.wait_steps,
        warmup_steps=config.warmup_steps,
        profile_steps=config.profile_steps,
        pl_step=config.pl_step,
        profile_path=config.profile_path,
        adaptive=config.adaptive,
        verbose=verbose,
        resume_across_epochs=True,  # zeus-nb's improvement; Zeus's own default starts over
    )


@dataclass
class _Job:
    """Everything one process built for its run, before the first step."""

    config: TrainConfig
    ctx: Context
    system: Any
    monitor: Any
    gpu: Any
    model: Any
    loss_fn: Any
    optimizer: Any
    scheduler: Any
    train_loader: Any
    val_loader: Any
    sampler: Any
    num_classes: int
    steps: int
    factor: float
    plo: Any = None


def _prepare(config: TrainConfig, ctx: Context, system: GPUSystem, factor: float) -> _Job:
    """Data, model, optimizer and monitor of this rank; the power-limit optimizer comes last."""
    import torch

    # the same seed on every rank: FSDP2 shards each rank's own copy, so they must agree
    torch.manual_seed(config.seed)
    if ctx.device.type == "cuda":
        torch.backends.cudnn.benchmark = True  # autotuning happens in the optimizer's wait
    data = datasets(config)
    train_loader, val_loader, sampler = loaders(data, config, ctx)
    model = build_model(config.arch, data.num_classes).to(ctx.device)
    use_threads(config.threads, model=model, processes=local_processes())
    model = wrap_model(model, ctx)
    optimizer = torch.optim.SGD(
        model.parameters(), lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay
    )
    monitor = ZeusMonitor(gpu_indices=[ctx.gpu_index], system=system)
    steps = len(train_loader)
    if config.max_steps_per_epoch is not None:
        steps = min(steps, config.max_steps_per_epoch)
    return _Job(
        config,
        ctx,
        system,
        monitor,
        monitor.gpus[0],
        model,
        torch.nn.CrossEntropyLoss(),
        optimizer,
        torch.optim.lr_scheduler.StepLR(optimizer, config.lr_step_epochs, 0.1),
        train_loader,
        val_loader,
        sampler,
        data.num_classes,
        steps,
        factor,
    )


def run(
    mode: str, config: TrainConfig | None = None, *, system: GPUSystem | None = None
) -> dict[str, Any]:
    """Train ``config.epochs`` epochs in this process; return (rank 0 also writes) the results.

    ``system`` is the GPU system to measure and control; by default the process's current one
    for ``config.backend`` (single process) or a fresh one per rank (DDP, FSDP).
    """

    config = config or TrainConfig()
    if str(config.data) != SYNTHETIC:
        check_imagenet_folder(config.data)  # fail fast, before the slow torch import
    factor = max_slowdown_factor(config.max_slowdown)
    ctx: Context | None = None
    job: _Job | None = None
    ok = False
    try:
        ctx = setup(mode, config)
        job = _prepare(config, ctx, system or gpu_system(config.backend, ctx), factor)
        job.plo = _power_limit_optimizer(job.monitor, config, factor, ctx.is_main)
        out = _train(job)
        ok = True
        return out
    finally:
        if job is not None and job.plo is not None:
            job.plo.close()  # put the GPU back at the limit it had before
        if ctx is not None:
            teardown(ctx, ok)


def _train(job: _Job) -> dict[str, Any]:
    """All epochs, then the job's results (written by rank 0)."""
    config, ctx = job.config, job.ctx
    if ctx.is_main:
        log.info(
            "zeus-nb train (%s): %s on %s, %d process(es) on %s, %d steps/epoch; GPU backend "
            "%s (%s); max slowdown %g",
            ctx.mode,
            config.arch,
            config.data,
            ctx.world_size,
            ctx.device.type,
            job.steps,
            job.system.backend,
            job.gpu.name,
            job.factor,
        )
    wall0 = time.perf_counter()
    job.monitor.begin_window("training")
    history = [_epoch(job, epoch) for epoch in range(config.epochs)]
    total = job.monitor.end_window("training")
    out = results_.job_results(
        config,
        ctx,
        backend=job.system.backend,
        gpu=job.gpu,
        plo=job.plo,
        num_classes=job.num_classes,
        steps=job.steps,
        factor=job.factor,
        history=history,
        total=total,
        wall=time.perf_counter() - wall0,
    )
    if ctx.is_main:
        path = results_.results_path(config, ctx.mode)
        results_.write(out, path)
        log.info(
            "done: accuracy %.1f%%, %.1f s, %.0f J; %s; results in %s",
            100 * out["accuracy"],
            out["time_s"],
            out["energy_j"],
            choice_summary(out, job),
            path,
        )
    return out


def choice_summary(out: dict[str, Any], job: _Job) -> str:
    """What the power-limit optimizer decided, never a limit it did not choose."""
    if not job.config.power_limit_optimizer:
        return f"power limit {out['power_limit_w']:g} W (optimizer off)"
    if isinstance(job.plo, _NoOptimizer):  # asked for, but no GPU here may be changed
        return f"power limit {out['power_limit_w']:g} W (optimizer off: the GPU may not be changed)"
    if out["profiling_done"]:
        return f"power limit {out['optimal_power_limit_w']:g} W chosen"
    plo, config = job.plo, job.config
    needed = steps_to_profile(
        plo.min_limit,
        plo.max_limit,
        config.pl_step,
        config.wait_steps,
        config.warmup_steps,
        config.profile_steps,
    )
    return (
        f"no power limit chosen: profiling did not finish ({len(plo.measurements)} measured "
        f"and {len(plo.abandoned)} ruled out of {len(plo.power_limits)} limits in "
        f"{config.epochs * job.steps} steps; up to "
        f"{needed} are needed: raise --epochs or --train-size, or lower --profile-steps / "
        f"--warmup-steps); the GPU was at {out['power_limit_w']:g} W when training ended"
    )


def _epoch(job: _Job, epoch: int) -> dict[str, Any]:
    """One epoch of training and evaluation; its record (all ranks reduced)."""
    if job.sampler is not None:
        job.sampler.set_epoch(epoch)
    job.model.train()
    job.monitor.begin_window("epoch")
    job.plo.on_epoch_begin()
    loss_sum, seen = _train_steps(job, f"epoch {epoch + 1}/{job.config.epochs}")
    job.plo.on_epoch_end()
    m = job.monitor.end_window("epoch")
    job.scheduler.step()
    loss_sum, seen = all_sum([loss_sum, float(seen)])
    accuracy = evaluate(job.model, job.val_loader, job.ctx)
    t_max, e_sum, _ = reduce_time_energy(m.time, m.total_energy, 1)
    record = {
        "epoch": epoch + 1,
        "train_loss": loss_sum / seen if seen else float("nan"),
        "val_accuracy": accuracy,
        "time_s": t_max,
        "energy_j": e_sum,
        "power_limit_w": job.gpu.get_power_limit(),
    }
    if job.ctx.is_main:
        log.info(
            "epoch %d/%d: loss %.3f, val accuracy %.1f%%, %.1f s, %.0f J, power limit %g W",
            epoch + 1,
            job.config.epochs,
            record["train_loss"],
            100 * accuracy,
            t_max,
            e_sum,
            record["power_limit_w"],
        )
    return record


def _train_steps(job: _Job, desc: str) -> tuple[float, int]:
    """The epoch's training steps; (summed loss, samples seen) on this rank."""
    import torch

    device = job.ctx.device
    bar = _progress(job, desc)
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    seen = 0
    for step, (x, y) in enumerate(job.train_loader):
        if step >= job.steps:
            break
        job.plo.on_step_begin()
        x = x.to(device, non_blocking=True)
        y = y.to(device, non_blocking=True)
        loss = job.loss_fn(job.model(x), y)
        job.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        job.optimizer.step()
        job.system.step()
        job.plo.on_step_end()
        loss_sum += loss.detach() * len(y)  # stays on the device: no sync per step
        seen += len(y)
        if bar is not None:
            if step % 10 == 0:
                bar.set_postfix(loss=f"{loss.item():.3f}", pl=f"{job.gpu.get_power_limit():g}W")
            bar.update()
    if bar is not None:
        bar.close()
    return float(loss_sum), seen


def _progress(job: _Job, desc: str):
    if not (job.config.progress and job.ctx.is_main):
        return None
    from tqdm.auto import tqdm

    return tqdm(total=job.steps, desc=desc, unit="step", leave=False)
