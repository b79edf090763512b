"""CPU time of every process a benchmark starts, orphans included (Linux).

A process that becomes its descendants' "child subreaper" (``prctl``) adopts those whose parents
end first (a fork server, a launcher's ranks, a zygote's kernels), waits for them (:func:`reap`)
and so counts their CPU time in ``RUSAGE_CHILDREN`` (:func:`children_cpu`).
"""

from __future__ import annotations

import ctypes
import os
import resource
import sys

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> None:
    """Adopt this process's orphaned descendants; exit where Linux's prctl is missing."""
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit("prctl(PR_SET_CHILD_SUBREAPER) failed: this benchmark needs Linux")


def children_cpu() -> float:
    """User and system CPU seconds of every descendant waited for so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def reap() -> None:
    """Wait for every orphan handed to this process."""
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
