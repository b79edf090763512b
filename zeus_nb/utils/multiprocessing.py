"""Processes and their stand-ins (Zeus's ``zeus.utils.multiprocessing``).

With the ``spawn`` start method a child process runs the parent's main script again as
``__mp_main__``; a monitor (or a model) built at module level is then built once more in every
child. Monitors call :func:`warn_if_global_in_subprocess` so the user hears about it.

Where Zeus runs a periodic loop in a spawned process, zeus-nb runs it on a thread of this process
(the loop then sees this process's GPU system, simulated ones included, and ``__main__`` is never
imported again): :func:`get_context` gives ``multiprocessing``'s context interface over threads
for ``"thread"``.
"""

from __future__ import annotations

import logging
import multiprocessing
import queue
import sys
import threading
import warnings
from typing import Any

log = logging.getLogger(__name__)


def _is_global_in_spawned_child() -> bool:
    """Whether module-level code of a spawned child's re-imported main script is running.

    Frames of multiprocessing's own bootstrap (``<string>``, ``<frozen ...>``) do not count.
    """
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals.get("__name__") == "__mp_main__":
            name = frame.f_code.co_filename
            if not (name == "<string>" or name.startswith("<frozen")):
                return True
        frame = frame.f_back
    return False


def warn_if_global_in_subprocess(self: Any) -> None:
    """Warn when ``self`` is being built by module-level code of a spawned child's main script."""
    if _is_global_in_spawned_child():
        warnings.warn(
            f"{type(self).__name__} was instantiated during module import in a spawned "
            "subprocess: the child re-ran your main script's global code, so it is built again "
            'in every child. Build it under `if __name__ == "__main__":` or inside a function.',
            stacklevel=3,
        )


# --- a thread that stands in for a multiprocessing.Process ---------------------------------------
#: Seconds ``ThreadProcess.start()`` waits for its target to say it is running.
START_TIMEOUT = 30.0


class ThreadProcess(threading.Thread):
    """A daemon thread with the part of ``multiprocessing.Process``'s interface that periodic
    loops use (``start``, ``join``, ``is_alive``, ``terminate``).

    :meth:`start` returns once the target has called :func:`started` (or has ended, or after
    :data:`START_TIMEOUT` s), and raises the error the target reported or raised before that:
    a loop that cannot begin (an unreachable server) fails in its caller, not in the log.
    """

    def __init__(self, target=None, args=(), kwargs=None, name=None, daemon=True) -> None:
        super().__init__(target=target, args=args, kwargs=kwargs or {}, name=name, daemon=daemon)
        self._ready = threading.Event()
        self._error: BaseException | None = None

    def run(self) -> None:
        try:
            super().run()
        except BaseException as e:  # noqa: BLE001 (handed to start() if it still waits)
            if not self._ready.is_set():
                self._error = e
            else:
                log.warning("%s stopped: %s", self.name, e)
        finally:
            self._ready.set()

    def start(self) -> None:
        super().start()
        self._ready.wait(START_TIMEOUT)
        if self._error is not None:
            self.join()
            raise self._error

    def terminate(self) -> None:
        """A thread cannot be stopped from outside; its loop stops on its own message."""
        log.debug("%s cannot be terminated; it stops when its loop reads its stop message", self)

    kill = terminate

    def _report(self, error: BaseException | None) -> None:
        self._error = error
        self._ready.set()


def started(error: BaseException | None = None) -> bool:
    """Tell the :class:`ThreadProcess` running this code that its loop is up (or failed with
    ``error``, which its ``start()`` raises). False where no ThreadProcess runs this code."""
    thread = threading.current_thread()
    if isinstance(thread, ThreadProcess):
        thread._report(error)
        return True
    return False


class ThreadContext:
    """``multiprocessing``'s context interface (``Queue``, ``Process``) over threads."""

    Process = ThreadProcess

    @staticmethod
    def Queue(maxsize: int = 0) -> queue.Queue:  # noqa: N802 (multiprocessing's name)
        return queue.Queue(maxsize)


def get_context(method: str | None = None) -> Any:
    """``multiprocessing.get_context(method)``, or a :class:`ThreadContext` for ``"thread"``."""
    if method == "thread":
        return ThreadContext()
    return multiprocessing.get_context(method)
