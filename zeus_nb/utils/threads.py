"""CPU threads for torch that fit small models, on a machine other work shares.

torch starts one intra-op thread per core. The notebooks' models are tiny: their operators are
too small to split well, and on a busy machine every parallel region waits for its slowest
thread, which another process may have descheduled, so training on all cores can take several
times as long as on one (``benchmarks/bench_tour.py --background N`` measures it). zeus-nb
therefore gives a model one thread per :data:`PARAMS_PER_THREAD` parameters, at least one and at
most its share of the cores this process may run on (its CPU affinity, divided among the
processes that train side by side).

An explicit choice always wins: a ``threads`` argument (remembered for the rest of the process),
else ``OMP_NUM_THREADS`` from the environment, which torch and the BLAS libraries read at start.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import MutableMapping
from typing import Any

from zeus_nb.inputs.env import env
from zeus_nb.inputs.registry import environ_read
from zeus_nb.inputs.validate import integer

log = logging.getLogger(__name__)

#: Parameters per intra-op thread: models below this size (ShuffleNetV2 x0.5 has 0.44 M, the
#: notebooks' tiny nets fewer) run on one thread; a ResNet-50 (25.6 M) may use up to three.
PARAMS_PER_THREAD = 10_000_000

THREADS_VAR = "OMP_NUM_THREADS"
#: Set beside ``OMP_NUM_THREADS`` where zeus-nb chose it for a child process, so that the child
#: can tell its parent's default (which a model's size may still change) from a user's choice.
DEFAULT_MARK = "ZEUS_NB_DEFAULT_THREADS"

_chosen: int | None = None  # an explicit ``threads`` argument given earlier in this process


def available_cpus() -> int:
    """Cores this process may run on: its affinity mask where the OS has one, else all."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def threads_for(parameters: int = 0, cpus: int | None = None, processes: int = 1) -> int:
    """Intra-op threads for a model of ``parameters`` parameters (0: a tiny one).

    ``cpus`` defaults to :func:`available_cpus`; ``processes`` that train side by side on them
    (ranks of one machine, parallel sweep kernels) share them evenly.
    """
    share = max(1, (cpus or available_cpus()) // max(1, processes))
    return max(1, min(share, math.ceil(parameters / PARAMS_PER_THREAD)))


def count_parameters(model: Any) -> int:
    """Number of parameters of a torch module (0 for anything without ``parameters()``)."""
    params = getattr(model, "parameters", None)
    return sum(p.numel() for p in params()) if callable(params) else 0


@environ_read(
    "OMP_NUM_THREADS, torch's and BLAS's own variable, checked there, and zeus-nb's "
    "mark of its own default"
)
def from_environment() -> str | None:
    """``OMP_NUM_THREADS`` as the user set it; None where unset, empty or zeus-nb's default."""
    value = os.environ.get(THREADS_VAR, "").strip()
    if not value or value == os.environ.get(DEFAULT_MARK, "").strip():
        return None
    return value


def use_threads(
    threads: int | None = None,
    *,
    model: Any = None,
    parameters: int | None = None,
    processes: int = 1,
) -> int | None:
    """Set torch's intra-op threads for ``model`` (or its ``parameters`` count).

    ``threads`` sets them outright and is kept for the later calls of this process. Without it,
    an earlier explicit count or ``OMP_NUM_THREADS`` stays in force; else :func:`threads_for`
    decides. Returns the count set, or None where nothing changed (an explicit choice stands,
    or torch is not installed).
    """
    global _chosen
    if threads is not None:
        n = _chosen = integer(threads, "threads", low=1, fix="give a positive number of threads")
    elif _chosen is not None or from_environment() is not None:
        log.debug("torch threads: the explicit choice stands (%s)", _chosen or THREADS_VAR)
        return None
    else:
        size = parameters if parameters is not None else count_parameters(model)
        n = threads_for(size, processes=processes)
    try:
        import torch
    except ImportError:
        return None
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    log.debug("torch threads: %d (%d cores available)", n, available_cpus())
    return n


def thread_environment(env: MutableMapping[str, str], processes: int = 1) -> None:
    """Give child processes (kernels, sweep workers) the thread count of a small model.

    ``OMP_NUM_THREADS`` already in ``env`` (the user's) is kept; without it, each child starts
    with :func:`threads_for` a tiny model, which torch, NumPy's BLAS and OpenMP all read.
    """
    if not env.get(THREADS_VAR, "").strip():
        env[THREADS_VAR] = env[DEFAULT_MARK] = str(threads_for(0, processes=processes))


def local_processes() -> int:
    """Training processes on this machine: torchrun's ``LOCAL_WORLD_SIZE``, else 1."""
    return env("LOCAL_WORLD_SIZE", 1)
