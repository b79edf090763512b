"""Typed environment variables, as Zeus's ``get_env`` reads them (seed code imports it)."""

from __future__ import annotations

import os
from typing import TypeVar, cast

from zeus_nb.inputs.registry import environ_read

T = TypeVar("T")

_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


@environ_read("Zeus's get_env API: any variable a caller names")
def get_env(name: str, valtype: type[T], default: T | None = None) -> T:
    """The environment variable ``name`` converted to ``valtype``.

    Booleans accept ``true``/``false`` (Zeus's spellings) and also ``1``/``0``, ``yes``/``no``,
    ``on``/``off``. An unset variable gives ``default``, or a ValueError naming the variable
    when there is no default; a value that does not convert is a ValueError saying so.
    """
    raw = os.environ.get(name)
    if raw is None:
        if default is not None:
            return default
        raise ValueError(f"environment variable {name} is not set")
    if valtype is bool:
        low = raw.strip().lower()
        if low not in _TRUE + _FALSE:
            raise ValueError(f"{name}={raw!r} is not a boolean; use true or false")
        return cast(T, low in _TRUE)
    try:
        return valtype(raw)  # type: ignore[call-arg]
    except (TypeError, ValueError):
        raise ValueError(f"{name}={raw!r} is not a valid {valtype.__name__}") from None
