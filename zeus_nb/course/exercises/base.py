"""What every exercise is made of: cases, known mistakes, and the seed of the random cases."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zeus_nb.runner import setup


@dataclass(frozen=True)
class Case:
    """One kind of input: ``kind`` names it for people, ``hint`` points at the concept.

    A case may hold several calls (``args`` and each tuple in ``also``); it counts as right only
    when every call is answered right. That is how a yes/no exercise keeps a constant answer from
    passing: each of its cases has a "yes" and a "no" call.
    """

    kind: str
    args: tuple
    hint: str
    also: tuple[tuple, ...] = ()

    @property
    def calls(self) -> tuple[tuple, ...]:
        return (self.args, *self.also)


@dataclass(frozen=True)
class Mistake:
    """A common wrong answer: ``fn`` computes it, ``hint`` is the advice that fits it.

    When a student's answers on the failed cases are what ``fn`` gives, the check shows ``hint``
    instead of the case's general one, so the hint speaks to the mistake actually made.
    """

    name: str
    fn: Callable[..., Any]
    hint: str


def use_seed(seed: int) -> None:
    """Seed the random cases (``notebook_setup`` sets the notebook's seed the same way)."""
    setup._seed = int(seed)


def rng(name: str) -> random.Random:
    """The random generator of exercise ``name`` for the current seed."""
    return random.Random(f"{name}:{setup.notebook_seed()}")


def draw(r: random.Random, make: Callable[[random.Random], Any], ok: Callable[[Any], bool]) -> Any:
    """``make(r)`` again until ``ok`` holds, so a random case never rewards an obvious shortcut.

    Deterministic for a given generator; gives up (keeping the last draw) after 500 tries.
    """
    value = make(r)
    for _ in range(500):
        if ok(value):
            break
        value = make(r)
    return value


def safe(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``, or a marker that equals nothing when it raises (for shortcut tests)."""
    try:
        return fn(*args)
    except Exception:
        return _Raised()


class _Raised:
    def __eq__(self, other: object) -> bool:
        return False

    __hash__ = None  # type: ignore[assignment]
