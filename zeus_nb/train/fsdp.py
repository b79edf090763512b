"""Fully sharded data-parallel training (FSDP2 ``fully_shard``) with the power-limit optimizer.

One process per GPU, started by torchrun; parameters, gradients and optimizer state are sharded
across ranks. Runs on CUDA with NCCL, or on the CPU with gloo::

    torchrun --nproc_per_node gpu -m zeus_nb.train.fsdp --data DATA_DIR --arch resnet50
    torchrun --nproc_per_node 2 -m zeus_nb.train.fsdp --data synthetic --backend sim
"""

from __future__ import annotations

import sys
from typing import Any

from zeus_nb.train.common import TrainConfig, main, run, with_overrides

MODE = "fsdp"


def train(config: TrainConfig | None = None, **overrides: Any) -> dict[str, Any]:
    """Run training in this process; keyword overrides replace fields of ``config``."""
    return run(MODE, with_overrides(config, overrides))


if __name__ == "__main__":
    sys.exit(main(MODE))
