"""Image-classification training with the power-limit optimizer: one GPU, DDP and FSDP.

Entry points (each a thin wrapper around :func:`zeus_nb.train.common.run`)::

    python -m zeus_nb.train.single --data DATA_DIR                      # one GPU
    torchrun --nproc_per_node gpu -m zeus_nb.train.dp --data DATA_DIR    # DistributedDataParallel
    torchrun --nproc_per_node gpu -m zeus_nb.train.fsdp --data DATA_DIR  # FullyShardedDataParallel

``--data synthetic --backend sim`` runs anywhere, on the CPU, with simulated GPUs. From Python or a
notebook, :func:`zeus_nb.train.launch.launch` starts any of the three (under torchrun for DDP and
FSDP) and returns the results dictionary. Importing this package does not import torch.
"""

from __future__ import annotations

MODES = ("single", "dp", "fsdp")
