"""Command-line values: typed at parse time, and options that only apply to one choice.

Every option of every ``zeus-nb`` sub-command (and of ``python -m zeus_nb.monitor`` and the
training entry points) is either a flag, a fixed set of ``choices``, or has one of the types
here: an empty string, ``nan``, a fraction where a count is meant or an address with no port
is a usage error naming the option, before any work starts. :func:`only_with` declares options
that belong to one choice (``--factor`` to ``--selector max-slowdown``): given with another,
they are an error rather than silently ignored. ``tests/test_reliability_battery.py`` walks the
parser tree and fails for an option that has none of these types.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zeus_nb.errors import InputError
from zeus_nb.inputs.validate import DURATION, Quantity, integer, number

__all__ = [
    "ArgType",
    "Parser",
    "count",
    "nonempty",
    "only_with",
    "real",
    "scheduler_address",
    "seconds",
]


class ArgType:
    """An ``argparse`` ``type=``: checks one value; ``bad`` lists values it must refuse and
    ``extremes`` the accepted values that cause the most work (the ends of its range): a command
    must answer those in bounded time too (tests/test_reliability_discovery.py tries them)."""

    def __init__(
        self,
        name: str,
        check: Callable[[str], Any],
        bad: tuple[str, ...],
        extremes: tuple[str, ...] = (),
    ):
        self.__name__ = name
        self._check = check
        self.bad = bad
        self.extremes = extremes

    def __call__(self, text: str) -> Any:
        if not text.strip():
            raise argparse.ArgumentTypeError("the value is empty; give one or leave the option out")
        try:
            return self._check(text)
        except InputError as e:
            raise argparse.ArgumentTypeError(str(e).replace("the value: ", "", 1)) from None

    def __repr__(self) -> str:
        return f"<{self.__name__}>"


def nonempty(what: str = "text") -> ArgType:
    """Any text but the empty string (a path, a name, a list the command parses itself)."""
    return ArgType(what, lambda t: t, ("", "  "))


def count(low: int = 1, high: int = 10**9) -> ArgType:
    """A whole number in ``[low, high]``."""
    bad = ("", "nan", "1.5", "abc", str(low - 1), "1e30")
    return ArgType(
        f"integer >= {low}",
        lambda t: integer(t, "the value", low, high),
        bad,
        (str(low), str(high)),
    )


def real(
    quantity: Quantity | None = None, low: float = -math.inf, high: float = math.inf
) -> ArgType:
    """A finite number (within ``quantity``'s range, or ``[low, high]``)."""

    def check(text: str) -> float:
        x = number(text, "the value", quantity)
        if not low <= x <= high:
            raise InputError(f"the value: {text!r} is out of range; expected {low:g} to {high:g}")
        return x

    bad = ("", "nan", "inf", "-inf", "abc")
    if quantity is not None or low > -math.inf:
        bad += ("-1",)
    lo = max(low, quantity.low if quantity else -math.inf)
    hi = min(high, quantity.high if quantity else math.inf)
    if quantity is not None and quantity.open_low and lo == quantity.low:
        lo = lo + max(abs(lo), 1.0) * 1e-9  # just above an open end: 1e-9 s, 1.000000001 W
    extremes = tuple(f"{x:.10g}" for x in (lo, hi) if math.isfinite(x))
    return ArgType("number", check, bad, extremes)


seconds = real(DURATION)  # a time limit: more than 0 s, finite

_ADDRESS = re.compile(r"^(?:(tcp|tls|ucx|ws|wss)://)?([A-Za-z0-9_.\-]+|\[[0-9a-fA-F:]+\]):(\d+)$")


def _address(text: str) -> str:
    m = _ADDRESS.match(text.strip())
    if m is None or not 1 <= int(m.group(3)) <= 65535:
        raise InputError(
            f"the value: {text!r} is not a scheduler address; give tcp://HOST:PORT (the port a "
            "`dask scheduler` prints, 8786 by default)"
        )
    return text.strip() if m.group(1) else f"tcp://{text.strip()}"


scheduler_address = ArgType("address", _address, ("", "foo:bar", "tcp://", "host:0", "h:99999"))


#: Flags that turn something off (``--no-...``) but on which no other option depends, and why;
#: every other such flag must be the condition of the options it makes idle (:func:`only_with`),
#: so that they are refused with it (tests/test_reliability_discovery.py).
INDEPENDENT_SWITCHES: dict[str, str] = {
    "--no-progress": "only hides the progress bar; no option configures it",
    "--no-execute": "docs build: the notebooks' outputs are left out; no option runs them",
    "--no-strict": "docs build: MkDocs warnings pass; no option depends on strictness",
}


@dataclass(frozen=True)
class _Condition:
    dest: str
    option: str
    applies: Callable[[argparse.Namespace], bool]
    requirement: str
    default: Any


def only_with(
    parser: argparse.ArgumentParser,
    option: str,
    applies: Callable[[argparse.Namespace], bool],
    requirement: str,
    default: Any = None,
) -> None:
    """Declare that ``option`` (already added, with default None) applies only when
    ``applies(args)``; given otherwise it is an error naming ``requirement``. Left out, it
    takes ``default``."""
    action = next(a for a in parser._actions if option in a.option_strings)
    conditions = list(parser.get_default("_conditions") or [])
    conditions.append(_Condition(action.dest, option, applies, requirement, default))
    parser.set_defaults(_conditions=conditions)


class Parser(argparse.ArgumentParser):
    """``argparse`` with one-line usage errors and the :func:`only_with` rules applied."""

    def error(self, message: str):  # type: ignore[override]
        print(f"{self.prog}: error: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        ns, rest = super().parse_known_args(args, namespace)
        conditions = getattr(ns, "_conditions", None) or []
        ns._conditions = []  # applied once, by the parser that declared them
        for c in conditions:
            value = getattr(ns, c.dest, None)
            if value is None:
                setattr(ns, c.dest, c.default)
            elif not c.applies(ns):
                self.error(f"{c.option} applies only {c.requirement}; leave it out")
        return ns, rest
