"""The job specification of the trace-driven simulator (Zeus's ``zeus._legacy.job.Job``).

A :class:`Job` names one traced workload (dataset, network, optimizer, target metric and epoch
cap) plus the user's default batch size and learning rate. It is frozen and hashable, so
optimizers keep one state per job in a dictionary keyed by it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from zeus_nb.data.workloads import name_key, name_keys
from zeus_nb.errors import InputError
from zeus_nb.utils.lr_scaler import LinearScaler, SquareRootScaler

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Job"]

# Optimizers whose learning rate follows the square root of the batch-size ratio, and those
# that follow it linearly (see zeus_nb.utils.lr_scaler).
_SQRT_SCALED = ("adam", "adamw", "adadelta")
_LINEAR_SCALED = ("sgd",)


@dataclass(frozen=True, unsafe_hash=True)
class Job:
    """One recurring training job.

    ``default_bs`` is the batch size b0 the user would run (pruning starts there) and
    ``default_lr`` its learning rate. ``workdir`` and ``command`` only matter for launching real
    runs: ``command`` is an argument list whose pieces ``{bs}``, ``{lr}``, ``{seed}``,
    ``{epochs}``, ``{slice_number}`` and ``{target_metric}`` :meth:`gen_command` fills in. The
    command takes no part in equality or the hash.
    """

    dataset: str
    network: str
    optimizer: str
    target_metric: float
    max_epochs: int
    default_bs: int | None = None
    default_lr: float | None = None
    workdir: str | None = None
    command: list[str] | None = field(default=None, hash=False, compare=False)

    def __str__(self) -> str:
        bs = "" if self.default_bs is None else f",bs{self.default_bs}"
        return (
            f"Job({self.dataset},{self.network},{self.optimizer},{self.target_metric}"
            f"{bs}~{self.max_epochs})"
        )

    def to_logdir(self) -> str:
        """A directory name that spells out the job's settings."""
        parts = (
            self.dataset,
            self.network,
            f"bs{self.default_bs}",
            self.optimizer,
            f"lr{self.default_lr}",
            f"tm{self.target_metric}",
            f"me{self.max_epochs}",
        )
        return "+".join(parts)

    def filter_df(self, df: pd.DataFrame) -> pd.DataFrame:
        """The rows of a trace (or of the train and power traces merged) that belong to this job.

        Names match as :func:`~zeus_nb.data.workloads.name_key` compares them (any case), the
        target metric within rounding.
        """
        target = float(self.target_metric)
        keep = (
            (name_keys(df["dataset"]) == name_key(self.dataset))
            & (name_keys(df["network"]) == name_key(self.network))
            & (name_keys(df["optimizer"]) == name_key(self.optimizer))
            & ((df["target_metric"] - target).abs() <= 1e-9 * max(1.0, abs(target)))
        )
        return df.loc[keep]

    def gen_command(
        self,
        batch_size: int,
        learning_rate: float,
        seed: int,
        rec_i: int,
    ) -> list[str]:
        """The job's command with its placeholders filled in for one launch.

        ``rec_i`` is the recurrence number (``{slice_number}``); ``{epoch}``/``{epochs}``
        become ``max_epochs``. A piece is replaced only when it is a placeholder as a whole.
        """
        if not self.command:
            raise InputError(f"{self} has no command; pass command=[...] to Job to launch it")
        values = {
            "{bs}": batch_size,
            "{batch_size}": batch_size,
            "{lr}": learning_rate,
            "{learning_rate}": learning_rate,
            "{seed}": seed,
            "{epoch}": self.max_epochs,
            "{epochs}": self.max_epochs,
            "{slice_number}": rec_i,
            "{target_metric}": self.target_metric,
        }
        return [str(values[p]) if p in values else p for p in self.command]

    def scale_lr(self, batch_size: int) -> float:
        """``default_lr`` scaled from ``default_bs`` to ``batch_size``.

        Square-root scaling for adaptive optimizers (Adam, AdamW, Adadelta), linear for SGD.
        """
        if not self.default_bs or not self.default_lr:
            raise InputError(f"{self}: pass default_bs= and default_lr= to Job to scale its lr")
        name = self.optimizer.lower()
        if name in _SQRT_SCALED:
            return SquareRootScaler(bs=self.default_bs, lr=self.default_lr).compute_lr(batch_size)
        if name in _LINEAR_SCALED:
            return LinearScaler(bs=self.default_bs, lr=self.default_lr).compute_lr(batch_size)
        raise InputError(
            f"no learning-rate scaling rule for optimizer {self.optimizer!r}; "
            f"known: {', '.join(_SQRT_SCALED + _LINEAR_SCALED)}"
        )
