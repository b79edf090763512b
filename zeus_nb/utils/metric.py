"""The Zeus cost of a run, and energy from a power log (Zeus's ``zeus.utils.metric``).

Cost = eta x Energy + (1 - eta) x MaxPower x Time. ``eta`` = 1 minds energy only, 0 time only;
MaxPower (W) turns time into joules so both terms share a unit. Every optimizer in zeus-nb
minimizes it, so it lives at the bottom of the package where all of them can reach it.
"""

from __future__ import annotations

import math
from pathlib import Path

from zeus_nb.errors import InputError
from zeus_nb.inputs import read_table, read_text, reader
from zeus_nb.inputs.kinds import POWER_LOG


def check_eta(eta_knob: float) -> float:
    """Validate the energy-time knob; returns it as float."""
    eta = float(eta_knob)
    if not 0.0 <= eta <= 1.0:
        raise InputError(
            f"eta_knob must be within [0, 1] (1: energy only, 0: time only), got {eta}"
        )
    return eta


def zeus_cost(energy: float, time: float, eta_knob: float, max_power: int | float) -> float:
    """eta x energy + (1 - eta) x max_power x time, in J."""
    eta = check_eta(eta_knob)
    if not max_power > 0:
        raise InputError(f"max_power must be > 0 W, got {max_power}")
    return eta * energy + (1.0 - eta) * max_power * time


@reader(POWER_LOG)
def _power_log(logfile: Path | str, start: float | None, end: float | None):
    """(seconds, watts) of a power log (``Time`` timestamps, ``Power`` in mW) within the range.

    Read through :data:`zeus_nb.inputs.kinds.POWER_LOG`. ``start``/``end`` are seconds from the
    log's first row, or from its last when negative. A last line that is not a row (the
    monitor's closing summary) is skipped.
    """
    text = read_text(logfile, POWER_LOG.name, POWER_LOG.max_bytes)
    lines = text.splitlines(keepends=True)
    if len(lines) > 2 and lines[-1].count(",") != lines[0].count(","):
        lines.pop()  # the closing summary (Zeus's reader skips a footer line too)
    table = read_table(logfile, POWER_LOG, text="".join(lines))
    rows = sorted((r["Time"], r["Power"] / 1000.0) for r in table.rows)
    first, last = rows[0][0], rows[-1][0]
    if start is not None:
        rows = [r for r in rows if r[0] >= (first if start >= 0 else last) + start]
    if end is not None:
        rows = [r for r in rows if r[0] <= (first if end >= 0 else last) + end]
    seconds = [t for t, _ in rows]
    watts = [w for _, w in rows]
    if len(seconds) < 2 or not seconds[-1] > seconds[0]:
        raise InputError(f"{logfile}: fewer than two samples between start={start} and end={end}")
    return seconds, watts


def energy(logfile: Path | str, start: float | None = None, end: float | None = None) -> float:
    """Joules in a power log between ``start`` and ``end`` (trapezoidal rule over the samples)."""
    seconds, watts = _power_log(logfile, start, end)
    return math.fsum(
        (t1 - t0) * (p0 + p1) / 2
        for t0, t1, p0, p1 in zip(seconds, seconds[1:], watts, watts[1:], strict=False)
    )


def avg_power(logfile: Path | str, start: float | None = None, end: float | None = None) -> float:
    """Average watts in a power log between ``start`` and ``end``."""
    seconds, _ = _power_log(logfile, start, end)
    return energy(logfile, start, end) / (seconds[-1] - seconds[0])
