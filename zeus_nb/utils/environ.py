"""Temporary environment changes, restored afterwards (also when the body raises)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from zeus_nb.inputs.registry import environ_read


@environ_read("saves variables to restore them afterwards")
@contextlib.contextmanager
def temp_environ(**changes: str | None) -> Iterator[None]:
    """Set (or, with ``None``, unset) environment variables for the ``with`` body only.

    Child processes started inside the body (papermill kernels, torchrun) inherit the changes;
    the previous values, or their absence, come back at the end.
    """
    saved = {k: os.environ.get(k) for k in changes}
    try:
        _apply(changes)
        yield
    finally:
        _apply(saved)


def _apply(values: dict[str, str | None]) -> None:
    for k, v in values.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
