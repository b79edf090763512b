"""How the ranks of a simulated distributed job differ: a spread of step time and power, and
an optional straggler (see :class:`zeus_nb.device.sim.SimulatedSystem`)."""

from __future__ import annotations

import math

import numpy as np

from zeus_nb.errors import InputError

__all__ = ["parse_straggler", "rank_factors"]


def parse_straggler(spec: object) -> tuple[int, float] | None:
    """``"RANK:FACTOR"`` (e.g. ``"1:1.3"``: rank 1 takes 1.3x as long per step), or None."""
    if spec is None or (isinstance(spec, str) and not spec.strip()):
        return None
    if isinstance(spec, tuple) and len(spec) == 2:
        rank, factor = spec
    else:
        rank, _, factor = str(spec).strip().partition(":")
    try:
        rank, factor = int(rank), float(factor)
    except (TypeError, ValueError):
        rank, factor = -1, math.nan
    if rank < 0 or not 1.0 <= factor <= 100.0:
        raise InputError(
            f"straggler {spec!r}: give RANK:FACTOR with a rank >= 0 and a slowdown factor from 1 "
            "to 100, e.g. 1:1.3 (ZEUS_NB_SIM_STRAGGLER or use_simulated(straggler=...))"
        )
    return rank, factor


def rank_factors(
    rank: int, spread: float, straggler: tuple[int, float] | None
) -> tuple[float, float]:
    """(time, power) multipliers of one rank's GPUs: no two GPUs of a model run exactly alike.

    ``spread`` is the relative standard deviation of both across ranks, drawn once per rank from a
    generator of its own (the same rank always gets the same GPU); the straggler's rank also takes
    ``factor`` times as long per step.
    """
    time_factor = power_factor = 1.0
    if spread:
        z = np.random.default_rng([0x5EED, int(rank)]).standard_normal(2)
        time_factor = max(0.5, 1.0 + spread * float(z[0]))
        power_factor = max(0.5, 1.0 + spread * float(z[1]))
    if straggler is not None and straggler[0] == rank:
        time_factor *= straggler[1]
    return time_factor, power_factor
