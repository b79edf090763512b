"""The training loop shared by the single-GPU, DDP and FSDP entry points.

One process drives one GPU. Each process measures its own GPU with
``ZeusMonitor(gpu_indices=[local_rank])`` and runs a ``GlobalPowerLimitOptimizer`` on it; under
torch.distributed the optimizer aggregates the measurements of all ranks before choosing, so every
rank applies the same limit. ``zeus_nb.step()`` is called once per training step: it advances the
simulated GPUs and does nothing on real ones. Rank 0 writes a results JSON and shows progress.

Real GPUs use CUDA and NCCL; without CUDA the same code runs on the CPU with gloo, which is how
``--data synthetic --backend sim`` works on a laptop.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from zeus_nb.errors import ZeusNbError
from zeus_nb.train import MODES

DEFAULT_MAX_SLOWDOWN = 1.1


@dataclass
class TrainConfig:
    """Everything one training run needs; the command-line flags map onto these fields."""

    data: str = "synthetic"  # ImageNet-layout folder, or "synthetic"
    arch: str = "tiny"  # "tiny" or a torchvision model name
    epochs: int = 2
    batch_size: int = 32  # per process
    lr: float = 0.05
    momentum: float = 0.9
    weight_decay: float = 1e-4
    lr_step_epochs: int = 30  # StepLR: divide the learning rate by 10 every this many epochs
    image_size: int | None = None  # default 224 for folders, 32 for synthetic
    workers: int | None = None  # DataLoader workers; default 0 (synthetic) or up to 8 (folders)
    max_steps_per_epoch: int | None = None  # cap for quick runs
    num_classes: int = 10  # synthetic data only
    train_size: int = 2048  # synthetic data only
    val_size: int = 128  # synthetic data only
    backend: str | None = None  # zeus-nb device backend: auto, sim or nvml
    device: str = "auto"  # torch device: auto (CUDA if available), cuda or cpu
    gpu: int = 0  # GPU index of a single-process run
    power_limit_optimizer: bool = True
    adaptive: bool = True  # skip power limits that cannot win (False: profile every one)
    max_slowdown: float | None = None  # default: ZEUS_NB_MAX_SLOWDOWN, else 1.1
    wait_steps: int = 1
    warmup_steps: int = 10
    profile_steps: int = 40
    pl_step: int = 25
    profile_path: str | None = None
    results: str | None = None  # default runs/train_<mode>.json
    seed: int = 0
    progress: bool = True

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size", "profile_steps", "lr_step_epochs"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.max_steps_per_epoch is not None and self.max_steps_per_epoch < 1:
            raise ValueError("max_steps_per_epoch must be >= 1")
        if self.device not in ("auto", "cuda", "cpu"):
            raise ValueError(f"device must be auto, cuda or cpu, got {self.device!r}")


def max_slowdown_factor(value: float | None = None) -> float:
    """The slowdown factor: ``value``, else ``ZEUS_NB_MAX_SLOWDOWN``, else 1.1."""
    if value is None:
        raw = os.environ.get("ZEUS_NB_MAX_SLOWDOWN", "").strip()
        if not raw:
            return DEFAULT_MAX_SLOWDOWN
        try:
            value = float(raw)
        except ValueError:
            raise ValueError(
                f"ZEUS_NB_MAX_SLOWDOWN={raw!r} is not a number; use e.g. 1.1 (10% slower at most)"
            ) from None
    if not value >= 1.0:
        raise ValueError(f"the maximum slowdown factor must be >= 1.0 (1.0 = none), got {value}")
    return float(value)


# --- processes and devices --------------------------------------------------------------------
@dataclass
class Context:
    """Where this process runs: its rank, its torch device and the GPU index it measures."""

    mode: str
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    device: Any = None
    gpu_index: int = 0
    distributed: bool = False
    comm_backend: str | None = None

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def setup(mode: str, config: TrainConfig) -> Context:
    """Pick the device and, for dp/fsdp, join the process group torchrun prepared."""
    import torch

    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    use_cuda = torch.cuda.is_available() and config.device != "cpu"
    if config.device == "cuda" and not torch.cuda.is_available():
        raise ZeusNbError("--device cuda: torch sees no CUDA GPU; use --device cpu or auto")
    if mode == "single":
        device = torch.device(f"cuda:{config.gpu}" if use_cuda else "cpu")
        if use_cuda:
            torch.cuda.set_device(device)
        return Context(mode, device=device, gpu_index=config.gpu)

    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        raise ZeusNbError(
            f"zeus_nb.train.{mode} runs one process per GPU under torchrun, e.g.\n"
            f"  torchrun --nproc_per_node 2 -m zeus_nb.train.{mode} --data synthetic --backend sim"
        )
    import torch.distributed as dist

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if use_cuda:
        device = torch.device(f"cuda:{local_rank}")
        torch.cuda.set_device(device)
        comm = "nccl"
    else:
        device = torch.device("cpu")
        comm = "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend=comm)
    return Context(
        mode,
        rank=dist.get_rank(),
        local_rank=local_rank,
        world_size=dist.get_world_size(),
        device=device,
        gpu_index=local_rank,
        distributed=True,
        comm_backend=comm,
    )


def teardown(ctx: Context, ok: bool = True) -> None:
    """Leave the process group; after success, wait for every rank first.

    Destroying a gloo group while a peer is still using it aborts the process at exit
    ("terminate called without an active exception"), so a clean run meets at a barrier.
    """
    if ctx.distributed:
        import torch.distributed as dist

        if dist.is_initialized():
            if ok:
                dist.barrier()
            dist.destroy_process_group()


def wrap_model(model, ctx: Context):
    """DDP or FSDP2 (``fully_shard``) around ``model``, already on ``ctx.device``."""
    if ctx.mode == "dp":
        from torch.nn.parallel import DistributedDataParallel

        ids = [ctx.device.index] if ctx.device.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=ids)
    if ctx.mode == "fsdp":
        try:
            from torch.distributed.device_mesh import init_device_mesh
            from torch.distributed.fsdp import fully_shard
        except ImportError:
            raise ZeusNbError(
                "FSDP training needs torch >= 2.6 (torch.distributed.fsdp.fully_shard)"
            ) from None
        mesh = init_device_mesh(ctx.device.type, (ctx.world_size,))
        # shard every top-level block that owns parameters, then the root (FSDP2's usual recipe)
        for child in model.children():
            if any(p.requires_grad for p in child.parameters()):
                fully_shard(child, mesh=mesh)
        fully_shard(model, mesh=mesh)
    return model


# --- data ---------------------------------------------------------------------------------------
class _EvalShard:
    """This rank's share of a dataset, padded so all ranks run the same number of batches.

    FSDP runs collectives inside forward, so ranks must agree on the batch count; padded items
    carry ``valid=0`` and are not counted, so accuracy is exact (unlike DistributedSampler's
    duplicated padding).
    """

    def __init__(self, dataset, rank: int, world_size: int):
        self.dataset = dataset
        n = len(dataset)
        per_rank = math.ceil(n / world_size)
        self.indices = [rank + k * world_size for k in range(per_rank)]
        self.n = n

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, i: int):
        idx = self.indices[i]
        valid = idx < self.n
        x, y = self.dataset[idx if valid else 0]
        return x, y, int(valid)


def loaders(datasets, config: TrainConfig, ctx: Context):
    from torch.utils.data import DataLoader
    from torch.utils.data.distributed import DistributedSampler

    pin = ctx.device.type == "cuda"
    workers = config.workers
    if workers is None:  # decoding JPEGs needs helpers; generated tensors do not
        workers = 0 if str(config.data) == "synthetic" else min(8, os.cpu_count() or 1)
    sampler = (
        DistributedSampler(datasets.train, ctx.world_size, ctx.rank, shuffle=True, seed=config.seed)
        if ctx.distributed
        else None
    )
    train = DataLoader(
        datasets.train,
        batch_size=config.batch_size,
        shuffle=sampler is None,
        sampler=sampler,
        num_workers=workers,
        pin_memory=pin,
        drop_last=False,
    )
    val = DataLoader(
        _EvalShard(datasets.val, ctx.rank, ctx.world_size),
        batch_size=config.batch_size,
        shuffle=False,
        num_workers=workers,
        pin_memory=pin,
    )
    return train, val, sampler


# --- the loop -----------------------------------------------------------------------------------
def _all_sum(ctx: Context, values: list[float]) -> list[float]:
    if not ctx.distributed:
        return values
    import torch
    import torch.distributed as dist

    t = torch.tensor(values, dtype=torch.float64, device=ctx.device)
    dist.all_reduce(t)
    return t.tolist()


def _gather(ctx: Context, obj: Any) -> list[Any]:
    if not ctx.distributed:
        return [obj]
    import torch.distributed as dist

    out: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(out, obj)
    return out


def evaluate(model, loader, ctx: Context) -> float:
    """Top-1 accuracy over the whole validation set (all ranks together)."""
    import torch

    model.eval()
    correct = total = 0
    with torch.no_grad():
        for x, y, valid in loader:
            x = x.to(ctx.device, non_blocking=True)
            y = y.to(ctx.device, non_blocking=True)
            valid = valid.to(ctx.device).bool()
            pred = model(x).argmax(dim=1)
            correct += int(((pred == y) & valid).sum())
            total += int(valid.sum())
    correct, total = _all_sum(ctx, [float(correct), float(total)])
    return correct / total if total else 0.0


def _make_optimizer(monitor, config: TrainConfig, factor: float, verbose: bool):
    if not config.power_limit_optimizer:
        return None
    from zeus_nb.optimizer import GlobalPowerLimitOptimizer
    from zeus_nb.optimizer.power_limit import MaxSlowdownConstraint

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
    )


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


def with_overrides(config: TrainConfig | None, overrides: dict[str, Any]) -> TrainConfig | None:
    """``config`` with some fields replaced (keyword arguments of the modules' ``train``)."""
    if not overrides:
        return config
    base = vars(config).copy() if config is not None else {}
    return TrainConfig(**{**base, **overrides})


def run(mode: str, config: TrainConfig | None = None) -> dict[str, Any]:
    """Train ``config.epochs`` epochs in this process; return (rank 0 also writes) the results."""
    from zeus_nb.data import SYNTHETIC, check_imagenet_folder, make_datasets

    config = config or TrainConfig()
    if str(config.data) != SYNTHETIC:
        check_imagenet_folder(config.data)  # fail fast, before the slow torch import
    import torch

    import zeus_nb
    from zeus_nb import device as zdevice
    from zeus_nb.monitor import ZeusMonitor
    from zeus_nb.train.models import build_model

    factor = max_slowdown_factor(config.max_slowdown)
    saved_env = {k: os.environ.get(k) for k in ("ZEUS_NB_BACKEND", "ZEUS_NB_SIM_SEED")}
    if config.backend is not None:
        # zeus_nb.step() and every monitor ask the environment, so pin the choice there
        os.environ["ZEUS_NB_BACKEND"] = zdevice.resolve_backend(config.backend)
    ctx: Context | None = None
    plo = None
    ok = False
    try:
        ctx = setup(mode, config)
        if ctx.distributed:
            # each rank's simulated GPU gets its own noise stream, as real GPUs would
            base = int(os.environ.get("ZEUS_NB_SIM_SEED") or 0)
            os.environ["ZEUS_NB_SIM_SEED"] = str(base + ctx.rank)
        # the same seed on every rank: FSDP2 shards each rank's own copy, so they must agree
        torch.manual_seed(config.seed)
        if ctx.device.type == "cuda":
            torch.backends.cudnn.benchmark = True  # autotuning happens in the optimizer's wait
        datasets = make_datasets(
            config.data,
            config.image_size,
            **(
                {
                    "num_classes": config.num_classes,
                    "train_size": config.train_size,
                    "val_size": config.val_size,
                    "seed": config.seed,
                }
                if str(config.data) == SYNTHETIC
                else {}
            ),
        )
        train_loader, val_loader, sampler = loaders(datasets, config, ctx)
        model = wrap_model(build_model(config.arch, datasets.num_classes).to(ctx.device), ctx)
        criterion = torch.nn.CrossEntropyLoss()
        optimizer = torch.optim.SGD(
            model.parameters(),
            lr=config.lr,
            momentum=config.momentum,
            weight_decay=config.weight_decay,
        )
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, config.lr_step_epochs, 0.1)

        system = zdevice.current(config.backend)
        monitor = ZeusMonitor(gpu_indices=[ctx.gpu_index])
        plo = _make_optimizer(monitor, config, factor, ctx.is_main) or _NoOptimizer()
        gpu = monitor.gpus[0]

        steps = len(train_loader)
        if config.max_steps_per_epoch is not None:
            steps = min(steps, config.max_steps_per_epoch)
        if ctx.is_main:
            print(
                f"zeus-nb train ({mode}): {config.arch} on {config.data}, {ctx.world_size} "
                f"process(es) on {ctx.device.type}, {steps} steps/epoch; GPU backend "
                f"{system.backend} ({gpu.name}); max slowdown {factor:g}",
                flush=True,
            )
        history = []
        wall0 = time.perf_counter()
        monitor.begin_window("training")
        for epoch in range(config.epochs):
            if sampler is not None:
                sampler.set_epoch(epoch)
            model.train()
            monitor.begin_window("epoch")
            plo.on_epoch_begin()
            bar = _progress(ctx, config, steps, f"epoch {epoch + 1}/{config.epochs}")
            loss_sum = torch.zeros((), dtype=torch.float64, device=ctx.device)
            seen = 0
            for step, (x, y) in enumerate(train_loader):
                if step >= steps:
                    break
                plo.on_step_begin()
                x = x.to(ctx.device, non_blocking=True)
                y = y.to(ctx.device, non_blocking=True)
                loss = criterion(model(x), y)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                zeus_nb.step()
                plo.on_step_end()
                loss_sum += loss.detach() * len(y)  # stays on the device: no sync per step
                seen += len(y)
                if bar is not None:
                    if step % 10 == 0:
                        bar.set_postfix(loss=f"{loss.item():.3f}", pl=f"{gpu.get_power_limit():g}W")
                    bar.update()
            plo.on_epoch_end()
            m = monitor.end_window("epoch")
            scheduler.step()
            if bar is not None:
                bar.close()
            loss_sum, seen = _all_sum(ctx, [float(loss_sum), float(seen)])
            accuracy = evaluate(model, val_loader, ctx)
            t_max, e_sum = _reduce_measurement(ctx, m.time, m.total_energy)
            record = {
                "epoch": epoch + 1,
                "train_loss": loss_sum / seen if seen else float("nan"),
                "val_accuracy": accuracy,
                "time_s": t_max,
                "energy_j": e_sum,
                "power_limit_w": gpu.get_power_limit(),
            }
            history.append(record)
            if ctx.is_main:
                print(
                    f"epoch {epoch + 1}/{config.epochs}: loss {record['train_loss']:.3f}, "
                    f"val accuracy {accuracy:.1%}, {t_max:.1f} s, {e_sum:.0f} J, "
                    f"power limit {record['power_limit_w']:g} W",
                    flush=True,
                )
        total = monitor.end_window("training")
        wall = time.perf_counter() - wall0

        rank_info = {
            "rank": ctx.rank,
            "local_rank": ctx.local_rank,
            "gpu_index": ctx.gpu_index,
            "power_limit_w": gpu.get_power_limit(),
            "optimal_power_limit_w": plo.optimal_power_limit,
            "time_s": total.time,
            "energy_j": total.total_energy,
        }
        ranks = _gather(ctx, rank_info)
        results = {
            "mode": mode,
            "world_size": ctx.world_size,
            "arch": config.arch,
            "data": str(config.data),
            "num_classes": datasets.num_classes,
            "device": ctx.device.type,
            "gpu_backend": system.backend,
            "gpu_name": gpu.name,
            "max_slowdown": factor,
            "steps_per_epoch": steps,
            "epochs": history,
            "accuracy": history[-1]["val_accuracy"],
            "time_s": max(r["time_s"] for r in ranks),
            "energy_j": sum(r["energy_j"] for r in ranks),
            "wall_time_s": wall,
            "power_limit_w": rank_info["power_limit_w"],
            "optimal_power_limit_w": plo.optimal_power_limit,
            "profiling_done": plo.optimal_power_limit is not None,
            # what the optimizer measured per limit (all ranks aggregated) and what it cost
            "profile": [
                {
                    "power_limit_w": m.power_limit,
                    "time_s": m.time,
                    "energy_j": m.energy,
                    "num_gpus": m.num_gpus,
                }
                for m in plo.measurements
            ],
            "profile_skipped_w": sorted(plo.abandoned, reverse=True),
            "profiling_time_s": plo.profiling_time,
            "profiling_energy_j": plo.profiling_energy,
            "ranks": ranks,
            "config": asdict(config),
        }
        if ctx.is_main:
            path = Path(config.results or f"runs/train_{mode}.json")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(results, indent=2) + "\n")
            print(
                f"done: accuracy {results['accuracy']:.1%}, {results['time_s']:.1f} s, "
                f"{results['energy_j']:.0f} J; power limit {results['power_limit_w']:g} W; "
                f"results in {path}",
                flush=True,
            )
        ok = True
        return results
    finally:
        if plo is not None and hasattr(plo, "close"):
            plo.close()  # put the GPU back at the limit it had before
        if ctx is not None:
            teardown(ctx, ok)
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _reduce_measurement(ctx: Context, t: float, e: float) -> tuple[float, float]:
    """(max time, summed energy) over ranks: the job's time and its total GPU energy."""
    times = _gather(ctx, t)
    return max(times), _all_sum(ctx, [e])[0]


