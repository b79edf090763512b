"""Processes and reductions of a data-parallel job, shared by the training loop and the optimizer.

Every reduction here asks :func:`initialized_dist` whether ``torch.distributed`` is running and
otherwise returns the local values, so the same code serves a single-process notebook and a
torchrun job. Nothing here imports torch at module level: importing the power-limit optimizer or
this package stays cheap.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from zeus_nb.errors import ZeusNbError
from zeus_nb.train import MODES

if TYPE_CHECKING:
    from zeus_nb.device import GPUSystem
    from zeus_nb.train.config import TrainConfig


# --- reductions -----------------------------------------------------------------------------------
def initialized_dist():
    """``torch.distributed`` if the program initialized it, else None (never imports torch)."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist
    return None


def _reduce_device(dist) -> str:
    """NCCL reduces CUDA tensors only (on this rank's current GPU); gloo reduces CPU tensors."""
    if dist.get_backend() == "nccl":
        import torch

        return f"cuda:{torch.cuda.current_device()}"
    return "cpu"


def all_sum(values: list[float]) -> list[float]:
    """Element-wise sums of ``values`` over all ranks; the local values otherwise."""
    dist = initialized_dist()
    if dist is None:
        return list(values)
    import torch

    t = torch.tensor(values, dtype=torch.float64, device=_reduce_device(dist))
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t.tolist()


def gather(obj: Any) -> list[Any]:
    """Every rank's ``obj`` in rank order; ``[obj]`` otherwise."""
    dist = initialized_dist()
    if dist is None:
        return [obj]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def reduce_time_energy(time: float, energy: float, gpus: int) -> tuple[float, float, int]:
    """(max time, summed energy, summed GPU count) over all ranks; local values otherwise.

    The job's time is its slowest rank's, its energy is every GPU's together.
    """
    dist = initialized_dist()
    if dist is None:
        return time, energy, gpus
    import torch

    dev = _reduce_device(dist)
    t = torch.tensor([time], dtype=torch.float64, device=dev)
    s = torch.tensor([energy, float(gpus)], dtype=torch.float64, device=dev)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    dist.all_reduce(s, op=dist.ReduceOp.SUM)
    return float(t[0]), float(s[0]), int(round(float(s[1])))


# --- processes and devices ----------------------------------------------------------------------
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


def _torch_device(config: TrainConfig, index: int):
    """(torch device, uses CUDA) for GPU ``index``, made CUDA's current device."""
    import torch

    if config.device == "cuda" and not torch.cuda.is_available():
        raise ZeusNbError("--device cuda: torch sees no CUDA GPU; use --device cpu or auto")
    use_cuda = torch.cuda.is_available() and config.device != "cpu"
    if not use_cuda:
        return torch.device("cpu"), False
    device = torch.device(f"cuda:{index}")
    torch.cuda.set_device(device)
    return device, True


def setup(mode: str, config: TrainConfig) -> Context:
    """Pick the device and, for dp/fsdp, join the process group torchrun prepared."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if mode == "single":
        device, _ = _torch_device(config, config.gpu)
        return Context(mode, device=device, gpu_index=config.gpu)

    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        raise ZeusNbError(
            f"zeus_nb.train.{mode} runs one process per GPU under torchrun, e.g.\n"
            f"  torchrun --nproc_per_node 2 -m zeus_nb.train.{mode} --data synthetic --backend sim"
        )
    import torch.distributed as dist

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device, use_cuda = _torch_device(config, local_rank)
    comm = "nccl" if use_cuda else "gloo"
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


def gpu_system(backend: str | None, ctx: Context) -> GPUSystem:
    """The GPU system this rank measures, chosen by value (never through the environment).

    A single process uses the process's current system (so one a notebook configured applies);
    each rank of a data-parallel job gets its own, whose simulated noise is seeded by its rank,
    as real GPUs would differ.
    """
    from zeus_nb import device

    if not ctx.distributed:
        return device.current(backend)
    return device.create(backend, seed_offset=ctx.rank)


def teardown(ctx: Context, ok: bool = True) -> None:
    """Leave the process group; after success, wait for every rank first.

    Destroying a gloo group while a peer is still using it aborts the process at exit
    ("terminate called without an active exception"), so a clean run meets at a barrier.
    """
    if not ctx.distributed:
        return
    dist = initialized_dist()
    if dist is not None:
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
