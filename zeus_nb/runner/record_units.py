"""The unit of every value the shipped notebooks record, for ``zeus-nb tour``'s summary.

A record keeps numbers without their units (``max_clock = [1.826, 1171.0]``); the tour prints
each with what its numbers are (``(iteration time s, energy J)``), so a reader never guesses
whether 1171 is J or kJ. A name ending in a unit (``_j``, ``_s``, ``_w``, ``_g``, ``_usd``,
``_pct``) says it; every other name is listed in :data:`UNITS` ("" for text, which has none).
``tests/test_tour_units.py`` fails for a shipped notebook's record that has neither.
"""

from __future__ import annotations

SUFFIXES = {"_j": "J", "_s": "s", "_w": "W", "_g": "g CO2", "_usd": "USD", "_pct": "%"}

_TIME_ENERGY = "iteration time s, energy J"
_RUN = "world_size ranks, time_s s, energy_j J, accuracy (0 to 1)"
_RATIO = "fraction of the default's energy, per workload"

UNITS: dict[str, str] = {
    # 01
    "backend": "",
    "gpu": "",
    "steps": "training steps",
    "power_samples": "samples",
    # 02
    "replay_log": "",
    "replay_choices": "W, per selector",
    "replay_profile": "table: power limit W, time s, energy J",
    "zeus_cost_by_hand": "W (the limit of the least cost)",
    "slowdown_choices": "W, per max slowdown factor",
    "live_selector": "",
    "live_choice": "W",
    "live_limits_per_epoch": "W, per epoch",
    "live_profile": "power limit W, time s, energy J, per limit",
    "live_profile_steps": "steps per limit",
    "profile_reused": "yes/no",
    "hf_choice": "W",
    "hf_skipped": "",
    # 03
    "trace_configurations": "configurations",
    "trace_front": "batch size, power limit W, per point",
    "student_front_size": "points",
    "eta_knob": "weight of energy, 0 to 1",
    "optimum": "batch size, power limit W",
    "optimum_by_eta": "batch size, power limit W, per eta",
    "live_power_limits": "W",
    "live_configurations": "configurations",
    "live_sweep": "table: batch size, power limit W, reached, time s, energy J",
    "live_reached": "configurations that reached the target",
    "live_front": "batch size, power limit W, per point",
    "best_batch_size_ratio": _RATIO,
    "best_power_limit_ratio": _RATIO,
    "best_both_ratio": _RATIO,
    # 04
    "simulation": "energy J, time s, power limit W, savings (fractions)",
    "knobs": "table: power limit W, saving (fraction), hours h, runs",
    "paired": "table: savings as fractions of the baseline, per seed",
    "thompson_rounds": "rounds",
    "thompson_agreement": "rounds",
    "live_candidates": "batch sizes",
    "live_batch_sizes": "batch size, per run",
    "live_time": "s, per run",
    "live_energy": "J, per run",
    "live_phase": "",
    "live_survivors": "batch sizes",
    # 05
    "ranks": "ranks asked for, ranks run",
    "dp": _RUN,
    "dp_rank_times": "s, per rank",
    "dp_rank_energies": "J, per rank",
    "dp_aggregated": "job time s, job energy J",
    "dp_power_limits": "W, per rank",
    "dp_optimal_power_limit": "W",
    "dp_slowdown_limit": "W",
    "fsdp": _RUN,
    "fsdp_power_limits": "W, per rank",
    # 06
    "max_clock": _TIME_ENERGY,
    "exercise_energy": "J",
    "unit_time": "s",
    "frontier": _TIME_ENERGY + ", per plan",
    "straggler": "deadline s, " + _TIME_ENERGY,
    "slider_point": _TIME_ENERGY,
    "live_clocks_profiled": "MHz, the SM clocks profiled",
    "live_max": _TIME_ENERGY,
    "live_planned": _TIME_ENERGY,
    "live_predicted": _TIME_ENERGY,
    "live_max_predicted": _TIME_ENERGY,
    "live_frontier": _TIME_ENERGY + ", per plan",
    "live_straggler": _TIME_ENERGY,
}
# the same name in another notebook, meaning something else there: (notebook number, name)
NOTEBOOK_UNITS: dict[tuple[str, str], str] = {
    ("04", "live_reached"): "reached the target (yes/no), per run",
}


def unit_of(name: str, notebook: str = "") -> str | None:
    """What ``name``'s numbers are in ("" for text), or None when nobody said.

    ``notebook``: the notebook's file name or stem ("04_batch_size_optimizer").
    """
    found = NOTEBOOK_UNITS.get((notebook[:2], name))
    if found is not None:
        return found
    if name in UNITS:
        return UNITS[name]
    return next((unit for suffix, unit in SUFFIXES.items() if name.endswith(suffix)), None)
