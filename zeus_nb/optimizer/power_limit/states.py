"""The power-limit optimizer's states: one small object per phase, named by :class:`Phase`.

A state holds only what its phase needs (steps so far, the open window), so a transition is
replacing one object with another and no counter outlives its phase.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = ["Done", "Phase", "Profiling", "State", "Waiting", "WarmingUp"]


class Phase(str, Enum):
    """Where the optimizer is; the values are the names earlier versions used."""

    WAIT = "wait"
    WARMUP = "warmup"
    PROFILE = "profile"
    DONE = "done"


@dataclass
class Waiting:
    """Letting ``wait_steps`` steps pass before profiling; ``steps`` so far."""

    steps: int = 0
    phase = Phase.WAIT


@dataclass
class WarmingUp:
    """Unmeasured steps at the limit ``order[index]``."""

    index: int
    steps: int = 0
    phase = Phase.WARMUP


@dataclass
class Profiling:
    """Measured steps at ``order[index]``; ``window`` is open between steps, None across epochs.

    ``time``/``energy`` accumulate the window's paused segments; ``segment_start`` is the
    (clock, energy) reading where the open segment began (for partial adaptive checks).
    """

    index: int
    steps: int = 0
    time: float = 0.0
    energy: float = 0.0
    window: str | None = None
    segment_start: tuple[float, float] = (0.0, 0.0)
    phase = Phase.PROFILE


@dataclass
class Done:
    """The optimum is known; ``applied`` once it is set on the GPUs."""

    applied: bool = False
    phase = Phase.DONE


State = Waiting | WarmingUp | Profiling | Done
