"""Image-classification training with the power-limit optimizer: one GPU, DDP and FSDP.

Entry points (each a thin wrapper around :func:`zeus_nb.train.loop.run`)::

    python -m zeus_nb.train.single --data DATA_DIR                      # one GPU
    torchrun --nproc_per_node gpu -m zeus_nb.train.dp --data DATA_DIR    # DistributedDataParallel
    torchrun --nproc_per_node gpu -m zeus_nb.train.fsdp --data DATA_DIR  # FullyShardedDataParallel

``--data synthetic --backend sim`` runs anywhere, on the CPU, with simulated GPUs. From Python or a
notebook, :func:`zeus_nb.train.launch.launch` starts any of the three (DDP and FSDP as torchrun
would, their ranks forked by :mod:`~zeus_nb.train.forkrun`) and returns the results dictionary.
Importing this package does not import torch.

Modules: :mod:`~zeus_nb.train.config` (``TrainConfig``, flags, slowdown factor),
:mod:`~zeus_nb.train.distributed` (ranks, GPU system per rank, the reductions the power-limit
optimizer also uses), :mod:`~zeus_nb.train.loaders` (data, evaluation), :mod:`~zeus_nb.train.loop`
(``run``), :mod:`~zeus_nb.train.results`, :mod:`~zeus_nb.train.cli` (what ``single``, ``dp`` and
``fsdp`` share), :mod:`~zeus_nb.train.models`, :mod:`~zeus_nb.train.sweep_fn` (``torch_train_fn``
for live sweeps) and :mod:`~zeus_nb.train.launch` with :mod:`~zeus_nb.train.forkrun`.
"""

from __future__ import annotations

MODES = ("single", "dp", "fsdp")
