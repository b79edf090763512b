"""Which functions read outside input, and through which schema.

A reader declares itself with :func:`reader`. A function that reads something else says so, and
why, with a mark on itself: :func:`not_input` (files zeus-nb itself wrote and owns, notebooks
read by nbformat), :func:`system_read` (opens a file itself: kernel counters, package data, the
project's checkout) or :func:`environ_read` (reads ``os.environ`` itself).
``tests/test_reliability_discovery.py`` scans the package for functions that open, read,
connect or read the environment and fails for one without its mark (or with a mark but no
reason), and ``tests/test_reliability_battery.py`` feeds every declared reader the battery of
bad files. The marks sit on the functions, so renaming or moving one carries its mark along.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from zeus_nb.inputs.schema import Schema

F = TypeVar("F", bound=Callable)

#: ``module.qualname`` of each declared reader -> the schemas it reads through.
READERS: dict[str, tuple[Schema, ...]] = {}


def reader(*schemas: Schema) -> Callable[[F], F]:
    """Mark a function as a reader of outside input through ``schemas`` (no runtime cost)."""

    def mark(fn: F) -> F:
        READERS[f"{fn.__module__}.{fn.__qualname__}"] = schemas
        fn.__input_schemas__ = schemas  # type: ignore[attr-defined]
        return fn

    return mark


def reasoned_mark(attribute: str, why: str) -> Callable[[F], F]:
    """A decorator that sets ``attribute`` of a function to ``why``, a reason in words (the
    boundary's marks here, and the write path's in :mod:`zeus_nb.utils.files`)."""
    if not why.strip():
        raise ValueError(f"{attribute} needs the reason, in words")

    def mark(fn: F) -> F:
        setattr(fn, attribute, why)
        return fn

    return mark


def not_input(why: str) -> Callable[[F], F]:
    """Mark a function that reads something that is not outside input, saying ``why``."""
    return reasoned_mark("__not_input__", why)


def system_read(why: str) -> Callable[[F], F]:
    """Mark a function that opens a file itself rather than through
    :func:`~zeus_nb.inputs.read_bytes` and friends (kernel files, package data, the project's
    own checkout, a private temporary folder, a database server), saying ``why``. Any other
    function that opens a file must check it with :func:`~zeus_nb.inputs.regular_file` first
    (a FIFO would block it, ``/dev/zero`` never end)."""
    return reasoned_mark("__system_read__", why)


def environ_read(why: str) -> Callable[[F], F]:
    """Mark a function that reads ``os.environ`` itself, saying ``why`` (every other variable is
    declared in :mod:`zeus_nb.inputs.env` and read through :func:`~zeus_nb.inputs.env.env`)."""
    return reasoned_mark("__environ_read__", why)
