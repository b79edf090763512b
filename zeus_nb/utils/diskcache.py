"""An on-disk cache of slow, deterministic results that are plain JSON (numbers, lists, dicts).

Every process of a simulated pipeline starts a fresh interpreter and would otherwise refit the
GPU frequency model and recount reference FLOPs: seconds of CPU per rank, paid again at each
launch. A result is stored under a digest of everything it depends on (the caller's ``key``: its
inputs, the data it is fitted to, library versions), so a changed input never reads an old
result. Reading or writing problems never fail the caller: it computes instead.

Directory: ``$ZEUS_NB_CACHE_DIR``, else ``$XDG_CACHE_HOME/zeus-nb/computed``, else
``~/.cache/zeus-nb/computed``; ``ZEUS_NB_CACHE_DIR=off`` turns the cache off.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from zeus_nb.inputs.env import env
from zeus_nb.inputs.registry import environ_read, not_input
from zeus_nb.inputs.table import read_text
from zeus_nb.utils.files import atomic_write, unlocked_update

logger = logging.getLogger(__name__)
T = TypeVar("T")
OFF = ("off", "0", "false", "no")


@environ_read("XDG_CACHE_HOME, a standard folder variable")
def cache_dir() -> Path | None:
    """Where results are kept; None when the cache is turned off."""
    folder = env("ZEUS_NB_CACHE_DIR")
    if folder and folder.lower() in OFF:
        return None
    if folder:
        return Path(folder)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "zeus-nb" / "computed"


def digest(key: Any) -> str:
    """A stable digest of a JSON-able key (dict order does not matter)."""
    text = json.dumps(key, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@not_input("zeus-nb's own cache; unreadable means recompute")
@unlocked_update("a cache of a pure function: concurrent writers write the same value, atomically")
def cached(
    name: str,
    key: Any,
    compute: Callable[[], T],
    valid: Callable[[Any], bool] = lambda value: True,
) -> T:
    """``compute()``'s result, from the cache when a valid one is stored under ``key``.

    ``valid`` checks a stored value before it is used (a damaged or foreign file is recomputed).
    """
    directory = cache_dir()
    if directory is None:
        return compute()
    path = directory / f"{name}-{digest(key)}.json"
    try:
        value = json.loads(read_text(path, "cache file", 64 << 20))
        if valid(value):
            return value
        logger.debug("%s holds an invalid value; recomputing", path)
    except FileNotFoundError:  # also MissingInputError
        pass
    except (OSError, ValueError) as e:
        logger.debug("cannot read %s (%s); recomputing", path, e)
    value = compute()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps(value))  # concurrent ranks never read half a file
    except (OSError, TypeError, ValueError) as e:
        logger.debug("cannot cache %s in %s (%s)", name, directory, e)
    return value
