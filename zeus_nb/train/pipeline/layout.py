"""Where each pipeline rank sits: its stage, its replica, and the process groups it talks in."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from zeus_nb.errors import ZeusNbError


@dataclass
class Layout:
    """Where this rank sits: its stage, its data-parallel replica, and the groups it talks in."""

    rank: int
    world_size: int
    pp: int
    dp: int
    stage: int
    replica: int
    pp_group: Any
    link_group: Any
    dp_group: Any

    @property
    def is_first(self) -> bool:
        return self.stage == 0

    @property
    def is_last(self) -> bool:
        return self.stage == self.pp - 1


def setup_layout(config) -> Layout:
    """Join torchrun's process group (gloo) and build the pipeline and data-parallel groups.

    Rank ``r`` runs stage ``r % pp`` of replica ``r // pp``. Every rank creates every group, in
    the same order, as ``torch.distributed.new_group`` requires.
    """
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        raise ZeusNbError(
            "zeus_nb.train.pipeline runs one process per stage under torchrun, e.g.\n"
            "  torchrun --nproc_per_node 2 -m zeus_nb.train.pipeline --model tiny-gpt --backend sim"
        )
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    pp = config.pp or world // config.dp
    if pp * config.dp != world:
        raise ZeusNbError(
            f"--pp {pp} x --dp {config.dp} = {pp * config.dp} processes, but torchrun started "
            f"{world}; pass --nproc_per_node {pp * config.dp}"
        )
    stage, replica = rank % pp, rank // pp
    pp_ranks = [[r * pp + s for s in range(pp)] for r in range(config.dp)]
    dp_ranks = [[r * pp + s for r in range(config.dp)] for s in range(pp)]
    pp_groups = [dist.new_group(ranks) for ranks in pp_ranks]
    link_groups = [dist.new_group(ranks) for ranks in pp_ranks]
    dp_groups = [dist.new_group(ranks) for ranks in dp_ranks]
    return Layout(
        rank,
        world,
        pp,
        config.dp,
        stage,
        replica,
        pp_groups[replica],
        link_groups[replica],
        dp_groups[stage],
    )


def all_reduce_grads(module, layout: Layout) -> None:
    """Average gradients over the data-parallel replicas of this stage."""
    if layout.dp == 1:
        return
    import torch.distributed as dist

    for p in module.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad, group=layout.dp_group)
            p.grad /= layout.dp


def teardown(layout: Layout | None, ok: bool) -> None:
    import torch.distributed as dist

    if layout is not None and dist.is_initialized():
        if ok:
            dist.barrier()
        dist.destroy_process_group()
