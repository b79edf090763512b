"""One background counter reader per GPU and process, and the choice of reading a GPU so.

Whether a GPU's counter is slow enough to read in the background is decided once per GPU and
process, from its first reads (one cheap one, or four slow), under a lock (:func:`probe`);
however many threads or monitors open windows at once, a GPU then has one
:class:`~zeus_nb.device.counter.CounterReader` (:func:`acquire`).
"""

from __future__ import annotations

import atexit
import collections
import logging
import threading
import time
import weakref
from typing import TYPE_CHECKING

from zeus_nb.device.counter import SLOW_READ_S, CounterReader

if TYPE_CHECKING:
    from zeus_nb.device.base import GPU

log = logging.getLogger(__name__)

#: Slow counter reads in a row (the windows' own) before a GPU is read in the background.
PROBE_READS = 4
# The clock the first reads are timed by (a seam: a test scripts what each read costs, so that
# what it checks does not depend on how the machine's scheduler treats it).
_clock = time.perf_counter

_readers: weakref.WeakKeyDictionary[GPU, CounterReader] = weakref.WeakKeyDictionary()
_registry_lock = threading.Lock()
# Readers their last monitor let go of. release() runs from a monitor's finalizer, i.e. from the
# garbage collector, which may run inside acquire() on this very thread while it holds the lock:
# so release() only queues (deque.append is atomic) and whoever can take the lock stops them.
_released: collections.deque[CounterReader] = collections.deque()


def acquire(gpu: GPU) -> CounterReader:
    """The process's running reader of ``gpu``'s counter (started on first use)."""
    with _registry_lock:
        _stop_released()
        reader = _readers.get(gpu)
        if reader is None or reader._stop.is_set():
            reader = _readers[gpu] = CounterReader(gpu)
        reader._users += 1
        reader.start()
    _settle()
    return reader


def release(reader: CounterReader) -> None:
    """One user less; the reader stops when no monitor uses it any more. Never waits for the
    lock (see ``_released``)."""
    _released.append(reader)
    _settle()


def _stop_released() -> None:
    """With the lock held: count off the queued releases, stop readers nobody uses."""
    while _released:
        reader = _released.popleft()
        reader._users -= 1
        if reader._users <= 0:
            reader._stop.set()
            if _readers.get(reader.gpu) is reader:
                del _readers[reader.gpu]


def _settle() -> None:
    """Handle queued releases if the lock is free; if it is held, its holder does on leaving."""
    while _released and _registry_lock.acquire(blocking=False):
        try:
            _stop_released()
        finally:
            _registry_lock.release()


_choices: weakref.WeakKeyDictionary[GPU, bool] = weakref.WeakKeyDictionary()
_costs: weakref.WeakKeyDictionary[GPU, list[float]] = weakref.WeakKeyDictionary()
_probe_lock = threading.Lock()  # held across a timed read: one thread times a GPU at a time


def decided(gpu: GPU, mode: str) -> bool | None:
    """Whether ``gpu``'s counter is read in the background (``mode``: auto, sync,
    background); None while ``auto`` has not timed enough of its reads (:func:`probe`)."""
    if mode != "auto":
        return mode == "background"
    return _choices.get(gpu)


def probe(gpu: GPU, reads: int = PROBE_READS) -> float | None:
    """One of a window edge's reads of ``gpu``'s counter (J), timed to choose how to read it.

    The first reads of a GPU, in the process, are the windows' own (Zeus's reads: its tests
    count them), timed under a lock, so however many threads or monitors open their first
    windows at once, a GPU gets one answer and at most one reader. One read under SLOW_READ_S
    decides for the caller's thread; ``reads`` slow ones in a row for a background reader (a
    cheap read on a busy machine can be preempted, or pay a first call's setup, but not every
    time). None: already decided.
    """
    with _probe_lock:
        if gpu in _choices:
            return None
        t0 = _clock()
        joules = gpu.get_total_energy_consumption() / 1000.0
        costs = _costs.setdefault(gpu, [])
        costs.append(_clock() - t0)
        if costs[-1] <= SLOW_READ_S:
            _choices[gpu] = False
        elif len(costs) >= reads:
            _choices[gpu] = True
            log.info(
                "GPU %d: its energy counter is read in the background (reads took %s)",
                gpu.index,
                ", ".join(f"{c * 1e3:.2f} ms" for c in costs),
            )
        return joules


@atexit.register
def _stop_all() -> None:
    with _registry_lock:
        readers = list(_readers.values())
    for reader in readers:
        reader._stop.set()
