"""Data-parallel training (DistributedDataParallel) with the power-limit optimizer.

One process per GPU, started by torchrun; the optimizer aggregates all ranks' measurements so
every GPU gets the same limit::

    torchrun --nproc_per_node gpu -m zeus_nb.train.dp --data DATA_DIR
    torchrun --nproc_per_node 2 -m zeus_nb.train.dp --data synthetic --backend sim   # CPU, gloo
"""

from zeus_nb.train.cli import main, trainer

MODE = "dp"
train = trainer(MODE)

if __name__ == "__main__":
    raise SystemExit(main(MODE))
