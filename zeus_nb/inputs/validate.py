"""Checks for every number that comes from outside: files, profiles, state files, parameters and
environment variables.

A measurement tool must never turn bad input into a plausible-looking answer: one NaN cell in a
log, or a value written in mJ where J was meant, would otherwise flow through sums and selectors
into a wrong power limit with exit status 0. Every reader therefore passes each outside number
through :func:`number` (or :func:`integer`; environment variables through
:func:`zeus_nb.inputs.env.env`), which
checks its type, that it is finite, and that it lies in the physical range of its
:class:`Quantity` (watts, joules, seconds...). The ranges are wide enough for any real GPU and
tight enough that a value 1000x off (mJ for J, ms for s) falls outside them. The error is an
:class:`~zeus_nb.errors.InputError` that names the source (file, line and column, or variable or
parameter) and says what to do.
"""

from __future__ import annotations

import math
import numbers
import os
from dataclasses import dataclass
from pathlib import Path

from zeus_nb.errors import InputError

__all__ = [
    "AVERAGE_POWER",
    "CLOCK",
    "COUNTER_PERIOD",
    "DURATION",
    "ENERGY",
    "NOISE",
    "POWER_LIMIT",
    "Quantity",
    "integer",
    "number",
    "number_list",
    "notebook_counts",
    "power_of",
    "writable_dir",
]


@dataclass(frozen=True)
class Quantity:
    """A kind of number and its physically possible range (``low`` exclusive if ``open_low``)."""

    name: str
    unit: str
    low: float
    high: float
    open_low: bool = False
    #: (factor, unit) of the usual mistakes: a value in ``unit`` is ``factor`` x the value in
    #: this quantity's unit (a power limit in mW is 1000 x W). An out-of-range value that fits
    #: once divided by the factor is named as probably in that unit.
    mistakes: tuple[tuple[float, str], ...] = ()

    def likely_unit(self, x: float) -> str:
        """What to say about an out-of-range ``x`` that fits the range in another unit."""
        for factor, unit in self.mistakes:
            y = x / factor
            if self.low < y <= self.high:
                return f"it looks like {unit} ({x:g} {unit} is {y:g} {self.unit}); give {self.unit}"
        return ""

    def describe(self) -> str:
        lo = "> " if self.open_low else ">= "
        unit = f" {self.unit}" if self.unit else ""
        return f"{self.name} ({lo}{self.low:g}{unit} and <= {self.high:g}{unit})"


# Ranges: any real GPU fits; 1000x off does not. Power limits of datacenter and desktop GPUs run
# from tens of watts to about 1.2 kW (GB200); an average power below 1 W per GPU is an idle card
# read in kJ or mJ mistakes. A step, window or epoch is longer than zero and shorter than a year.
_WATT_MISTAKES = ((1e3, "mW"), (1e-3, "kW"))
POWER_LIMIT = Quantity("power limit", "W", 1.0, 2000.0, open_low=True, mistakes=_WATT_MISTAKES)
AVERAGE_POWER = Quantity("average power", "W", 1.0, 2000.0, mistakes=_WATT_MISTAKES)
#: An SM or memory clock: 50 MHz to 10 GHz fits every GPU (they run at 100 to 3000 MHz).
CLOCK = Quantity("clock", "MHz", 50.0, 10_000.0, mistakes=((1e3, "kHz"), (1e-3, "GHz")))
#: One sample of Zeus's power logs, in mW (1 W to 2 kW, as for an average power).
POWER_SAMPLE_MW = Quantity("power", "mW", 1e3, 2e6, mistakes=((1e-3, "W"), (1e3, "uW")))
DURATION = Quantity("time", "s", 0.0, 3.2e7, open_low=True)
ENERGY = Quantity("energy", "J", 0.0, 1e13)
NOISE = Quantity("noise (relative standard deviation)", "", 0.0, 1.0)
CPU_TDP = Quantity("CPU TDP", "W", 0.0, 2000.0, open_low=True)
DRAM_SIZE = Quantity("DRAM size", "GB", 0.0, 1e5)

# Seconds between updates of a GPU's energy counter: NVML's counter on an H100 (driver 580) moved
# every 100 ms (docs/real_gpus.md). A window of t s then reads the energy of anything from
# t - 0.1 s to t + 0.1 s of drawing: 0 J, or a whole update of 70 J at 700 W, over 20 ms. Checks
# of energy over time allow for it, so they never refuse what such a counter reads.
COUNTER_PERIOD = 0.1


def number(
    value: object,
    where: str,
    quantity: Quantity | None = None,
    fix: str = "",
    text_ok: bool = True,
) -> float:
    """``value`` as a finite float in ``quantity``'s range, else an :class:`InputError`.

    ``where`` names the source (``"log.csv, line 4, column elapsed_time"``, ``"parameter
    noise"``); ``fix`` says what to do. Strings are parsed (CSV cells, environment variables)
    unless ``text_ok`` is false (JSON fields, Python arguments: ``"200"`` is the wrong type
    there); booleans are refused (``True`` is not a number of watts).
    """
    allowed = (numbers.Real, str) if text_ok else numbers.Real
    if isinstance(value, bool) or not isinstance(value, allowed):
        raise InputError(_message(where, value, "is not a number", quantity, fix))
    try:
        x = float(value)  # type: ignore[arg-type]
    except (ValueError, OverflowError):
        raise InputError(_message(where, value, "is not a number", quantity, fix)) from None
    if not math.isfinite(x):
        raise InputError(_message(where, value, "is not a finite number", quantity, fix))
    if quantity is not None:
        below = x <= quantity.low if quantity.open_low else x < quantity.low
        if below or x > quantity.high:
            unit = quantity.likely_unit(x)
            fix = "; ".join(f for f in (unit, fix) if f)
            raise InputError(_message(where, value, "is out of range", quantity, fix))
    return x


