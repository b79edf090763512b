"""Data-parallel reductions shared by the training loop and the power-limit optimizer.

Never imports torch itself: a job that did not initialize ``torch.distributed`` gets its local values
back, so the optimizer stays usable in single-process notebooks.
"""

from __future__ import annotations

import sys


def initialized_dist():
    """``torch.distributed`` if the program initialized it, else None (never imports torch)."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist
    return None


def reduce_time_energy(time: float, energy: float, gpus: int) -> tuple[float, float, int]:
    """(max time, summed energy, summed GPU count) over all ranks; local values otherwise.

    The job's time is its slowest rank's, its energy is every GPU's together.
    """
    dist = initialized_dist()
    if dist is None:
        return time, energy, gpus
    import torch

    dev = "cpu"
    if dist.get_backend() == "nccl":
        dev = f"cuda:{torch.cuda.current_device()}"
    t = torch.tensor([time], dtype=torch.float64, device=dev)
    s = torch.tensor([energy, float(gpus)], dtype=torch.float64, device=dev)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    dist.all_reduce(s, op=dist.ReduceOp.SUM)
    return float(t[0]), float(s[0]), int(round(float(s[1])))
