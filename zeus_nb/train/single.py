"""Single-GPU training with the power-limit optimizer.

python -m zeus_nb.train.single --data DATA_DIR [--gpu 0]
python -m zeus_nb.train.single --data synthetic --backend sim   # CPU, simulated GPU
"""

from __future__ import annotations

import sys
from typing import Any

from zeus_nb.train.common import TrainConfig, main, run, with_overrides

MODE = "single"


def train(config: TrainConfig | None = None, **overrides: Any) -> dict[str, Any]:
    """Run training in this process; keyword overrides replace fields of ``config``."""
    return run(MODE, with_overrides(config, overrides))


if __name__ == "__main__":
    sys.exit(main(MODE))
