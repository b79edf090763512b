"""Data-parallel training (DistributedDataParallel) with the power-limit optimizer.

One process per GPU, started by torchrun; the optimizer aggregates all ranks' measurements so
every GPU gets the same limit::

    torchrun --nproc_per_node gpu -m zeus_nb.train.dp --data DATA_DIR
    torchrun --nproc_per_node 2 -m zeus_nb.train.dp --data synthetic --backend sim   # CPU, gloo
"""

from __future__ import annotations

import sys
from typing import Any

from zeus_nb.train.common import TrainConfig, main, run, with_overrides

MODE = "dp"


def train(config: TrainConfig | None = None, **overrides: Any) -> dict[str, Any]:
    """Run training in this process; keyword overrides replace fields of ``config``."""
    return run(MODE, with_overrides(config, overrides))


if __name__ == "__main__":
    sys.exit(main(MODE))
