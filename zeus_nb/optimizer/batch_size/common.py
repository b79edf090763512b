"""Zeus's ``JobSpec`` for the in-training batch-size optimizer (same module path as Zeus's).

See :class:`zeus_nb.optimizer.batch_size.client.TrainingJobSpec`. The recurrence-level
:class:`zeus_nb.optimizer.batch_size.JobSpec` (what the store keeps) is another class.
"""

from zeus_nb.optimizer.batch_size.client import TrainingJobSpec as JobSpec

__all__ = ["JobSpec"]
