"""``asyncio`` tasks whose failures are logged rather than lost (Zeus's ``create_task``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
default_logger = logging.getLogger(__name__)


def create_task(
    coroutine: Coroutine[Any, Any, T], logger: logging.Logger | None = None
) -> asyncio.Task[T]:
    """Schedule ``coroutine`` on the running loop; an exception it dies with is logged.

    A task nobody awaits would otherwise swallow its exception until garbage collection.
    """
    task = asyncio.get_running_loop().create_task(coroutine)
    log = logger or default_logger

    def _report(done: asyncio.Task) -> None:
        if not done.cancelled() and done.exception() is not None:
            log.error("background task %s failed", done.get_name(), exc_info=done.exception())

    task.add_done_callback(_report)
    return task
