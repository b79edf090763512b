"""One background counter reader per GPU and process, and the choice of reading a GPU so.

Whether a GPU's counter is slow enough to read in the background is decided once per GPU and
process, under a lock (:func:`choose`); however many threads or monitors open windows at once,
a GPU then has one :class:`~zeus_nb.device.counter.CounterReader` (:func:`acquire`).
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from typing import TYPE_CHECKING

from zeus_nb.device.counter import SLOW_READ_S, CounterReader

if TYPE_CHECKING:
    from zeus_nb.device.base import GPU

log = logging.getLogger(__name__)

_readers: weakref.WeakKeyDictionary[GPU, CounterReader] = weakref.WeakKeyDictionary()
_registry_lock = threading.Lock()


def acquire(gpu: GPU) -> CounterReader:
    """The process's running reader of ``gpu``'s counter (started on first use)."""
    with _registry_lock:
        reader = _readers.get(gpu)
        if reader is None or reader._stop.is_set():
            reader = _readers[gpu] = CounterReader(gpu)
        reader._users += 1
        reader.start()
        return reader


def release(reader: CounterReader) -> None:
    """One user less; the reader stops when no monitor uses it any more."""
    with _registry_lock:
        reader._users -= 1
        if reader._users <= 0:
            reader._stop.set()
            if _readers.get(reader.gpu) is reader:
                del _readers[reader.gpu]


_choices: weakref.WeakKeyDictionary[GPU, bool] = weakref.WeakKeyDictionary()


def choose(gpu: GPU, mode: str, reads: int = 2) -> bool:
    """Whether ``gpu``'s counter is read in the background (``mode``: auto, sync, background).

    ``auto`` times ``reads`` reads, once per GPU and process, under a lock: however many
    threads or monitors ask at once, a GPU has one answer and at most one reader.
    """
    if mode != "auto":
        return mode == "background"
    with _registry_lock:
        slow = _choices.get(gpu)
        if slow is None:
            costs = []
            for _ in range(reads):
                t0 = time.perf_counter()
                gpu.get_total_energy_consumption()
                costs.append(time.perf_counter() - t0)
            slow = _choices[gpu] = min(costs) > SLOW_READ_S
            if slow:
                log.info(
                    "GPU %d: its energy counter is read in the background (reads took %s)",
                    gpu.index,
                    ", ".join(f"{c * 1e3:.2f} ms" for c in costs),
                )
        return slow


@atexit.register
def _stop_all() -> None:
    with _registry_lock:
        readers = list(_readers.values())
    for reader in readers:
        reader._stop.set()
