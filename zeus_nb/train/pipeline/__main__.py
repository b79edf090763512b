"""``torchrun --nproc_per_node N -m zeus_nb.train.pipeline ...``: one process per stage."""

import sys

from zeus_nb.train.pipeline.trainer import main

sys.exit(main())
