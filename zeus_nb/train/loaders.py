"""Datasets, data loaders and evaluation of a training run, one rank's share each."""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING

from zeus_nb.data.datasets import SYNTHETIC, make_datasets
from zeus_nb.utils.framework import all_sum

if TYPE_CHECKING:
    from zeus_nb.train.config import TrainConfig
    from zeus_nb.train.distributed import Context


def datasets(config: TrainConfig):
    """The configured datasets: an ImageNet-layout folder, or the synthetic set."""

    synthetic = {}
    if str(config.data) == SYNTHETIC:
        synthetic = {
            "num_classes": config.num_classes,
            "train_size": config.train_size,
            "val_size": config.val_size,
            "seed": config.seed,
        }
    return make_datasets(config.data, config.image_size, **synthetic)


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


def loaders(data, config: TrainConfig, ctx: Context):
    """(train loader, validation loader, train sampler or None) for this rank."""
    from torch.utils.data import DataLoader
    from torch.utils.data.distributed import DistributedSampler

    pin = ctx.device.type == "cuda"
    workers = config.workers
    if workers is None:  # decoding JPEGs needs helpers; generated tensors do not
        workers = 0 if str(config.data) == "synthetic" else min(8, os.cpu_count() or 1)
    sampler = (
        DistributedSampler(data.train, ctx.world_size, ctx.rank, shuffle=True, seed=config.seed)
        if ctx.distributed
        else None
    )
    train = DataLoader(
        data.train,
        batch_size=config.batch_size,
        shuffle=sampler is None,
        sampler=sampler,
        num_workers=workers,
        pin_memory=pin,
        drop_last=False,
    )
    val = DataLoader(
        _EvalShard(data.val, ctx.rank, ctx.world_size),
        batch_size=config.batch_size,
        shuffle=False,
        num_workers=workers,
        pin_memory=pin,
    )
    return train, val, sampler


def accuracy_counts(model, loader, device) -> tuple[int, int]:
    """(correct, counted) top-1 predictions of ``model`` on this process's ``loader``.

    Batches are ``(x, y)`` or ``(x, y, valid)``; items with ``valid == 0`` are padding and are
    not counted.
    """
    import torch

    model.eval()
    correct = total = 0
    with torch.no_grad():
        for x, y, *rest in loader:
            x = x.to(device, non_blocking=True)
            y = y.to(device, non_blocking=True)
            valid = rest[0].to(device).bool() if rest else torch.ones_like(y, dtype=torch.bool)
            pred = model(x).argmax(dim=1)
            correct += int(((pred == y) & valid).sum())
            total += int(valid.sum())
    return correct, total


def evaluate(model, loader, ctx: Context) -> float:
    """Top-1 accuracy over the whole validation set (all ranks together)."""
    correct, total = all_sum(list(map(float, accuracy_counts(model, loader, ctx.device))))
    return correct / total if total else 0.0
