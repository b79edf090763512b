"""What every exercise is made of: cases, known mistakes, and the seed of the random cases."""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from zeus_nb.runner import setup


@dataclass(frozen=True)
class Case:
    """One kind of input: ``kind`` names it for people, ``hint`` says what it checks.

    ``hint`` completes the sentence "the case '<kind>' checks that ...": a rule of the exercise's
    specification, never the advice for one mistake (a wrong answer that no known mistake
    explains is told what differs and which rule the case checks, see :mod:`zeus_nb.course.check`).

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


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, _Raised) or isinstance(b, _Raised):
        return False
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    try:
        return math.isclose(float(a), float(b), rel_tol=1e-6, abs_tol=1e-9)
    except (TypeError, ValueError):
        return a == b


def separating(
    fixed: Sequence[tuple], fns: Sequence[Callable[..., Any]]
) -> Callable[[tuple], bool]:
    """A test for a random case drawn after the ``fixed`` ones (argument tuples): it holds when
    the drawn case gives different answers to every two functions of ``fns`` (the reference and
    the known mistakes) that the fixed cases do not tell apart. With it, every known mistake
    differs from every other somewhere, so each one gets its own hint."""

    def answers(args: tuple) -> list[Any]:
        return [safe(fn, *copy.deepcopy(args)) for fn in fns]

    vectors = list(zip(*(answers(args) for args in fixed), strict=True)) if fixed else []
    pairs = [
        (i, j)
        for i in range(len(fns))
        for j in range(i)
        if not fixed or all(_same(a, b) for a, b in zip(vectors[i], vectors[j], strict=True))
    ]

    def ok(args: tuple) -> bool:
        got = answers(args)
        return not any(_same(got[i], got[j]) for i, j in pairs)

    return ok
