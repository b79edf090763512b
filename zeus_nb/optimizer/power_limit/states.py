"""The power-limit optimizer's states: one small object per phase, as Zeus names them.

A state holds only what its phase needs, so a transition is replacing one object with another
and no counter outlives its phase. The classes and their public fields are Zeus's
(:class:`Ready`, :class:`Warmup`, :class:`Profiling`, :class:`Done`; power limits in mW,
``steps`` counted down at each step's beginning as Zeus counts them), so Zeus code that
inspects ``plo.state`` (``isinstance(plo.state, Done)``, ``plo.state.optimal_power_limit``) runs
unchanged. zeus-nb's extra fields (the limit's index in the profiling order, the paused
window) follow. ``Waiting`` and ``WarmingUp`` are earlier names of ``Ready`` and ``Warmup``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

__all__ = ["Done", "Phase", "Profiling", "Ready", "State", "Waiting", "Warmup", "WarmingUp", "mw"]


def mw(watts: float) -> int:
    """A power limit in W as Zeus's states hold it: whole mW."""
    return int(round(watts * 1000))


class Phase(str, Enum):
    """Where the optimizer is; the values are the names earlier versions used."""

    WAIT = "wait"
    WARMUP = "warmup"
    PROFILE = "profile"
    DONE = "done"


@dataclass
class Ready:
    """``steps`` more step beginnings (this one included) before ``next_power_limit`` (mW),
    ``order[index]``, is set and warmed up at."""

    next_power_limit: int
    steps: int
    index: int = 0
    phase = Phase.WAIT


@dataclass
class Warmup:
    """At ``current_power_limit`` (mW), ``order[index]``: profiling starts when ``steps``,
    counted down at each step's beginning, reaches 0."""

    current_power_limit: int
    steps: int
    index: int = 0
    phase = Phase.WARMUP


@dataclass
class Profiling:
    """Measuring ``current_power_limit`` (mW), ``order[index]``: the window ends when
    ``steps``, counted down at each step's beginning, reaches 0.

    ``taken`` steps are measured so far; ``window`` is None while paused across epochs;
    ``time``/``energy`` accumulate the window's paused segments; ``segment_start`` is the
    (clock, energy) reading where the open segment began (for partial adaptive checks).
    """

    current_power_limit: int
    steps: int
    index: int = 0
    taken: int = 0
    time: float = 0.0
    energy: float = 0.0
    window: str | None = None
    segment_start: tuple[float, float] = (0.0, 0.0)
    phase = Phase.PROFILE


@dataclass
class Done:
    """The optimum ``optimal_power_limit`` (mW) is known; ``applied`` once set on the GPUs."""

    optimal_power_limit: int
    applied: bool = False
    phase = Phase.DONE


Waiting = Ready
WarmingUp = Warmup
State = Ready | Warmup | Profiling | Done


def steps_to_profile(
    min_limit: float,
    max_limit: float,
    pl_step: float = 25,
    wait_steps: int = 1,
    warmup_steps: int = 10,
    profile_steps: int = 40,
) -> int:
    """Training steps the optimizer needs to profile every limit of ``min_limit..max_limit`` W
    and choose (non-adaptive; adaptive profiling may need fewer, depending on what it measures).

    Size a run by this, not by seconds: the last window closes where the next step begins, so
    a run with one step fewer ends with no choice made, however fast the machine is. (On the
    simulated wall clock the first window waits for its 5 calibration steps: with fewer than 5
    wait and warm-up steps together, add the difference.)
    """
    limits = math.floor((max_limit - min_limit) / pl_step + 1e-9) + 1
    return wait_steps + limits * (warmup_steps + profile_steps) + 1
