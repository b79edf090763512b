"""Cutting a layer list into pipeline stages, building one stage, and counting its work.

Partition methods (``--partition-method``):

- ``parameters`` (default, Merak's): contiguous stages whose largest parameter count is as small
  as possible (the optimal linear partition);
- ``uniform``: the same number of layers per stage (the first stages take the remainder);
- ``layers:N0,N1,...``: exactly ``Ni`` layers in stage ``i`` (to build a deliberately unbalanced
  pipeline).

Stage modules are built on the meta device first and only this rank's layers are materialized,
so a rank never holds the whole model. Each layer is initialized from a seed derived from its
index, so every data-parallel replica of a stage starts from the same weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from zeus_nb.errors import ZeusNbError
from zeus_nb.train.pipeline.models import ModelConfig, build_layers, reset_parameters, sample_batch

PARTITION_METHODS = ("parameters", "uniform", "layers:N0,N1,...")


class PartitionError(ZeusNbError, ValueError):
    """The layers cannot be split as asked."""


def partition(weights: list[int], stages: int, method: str = "parameters") -> list[range]:
    """Contiguous layer ranges, one per stage, by ``method`` (see the module docstring)."""
    n = len(weights)
    if stages < 1:
        raise PartitionError(f"the number of stages must be >= 1, got {stages}")
    if stages > n:
        raise PartitionError(
            f"cannot cut {n} layers into {stages} stages; use at most {n} stages (--pp)"
        )
    if method == "parameters":
        sizes = _balanced_sizes(weights, stages)
    elif method == "uniform":
        q, r = divmod(n, stages)
        sizes = [q + (1 if i < r else 0) for i in range(stages)]
    elif method.startswith("layers:"):
        try:
            sizes = [int(v) for v in method.split(":", 1)[1].split(",")]
        except ValueError:
            raise PartitionError(f"{method!r}: give layer counts like layers:3,2,2,3") from None
        if len(sizes) != stages or sum(sizes) != n or min(sizes) < 1:
            raise PartitionError(
                f"{method!r} must give {stages} positive layer counts summing to {n}"
            )
    else:
        raise PartitionError(
            f"unknown partition method {method!r}; use one of {', '.join(PARTITION_METHODS)}"
        )
    out, start = [], 0
    for size in sizes:
        out.append(range(start, start + size))
        start += size
    return out


def _balanced_sizes(weights: list[int], stages: int) -> list[int]:
    """Layer counts minimizing the heaviest stage (dynamic programme over prefix sums)."""
    n = len(weights)
    prefix = [0]
    for w in weights:
        prefix.append(prefix[-1] + w)
    inf = float("inf")
    # best[k][i]: the smallest possible heaviest stage when the first i layers form k stages
    best = [[inf] * (n + 1) for _ in range(stages + 1)]
    cut = [[0] * (n + 1) for _ in range(stages + 1)]
    best[0][0] = 0
    for k in range(1, stages + 1):
        for i in range(k, n - (stages - k) + 1):
            for j in range(k - 1, i):
                cost = max(best[k - 1][j], prefix[i] - prefix[j])
                if cost < best[k][i]:
                    best[k][i], cut[k][i] = cost, j
    sizes, i = [], n
    for k in range(stages, 0, -1):
        j = cut[k][i]
        sizes.append(i - j)
        i = j
    return sizes[::-1]


@dataclass(frozen=True)
class StageWork:
    """Floating-point operations of one microbatch through a stage, per instruction."""

    forward: float
    backward: float

    def __getitem__(self, instruction: str) -> float:
        if instruction not in ("forward", "backward"):
            raise KeyError(instruction)
        return getattr(self, instruction)


def build_stage(config: ModelConfig, layers: range, seed: int, device: Any = "cpu"):
    """This stage's layers as an ``nn.Sequential`` on ``device``, initialized per layer."""
    from torch import nn

    modules = build_layers(config, device="meta")
    mine = []
    for i in layers:
        m = modules[i].to_empty(device=device)
        reset_parameters(m, seed * 100_003 + i)
        mine.append(m)
    return nn.Sequential(*mine)


def stage_work(config: ModelConfig, layers: range, microbatch_size: int) -> StageWork:
    """FLOPs of one microbatch's forward and backward through ``layers``, counted on meta tensors.

    The counter (``torch.utils.flop_counter``) sees every matmul and convolution, so the numbers
    follow the architecture: a stage of wide late convolutions weighs more than one of early
    ones with the same number of layers.
    """
    import torch
    from torch import nn
    from torch.utils.flop_counter import FlopCounterMode

    modules = build_layers(config, device="meta")
    x, _ = sample_batch(config, microbatch_size, device="meta")
    with torch.no_grad():
        for i in range(layers.start):
            x = modules[i](x)
    stage = nn.Sequential(*(modules[i] for i in layers))
    if x.is_floating_point():
        x = x.detach().requires_grad_(True)
    with FlopCounterMode(display=False) as counter:
        out = stage(x)
    forward = counter.get_total_flops()
    with FlopCounterMode(display=False) as counter:
        out.backward(torch.ones_like(out))
    backward = counter.get_total_flops()
    return StageWork(float(forward), float(backward))
