"""The six workloads of the Zeus NSDI '23 traces and the knobs the paper trained them with.

Plain data without imports of other layers, so the input schemas (which check a traced epoch
against the workload's sample count) can read it; :mod:`zeus_nb.data.traces` re-exports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from zeus_nb.errors import InputError

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class Workload:
    """One of the six traced workloads and the knobs the paper trained it with.

    ``num_samples`` is the size of the public training set; the simulator uses it only to split a
    measured epoch into steps (steps per epoch = ceil(num_samples / batch size)).
    """

    dataset: str
    network: str
    optimizer: str
    target_metric: float
    max_epochs: int
    default_batch_size: int
    num_samples: int
    higher_is_better: bool = True

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.dataset, self.network, self.optimizer)

    def steps_per_epoch(self, batch_size: int) -> int:
        return -(-self.num_samples // int(batch_size))


WORKLOADS: dict[str, Workload] = {
    w.dataset: w
    for w in (
        Workload("cifar100", "shufflenetv2", "adadelta", 0.6, 100, 1024, 50_000),
        Workload("imagenet", "resnet50", "adadelta", 0.65, 100, 256, 1_281_167),
        Workload("squad", "bert_base_uncased", "adamw", 84.0, 6, 32, 87_599),
        Workload("librispeech", "deepspeech2", "adamw", 40.0, 16, 256, 281_241, False),
        Workload("movielens-1m", "ncf", "adam", 0.41, 100, 1024, 1_000_209),
        Workload("sentiment140", "bert_base_uncased", "adamw", 0.84, 10, 128, 1_600_000),
    )
}


def name_key(name: object) -> str:
    """How dataset, network and optimizer names compare everywhere: case and surrounding space
    ignored (``ImageNet`` in a trace is ``imagenet``). Traces are normalized when read, and
    every name a user gives goes through this before it is matched."""
    return str(name).strip().lower()


def name_keys(column: pd.Series) -> pd.Series:
    """:func:`name_key` of each name in a trace's column, computed once per distinct name (a
    simulation filters a trace of thousands of rows at every recurrence)."""
    return column.map({v: name_key(v) for v in column.unique()})


def get_workload(name: str) -> Workload:
    """Look up a workload by dataset name (``imagenet``) or ``dataset/network``."""
    key = name_key(name.split("/")[0])
    if key not in WORKLOADS:
        raise InputError(f"unknown workload {name!r}; choose one of: {', '.join(WORKLOADS)}")
    return WORKLOADS[key]