def _progress(ctx: Context, config: TrainConfig, total: int, desc: str):
    if not (config.progress and ctx.is_main):
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="step", leave=False, file=sys.stderr)


# --- command line -----------------------------------------------------------------------------
def parser(mode: str) -> argparse.ArgumentParser:
    launch = {
        "single": "python -m zeus_nb.train.single",
        "dp": "torchrun --nproc_per_node N -m zeus_nb.train.dp",
        "fsdp": "torchrun --nproc_per_node N -m zeus_nb.train.fsdp",
    }[mode]
    p = argparse.ArgumentParser(
        prog=launch,
        description=(
            "Train an image classifier while the power-limit optimizer picks the lowest GPU power "
            "limit within the allowed slowdown (ZEUS_NB_MAX_SLOWDOWN, default 1.1)."
        ),
    )
    d = TrainConfig()
    p.add_argument(
        "--data",
        default=os.environ.get("ZEUS_NB_DATA_DIR", d.data),
        help="ImageNet-layout folder, or 'synthetic' (default: $ZEUS_NB_DATA_DIR, else synthetic)",
    )
    p.add_argument("--arch", default=d.arch, help="'tiny' or a torchvision model (resnet50)")
    p.add_argument("--epochs", type=int, default=d.epochs)
    p.add_argument("--batch-size", type=int, default=d.batch_size, help="per process")
    p.add_argument("--lr", type=float, default=d.lr)
    p.add_argument("--momentum", type=float, default=d.momentum)
    p.add_argument("--weight-decay", type=float, default=d.weight_decay)
    p.add_argument(
        "--lr-step-epochs", type=int, default=d.lr_step_epochs, help="StepLR period (x0.1)"
    )
    p.add_argument("--image-size", type=int, help="default 224 (folders) or 32 (synthetic)")
    p.add_argument("--workers", type=int, help="DataLoader workers (default 0 or up to 8)")
    p.add_argument("--max-steps-per-epoch", type=int, help="cap steps per epoch (quick runs)")
    p.add_argument("--num-classes", type=int, default=d.num_classes, help="synthetic data")
    p.add_argument("--train-size", type=int, default=d.train_size, help="synthetic data")
    p.add_argument("--val-size", type=int, default=d.val_size, help="synthetic data")
    p.add_argument(
        "--backend", choices=("auto", "sim", "nvml"), help="zeus-nb GPU backend (default: auto)"
    )
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default=d.device)
    if mode == "single":
        p.add_argument("--gpu", type=int, default=d.gpu, help="GPU index to train on")
    p.add_argument(
        "--no-power-limit-optimizer",
        dest="power_limit_optimizer",
        action="store_false",
        help="train at the current power limit",
    )
    p.add_argument(
        "--exhaustive",
        dest="adaptive",
        action="store_false",
        help="profile every power limit (default: skip limits that cannot win)",
    )
    p.add_argument("--max-slowdown", type=float, help="default: ZEUS_NB_MAX_SLOWDOWN or 1.1")
    p.add_argument("--wait-steps", type=int, default=d.wait_steps)
    p.add_argument("--warmup-steps", type=int, default=d.warmup_steps)
    p.add_argument("--profile-steps", type=int, default=d.profile_steps)
    p.add_argument("--pl-step", type=int, default=d.pl_step, help="W between profiled limits")
    p.add_argument("--profile-path", help="reuse (or save) the power-limit profile here")
    p.add_argument("--results", help=f"results JSON (default runs/train_{mode}.json)")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--no-progress", dest="progress", action="store_false")
    return p


def config_from_args(mode: str, argv: list[str] | None = None) -> TrainConfig:
    args = vars(parser(mode).parse_args(argv))
    known = {f.name for f in fields(TrainConfig)}
    return TrainConfig(**{k: v for k, v in args.items() if k in known})


def main(mode: str, argv: list[str] | None = None) -> int:
    """Command-line entry: errors that say what to do are printed without a traceback."""
    try:
        run(mode, config_from_args(mode, argv))
    except (ZeusNbError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if mode != "single" and os.environ.get("LOCAL_RANK") is not None:
        # Results are written, limits restored and the process group is gone. torch's C++
        # threads can still abort a finished gloo worker during interpreter teardown
        # ("terminate called without an active exception"), turning a good run into a
        # failure under torchrun, so a worker that finished leaves without that teardown.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


__all__ = ["MODES", "TrainConfig", "main", "max_slowdown_factor", "run"]
