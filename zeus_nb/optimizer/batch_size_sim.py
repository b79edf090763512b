"""Moved to :mod:`zeus_nb.optimizer.batch_size.simulator`; this name keeps old imports working.

The old module name is an alias of the new module, so every name (and monkeypatching) behaves
as before.
"""

import sys

from zeus_nb.optimizer.batch_size import simulator

sys.modules[__name__] = simulator