def integer(
    value: object,
    where: str,
    low: int | None = None,
    high: int | None = None,
    fix: str = "",
    text_ok: bool = True,
) -> int:
    """``value`` as an int in ``[low, high]`` (``"3"`` and ``3.0`` are fine, ``3.5`` is not).

    ``text_ok=False`` refuses strings, as for :func:`number`.
    """
    if isinstance(value, bool) or (isinstance(value, str) and not text_ok):
        raise InputError(_message(where, value, "is not an integer", None, fix))
    try:
        if isinstance(value, str):
            x = int(value.strip())
        elif isinstance(value, numbers.Real) and float(value).is_integer():
            x = int(value)  # ints, numpy integers, and floats with nothing after the point
        else:
            raise ValueError
    except (ValueError, OverflowError, TypeError):
        raise InputError(_message(where, value, "is not an integer", None, fix)) from None
    if (low is not None and x < low) or (high is not None and x > high):
        span = f"between {low} and {high}" if high is not None else f">= {low}"
        raise InputError(
            f"{where}: {value!r} is out of range; expected an integer {span}"
            + (f"; {fix}" if fix else "")
        )
    return x


def power_of(energy: float, time: float, where: str, fix: str = "") -> float:
    """Average power of ``energy`` J over ``time`` s, checked against :data:`AVERAGE_POWER`.

    Energy and time alone can be anything; their ratio cannot, so this is what catches a
    column written in mJ or ms.
    """
    watts = energy / time if time > 0 else math.inf
    q = AVERAGE_POWER
    if not q.low <= watts <= q.high:
        raise InputError(
            f"{where}: {energy:g} J over {time:g} s is an average power of {watts:.4g} W, out "
            f"of range; expected {q.describe()}; {fix or 'check the units (J and s)'}"
        )
    return watts


def number_list(
    value: object,
    name: str,
    quantity: Quantity | None = None,
    integers: bool = False,
) -> list:
    """A notebook parameter that holds numbers, as a checked list.

    Accepts the comma-separated text the notebooks declare (``"300,200,100"``) and what
    papermill or ``-p`` may pass instead: one number (``500``) or a list. Each item is checked
    like :func:`number` (or as an integer >= 1 with ``integers``); the error names the
    parameter and shows the expected form.
    """
    where = f"notebook parameter {name}"
    if isinstance(value, str):
        items: list = [v for v in value.split(",") if v.strip()]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):
        items = [value]
    else:
        items = []
    if not items:
        raise InputError(
            f"{where}: {value!r} holds no numbers; give comma-separated numbers such as "
            '"300,200,100"'
        )
    if integers:
        return [integer(v, f"{where}, item {i + 1}", 1, 10**7) for i, v in enumerate(items)]
    return [number(v, f"{where}, item {i + 1}", quantity) for i, v in enumerate(items)]


def notebook_counts(low: int = 1, **values: object) -> tuple[int, ...]:
    """Notebook parameters that count something (epochs, steps, a batch size), each a whole
    number >= ``low``.

    A count of 0 or -1 would otherwise run no training at all and record 0 J as a result.
    """
    return tuple(
        integer(v, f"notebook parameter {k}", low, 10**9, "give a whole number")
        for k, v in values.items()
    )


def writable_dir(path: str | os.PathLike, option: str = "") -> Path:
    """``path`` as a folder this process can write to (created if missing), else an ``OSError``
    naming it (the CLI prints it as one line).

    Checked before any work starts, so a sweep or tour never runs for an hour to fail at its
    first write. ``option`` (``"-o"``) is named in the error.
    """
    import errno
    import tempfile

    p = Path(path).expanduser()
    if p.exists() and not p.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "Not a directory", str(p))
    p.mkdir(parents=True, exist_ok=True)  # PermissionError, NotADirectoryError name the path
    try:
        with tempfile.TemporaryFile(dir=p):
            pass
    except OSError as e:
        raise PermissionError(
            e.errno or errno.EACCES,
            f"cannot write there{f' ({option})' if option else ''}",
            str(p),
        ) from None
    return p


def _message(where: str, value: object, problem: str, quantity: Quantity | None, fix: str) -> str:
    shown = repr(value)
    if len(shown) > 40:
        shown = shown[:37] + "..."
    want = f"; expected {quantity.describe()}" if quantity is not None else ""
    return f"{where}: {shown} {problem}{want}" + (f"; {fix}" if fix else "")


def step_count(n: object, batch_size: object = None) -> tuple[int, int | None]:
    """``zeus_nb.step(n, batch_size)``'s arguments, checked: a whole number of steps >= 0 and
    a batch size >= 1 (or None). ``step(float("nan"))`` would otherwise make every later window
    report NaN energy. Cheap for the usual ``int``: it runs once per training step."""
    if type(n) is not int or n < 0:
        n = integer(n, "zeus_nb.step(n)", 0, 10**12, "n counts training steps", text_ok=False)
    if batch_size is not None and (type(batch_size) is not int or batch_size < 1):
        batch_size = integer(batch_size, "zeus_nb.step(batch_size=...)", 1, 10**7, text_ok=False)
    return n, batch_size  # type: ignore[return-value]
