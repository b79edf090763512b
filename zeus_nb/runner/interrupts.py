"""Ctrl-C in a client that waits on Dask: counted by a handler, acted on between calls.

The workers of a local cluster ignore SIGINT (:class:`~zeus_nb.runner.workers.IgnoreInterrupts`);
the client, which writes the results, must not be stopped half way through one of its calls.
"""

from __future__ import annotations

import signal
import threading
from typing import Any


class CountedInterrupts:
    """Ctrl-C counted while points are in flight, never raised inside Dask's own calls.

    A KeyboardInterrupt that lands inside a blocking client call (``Future.result``,
    ``scheduler_info``) stops it half way: Dask's callback for it then fails in the event loop,
    and a run could hang waiting for points that were never tracked, or lose a result half
    written. So in the main thread SIGINT only counts here, and
    :func:`~zeus_nb.runner.cluster.run_points` acts on the count between calls; elsewhere (no
    handler can be set) it raises as usual, and every point in flight is cancelled.
    """

    def __init__(self) -> None:
        self.count = 0
        self._before: Any = None

    def _on_sigint(self, signum, frame) -> None:
        self.count += 1

    def __enter__(self) -> CountedInterrupts:
        if threading.current_thread() is threading.main_thread():
            before = signal.getsignal(signal.SIGINT)
            if before is not None:  # None: a handler set outside Python, left alone
                self._before = before
                signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def __exit__(self, *exc) -> None:
        if self._before is not None:
            signal.signal(signal.SIGINT, self._before)
