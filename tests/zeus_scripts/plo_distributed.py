"""Zeus's data-parallel power-limit example, in its shape; only its imports name zeus_nb.

Run under torchrun: one ZeusMonitor per local rank on that rank's GPU, one optimizer per rank,
DDP (or FSDP with --fsdp) around a small model. Everything up to the first line that needs CUDA
runs as Zeus's example does; the device is the CPU here and the GPUs are simulated (the wall
clock, so no zeus-nb call is needed). Each rank prints the limit it chose.
"""

import os
import sys

import torch
import torch.distributed as dist
from torch import nn

from zeus_nb.monitor import ZeusMonitor
from zeus_nb.optimizer.power_limit import GlobalPowerLimitOptimizer, MaxSlowdownConstraint
from zeus_nb.utils.env import get_env


def main() -> None:
    dist.init_process_group("gloo")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
    if "--fsdp" in sys.argv:
        from torch.distributed.fsdp import fully_shard

        fully_shard(model)
    else:
        model = nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    monitor = ZeusMonitor(gpu_indices=[local_rank])
    plo = GlobalPowerLimitOptimizer(
        monitor,
        MaxSlowdownConstraint(factor=get_env("ZEUS_MAX_SLOWDOWN", float, 1.1)),
        warmup_steps=2,
        profile_steps=5,
    )
    for _epoch in range(4):
        plo.on_epoch_begin()
        for _ in range(30):
            plo.on_step_begin()
            x, y = torch.randn(16, 32), torch.randint(0, 4, (16,))
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            plo.on_step_end()
        plo.on_epoch_end()
    print(f"rank {dist.get_rank()} chose {plo.state.optimal_power_limit // 1000} W", flush=True)
    dist.barrier()  # a gloo group destroyed while a peer still uses it aborts at exit
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
