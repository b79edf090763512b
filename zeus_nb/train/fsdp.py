"""Fully sharded data-parallel training (FSDP2 ``fully_shard``) with the power-limit optimizer.

One process per GPU, started by torchrun; parameters, gradients and optimizer state are sharded
across ranks. Runs on CUDA with NCCL, or on the CPU with gloo::

    torchrun --nproc_per_node gpu -m zeus_nb.train.fsdp --data DATA_DIR --arch resnet50
    torchrun --nproc_per_node 2 -m zeus_nb.train.fsdp --data synthetic --backend sim
"""

from zeus_nb.train.cli import main, trainer

MODE = "fsdp"
train = trainer(MODE)

if __name__ == "__main__":
    raise SystemExit(main(MODE))
