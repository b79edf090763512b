"""The energy-time tradeoff: the Zeus cost that every optimizer in zeus-nb minimizes.

Cost = eta x Energy + (1 - eta) x MaxPower x Time. ``eta`` = 1 minds energy only, 0 time only;
MaxPower (W) turns time into joules so both terms share a unit.
"""

from __future__ import annotations


def check_eta(eta_knob: float) -> float:
    """Validate the energy-time knob; returns it as float."""
    eta = float(eta_knob)
    if not 0.0 <= eta <= 1.0:
        raise ValueError(
            f"eta_knob must be within [0, 1] (1: energy only, 0: time only), got {eta}"
        )
    return eta


def zeus_cost(energy: float, time: float, eta_knob: float, max_power: float) -> float:
    """eta x energy + (1 - eta) x max_power x time, in J."""
    eta = check_eta(eta_knob)
    if max_power <= 0:
        raise ValueError(f"max_power must be > 0 W, got {max_power}")
    return eta * energy + (1.0 - eta) * max_power * time
