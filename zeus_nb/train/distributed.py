"""Processes and devices of a data-parallel job: ranks, the GPU system per rank, model wrapping.

The reductions over ranks live in :mod:`zeus_nb.utils.framework` (the optimizers use them too).
Nothing here imports torch at module level.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from zeus_nb import device as zeus_device
from zeus_nb.errors import InputError, ZeusNbError
from zeus_nb.inputs.env import env
from zeus_nb.train import MODES
from zeus_nb.utils.framework import initialized_dist

if TYPE_CHECKING:
    from zeus_nb.device import GPUSystem
    from zeus_nb.train.config import TrainConfig


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


def _torch_device(config: TrainConfig, index: int, processes: int = 1):
    """(torch device, uses CUDA) for GPU ``index`` of a job of ``processes`` on this machine,
    made CUDA's current device. ``auto`` takes CUDA only where every process has a GPU of its
    own, so all ranks choose alike (a job of 2 ranks on simulated GPUs beside one real GPU
    trains on the CPU, not on a ``cuda:1`` that does not exist)."""
    import torch

    have = torch.cuda.device_count() if torch.cuda.is_available() else 0
    need = max(index + 1, processes)
    if config.device == "cuda" and have < need:
        raise ZeusNbError(
            f"--device cuda: this job needs {need} CUDA GPU(s) (one per process, GPU index "
            f"{index}) and torch sees {have}; run fewer processes, or use --device cpu or auto"
        )
    if config.device == "cpu" or have < need:
        return torch.device("cpu"), False
    device = torch.device(f"cuda:{index}")
    torch.cuda.set_device(device)
    return device, True


def setup(mode: str, config: TrainConfig) -> Context:
    """Pick the device and, for dp/fsdp, join the process group torchrun prepared."""
    if mode not in MODES:
        raise InputError(f"mode must be one of {MODES}, got {mode!r}")
    if mode == "single":
        device, _ = _torch_device(config, config.gpu)
        return Context(mode, device=device, gpu_index=config.gpu)

    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        raise ZeusNbError(
            f"zeus_nb.train.{mode} runs one process per GPU under torchrun, e.g.\n"
            f"  torchrun --nproc_per_node 2 -m zeus_nb.train.{mode} --data synthetic --backend sim"
        )
    import torch.distributed as dist

    local_rank = env("LOCAL_RANK", 0)
    device, use_cuda = _torch_device(config, local_rank, env("LOCAL_WORLD_SIZE", 1))
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
    if not ctx.distributed:
        return zeus_device.current(backend)
    return zeus_device.create(backend, seed_offset=ctx.rank)


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
