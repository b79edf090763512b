"""Arguments of public methods, checked by their annotations: the boundary for Python callers.

A public method is an entry point as much as a command-line option: ``set_power_limit(64,
250000)`` of the batch-size optimizer was stored and shown, ``power_timeline(period=nan)``
sampled forever, and the simulated GPU's methods took any type. :func:`checked_methods`
wraps every public method of a class whose parameters are annotated ``int`` or ``float``: an
``int`` must be a whole number (``True``, ``1.5``, ``"3"`` and NaN are refused), a ``float`` a
finite number (not text, not a boolean). Ranges (a power limit within the GPU's constraints)
stay with each method, which knows them; this catches what no range check sees (NaN passes
``x < 0``, ``int("abc")`` is a raw ``ValueError``). ``tests/test_reliability_contracts.py``
calls every such method of every class declared here with bad values.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import types
import typing
from collections.abc import Callable
from typing import Any, TypeVar

from zeus_nb.errors import InputError

T = TypeVar("T", bound=type)

#: Classes whose public methods are checked (``module.qualname``), for the tests to find.
CHECKED_CLASSES: list[type] = []


def _kind(annotation: Any) -> tuple[str, bool] | None:
    """("int" or "float", whether None is allowed) of a numeric annotation, else None."""
    origin = typing.get_origin(annotation)
    if origin is not None and origin not in (typing.Union, types.UnionType):
        return None  # list[int], tuple[float, ...]: containers, checked where they are used
    args = typing.get_args(annotation)
    options = set(args) if args else {annotation}
    optional = type(None) in options
    options.discard(type(None))
    if options == {int}:
        return "int", optional
    if options and options <= {int, float}:
        return "float", optional
    return None


def _check(value: Any, kind: str, optional: bool, where: str) -> Any:
    if value is None and optional:
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        want = "a whole number" if kind == "int" else "a number"
        raise InputError(f"{where}: {value!r} is not {want}")
    if kind == "int":
        if isinstance(value, numbers.Integral):
            return value
        if math.isfinite(value) and float(value).is_integer():
            return int(value)
        raise InputError(f"{where}: {value!r} is not a whole number")
    if not math.isfinite(value):
        raise InputError(f"{where}: {value!r} is not a finite number")
    return value


def _annotation(fn: Callable, p: inspect.Parameter) -> Any:
    """A parameter's annotation as a type (they are text under ``from __future__ import
    annotations``); None where it names what only a type checker sees."""
    ann = p.annotation
    if isinstance(ann, str):
        try:
            return eval(ann, fn.__globals__)  # noqa: S307 - the package's own annotations
        except Exception:
            return None
    return None if ann is inspect.Parameter.empty else ann


def _wrap(cls: type, name: str, fn: Callable) -> Callable | None:
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    checks = []  # (position or None, name, kind, optional)
    for i, p in enumerate(params):
        kind = _kind(_annotation(fn, p))
        if kind is None or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        positional = i if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) else None
        checks.append((positional, p.name, *kind))
    if not checks:
        return None
    label = f"{cls.__name__}.{name}"

    @functools.wraps(fn)
    def checked(*args: Any, **kwargs: Any) -> Any:
        args = list(args)
        for pos, pname, kind, optional in checks:
            where = f"{label}({pname}=...)"
            if pos is not None and pos < len(args):
                args[pos] = _check(args[pos], kind, optional, where)
            elif pname in kwargs:
                kwargs[pname] = _check(kwargs[pname], kind, optional, where)
        return fn(*args, **kwargs)

    checked.__checked_arguments__ = True  # type: ignore[attr-defined]
    return checked


def checked_methods(cls: T) -> T:
    """Check the numeric arguments of every public method of ``cls``, its own and those it
    inherits from classes not checked themselves (see the module doc)."""
    done: set[str] = set()
    for klass in cls.__mro__:
        if klass is object or (klass is not cls and klass in CHECKED_CLASSES):
            continue
        for name, fn in list(vars(klass).items()):
            if name in done or name.startswith("_") or not inspect.isfunction(fn):
                continue
            done.add(name)
            if getattr(cls, name) is not fn or getattr(fn, "__checked_arguments__", False):
                continue  # overridden further down the order, or checked already
            wrapped = _wrap(cls, name, fn)
            if wrapped is not None:
                setattr(cls, name, wrapped)
    CHECKED_CLASSES.append(cls)
    return cls


def unchecked_arguments(why: str) -> Callable[[T], T]:
    """Mark a public class of the device layer or the optimizers whose arguments are not checked
    here, saying ``why`` (tests/test_reliability_contracts.py fails for any other unchecked one).
    """
    if not why.strip():
        raise ValueError("unchecked_arguments needs the reason, in words")

    def mark(cls: T) -> T:
        cls.__unchecked_arguments__ = why  # type: ignore[attr-defined]
        return cls

    return mark
