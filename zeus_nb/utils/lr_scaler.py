"""Learning-rate scaling rules for a changed batch size (Zeus's ``zeus.utils.lr_scaler``).

When a job trains with another batch size than the one its learning rate was tuned for, the
learning rate has to follow: linearly for SGD (Goyal et al., 2017), with the square root of the
ratio for adaptive optimizers such as Adam (their updates are normalized per parameter).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from zeus_nb.errors import InputError

__all__ = ["LinearScaler", "SquareRootScaler"]


def _check(bs: int, lr: float) -> None:
    if not bs > 0:
        raise InputError(f"the initial batch size must be positive, got bs={bs}")
    if not (math.isfinite(lr) and lr > 0):
        raise InputError(f"the initial learning rate must be a positive number, got lr={lr}")


@dataclass
class SquareRootScaler:
    """lr x sqrt(new batch size / bs): for adaptive optimizers (Adam, AdamW, Adadelta).

    ``bs`` is the batch size the learning rate ``lr`` was chosen for.
    """

    bs: int
    lr: float

    def __post_init__(self) -> None:
        _check(self.bs, self.lr)

    def compute_lr(self, new_bs: int) -> float:
        """The learning rate for batch size ``new_bs``."""
        return self.lr * math.sqrt(new_bs / self.bs)


@dataclass
class LinearScaler:
    """lr x new batch size / bs: for SGD.

    ``bs`` is the batch size the learning rate ``lr`` was chosen for.
    """

    bs: int
    lr: float

    def __post_init__(self) -> None:
        _check(self.bs, self.lr)

    def compute_lr(self, new_bs: int) -> float:
        """The learning rate for batch size ``new_bs``."""
        return self.lr * new_bs / self.bs
