"""The one registry of optimum selectors: name -> factory, with each knob's valid range.

The command line (``zeus-nb plo replay --selector``) and the notebook widgets both build selectors
from here, so a knob's range is checked in one place and matches what the selector itself accepts
(e.g. any slowdown factor >= 1; ``slider_maximum`` only bounds a slider, not the value).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from zeus_nb.errors import InputError
from zeus_nb.optimizer.power_limit.selectors import (
    Energy,
    MaxSlowdownConstraint,
    OptimumSelector,
    Time,
    ZeusCost,
)

__all__ = ["SELECTORS", "Knob", "SelectorSpec", "make_selector", "selector_kwargs", "spec_for"]


@dataclass(frozen=True)
class Knob:
    """The one number a selector is tuned with, and its allowed range (``maximum`` may be inf)."""

    name: str
    minimum: float
    maximum: float
    default: float
    step: float
    help: str
    slider_maximum: float  # a finite upper end for sliders; values above it are still valid

    def check(self, selector: str, value: float) -> float:
        value = float(value)
        if not self.minimum <= value <= self.maximum:
            hi = "inf)" if math.isinf(self.maximum) else f"{self.maximum:g}]"
            raise InputError(
                f"{selector}'s {self.name} must be in [{self.minimum:g}, {hi}, got {value:g}"
            )
        return value


@dataclass(frozen=True)
class SelectorSpec:
    """A selector class, its command-line name and its knob (None: it has none)."""

    factory: Callable[..., OptimumSelector]
    cli_name: str
    knob: Knob | None


# Class name -> spec; the class names are what notebooks and widgets show.
SELECTORS: dict[str, SelectorSpec] = {
    "Energy": SelectorSpec(Energy, "energy", None),
    "Time": SelectorSpec(Time, "time", None),
    "ZeusCost": SelectorSpec(
        ZeusCost,
        "zeus-cost",
        Knob("eta_knob", 0.0, 1.0, 0.5, 0.05, "0 = fastest, 1 = least energy", 1.0),
    ),
    "MaxSlowdownConstraint": SelectorSpec(
        MaxSlowdownConstraint,
        "max-slowdown",
        Knob(
            "factor",
            1.0,
            math.inf,
            1.1,
            0.05,
            "lowest limit whose time is within this factor of the time at the highest limit",
            3.0,
        ),
    ),
}


def spec_for(name: str) -> tuple[str, SelectorSpec]:
    """(class name, spec) for a class name or a command-line name."""
    if name in SELECTORS:
        return name, SELECTORS[name]
    for cls_name, spec in SELECTORS.items():
        if spec.cli_name == name:
            return cls_name, spec
    known = ", ".join(f"{k} ({s.cli_name})" for k, s in SELECTORS.items())
    raise InputError(f"unknown selector {name!r}; use one of {known}")


def selector_kwargs(name: str, knob: float | None = None) -> dict[str, float]:
    """Keyword arguments for selector ``name`` with its knob (checked against the knob's range)."""
    cls_name, spec = spec_for(name)
    if spec.knob is None:
        return {}
    value = spec.knob.default if knob is None else spec.knob.check(cls_name, knob)
    return {spec.knob.name: value}


def make_selector(name: str, knob: float | None = None) -> OptimumSelector:
    """The selector ``name`` (class or command-line name) tuned with ``knob``.

    The selector's own constructor checks the value (the knob ranges above mirror those checks,
    which the tests verify), so its error message is the one users see everywhere.
    """
    spec = spec_for(name)[1]
    if spec.knob is None:
        return spec.factory()
    return spec.factory(**{spec.knob.name: spec.knob.default if knob is None else knob})
