"""Every environment variable zeus-nb reads, declared once, read through :func:`env`.

A variable is typed like a table column (:class:`~zeus_nb.inputs.schema.Column`): a value that
does not fit (an unknown ``ZEUS_NB_CHECKS`` mode, ``nan`` noise, a GPU count of 0) is an
:class:`~zeus_nb.errors.InputError` naming the variable, never a silent default. Unset means
the documented default. Set to the empty string also means unset: that is how shells, Docker
(``-e VAR=``) and CI files clear a variable, so it is the one documented exception to "empty is
an error" (docs/reliability.md).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from zeus_nb.errors import InputError
from zeus_nb.inputs.schema import Column
from zeus_nb.inputs.validate import CPU_TDP, DRAM_SIZE, NOISE, Quantity

__all__ = ["VARIABLES", "Variable", "env", "is_set"]


@dataclass(frozen=True)
class Variable:
    """A declared environment variable: its type (a column) and what it is for."""

    name: str
    column: Column
    doc: str


def _v(name: str, kind: str, doc: str, **kw: Any) -> Variable:
    return Variable(name, Column(name, kind, **kw), doc)


_SLOWDOWN = Quantity("maximum slowdown factor", "", 1.0, 100.0)
_PATH = "text"

VARIABLES: dict[str, Variable] = {
    v.name: v
    for v in (
        _v("ZEUS_NB_BACKEND", "choice", "GPU backend",
           choices=("auto", "sim", "nvml", "simulated", "simulation")),
        _v("ZEUS_NB_ENERGY_READS", "choice", "how monitors read GPU energy counters "
           "(ZeusMonitor energy_reads)", choices=("auto", "sync", "background")),
        _v("ZEUS_NB_SIM_GPU", "text", "simulated GPU: a40, v100 or a power-trace CSV"),
        _v("ZEUS_NB_SIM_WORKLOAD", "text", "simulated workload (a traced dataset)"),
        _v("ZEUS_NB_SIM_GPUS", "integer", "number of simulated GPUs", low=1, high=1024),
        _v("ZEUS_NB_SIM_BATCH_SIZE", "integer", "simulated batch size", low=1, high=10**7),
        _v("ZEUS_NB_SIM_NOISE", "number", "relative noise of simulated steps", quantity=NOISE),
        _v("ZEUS_NB_SIM_SEED", "integer", "seed of the simulated noise", low=0, high=2**32 - 1),
        _v("ZEUS_NB_SIM_CLOCK", "choice", "simulated clock", choices=("virtual", "wall")),
        _v("ZEUS_NB_SIM_CPU_TDP", "number", "simulated CPU TDP (W)", quantity=CPU_TDP),
        _v("ZEUS_NB_SIM_DRAM_GB", "number", "simulated DRAM size (GB)", quantity=DRAM_SIZE),
        _v("ZEUS_NB_SIM_RANK_SPREAD", "number", "relative spread of step time and power "
           "between ranks", quantity=NOISE),
        _v("ZEUS_NB_SIM_STRAGGLER", "text", "a slow rank and its slowdown, e.g. 1:1.3"),
        _v("RANK", "integer", "torchrun: this process's global rank", low=0, high=2**20),
        _v("LOCAL_WORLD_SIZE", "integer", "torchrun: processes on this node", low=1, high=1024),
        _v("LOCAL_RANK", "integer", "torchrun: this process's rank on its node", low=0,
           high=1024),
        _v("ZEUS_NB_STATE_DIR", _PATH, "folder of state files and the batch-size store"),
        _v("ZEUS_NB_CACHE_DIR", _PATH, "folder of computed-value caches"),
        _v("ZEUS_SERVER_URL", "text", "Zeus's batch-size server URL (http://...), or a store"),
        _v("ZEUS_NB_BSO_STORE", "text", "the batch-size optimizer's store (path or URL)"),
        _v("ZEUS_BSO_DATABASE_URL", "text", "the batch-size optimizer server's database"),
        _v("ZEUS_BSO_ECHO_SQL", "bool", "the batch-size optimizer server logs its SQL"),
        _v("ZEUS_BSO_TRIAL_LEASE", "number", "seconds a handed-out trial counts as running "
           "without a report", quantity=Quantity("trial lease", "s", 1.0, 3.2e7)),
        _v("ZEUS_BSO_LOG_LEVEL", "choice", "log level of the batch-size optimizer server",
           choices=("notset", "debug", "info", "warn", "warning", "error", "critical")),
        _v("ZEUS_NB_CHECKS", "choice", "exercise checks", choices=("strict", "lenient")),
        _v("ZEUS_NB_DEBUG", "bool", "show tracebacks of errors"),
        _v("ZEUS_NB_HEADLESS", "bool", "widgets show no controls"),
        _v("ZEUS_NB_WARM_KERNELS", "bool", "notebook kernels fork from a process that "
           "imported PyTorch and the rest once (default: on, Linux)"),
        _v("ZEUS_NB_RECORD_FILE", _PATH, "sidecar file of zeus_nb.record"),
        _v("ZEUS_NB_RECORD_DIR", _PATH, "folder of sidecar files of zeus_nb.record"),
        _v("ZEUS_MAX_SLOWDOWN", "number", "Zeus's maximum slowdown factor", quantity=_SLOWDOWN),
        _v("ZEUS_NB_MAX_SLOWDOWN", "number", "maximum slowdown factor", quantity=_SLOWDOWN),
        _v("ZEUS_NB_POWERCAP_ROOT", _PATH, "RAPL powercap folder (tests, containers)"),
        _v("ZEUS_NB_OPENEI_KEY", "text", "OpenEI API key (electricity prices)"),
        _v("ZEUS_NB_ELECTRICITYMAPS_KEY", "text", "Electricity Maps API key"),
        _v("ZEUS_NB_DEFAULT_THREADS", "text", "marks OMP_NUM_THREADS as zeus-nb's own default"),
        _v("ZEUSD_TOKEN", "text", "token of the zeusd daemon (Zeus's privileged helper)"),
        _v("ZEUSD_SOCK_PATH", _PATH, "Unix socket of the zeusd daemon"),
        _v("ZEUSD_HOST_PORT", "text", "host:port of the zeusd daemon"),
        _v("ZEUS_NB_NOTEBOOKS", _PATH, "folder of the notebooks"),
        _v("ZEUS_NB_DATA_DIR", _PATH, "ImageNet-layout data folder of the training scripts"),
    )
}  # fmt: skip


def is_set(name: str) -> bool:
    """Whether ``name`` holds a value (set and not empty)."""
    return bool(os.environ.get(name, "").strip())


def env(name: str, default: Any = None) -> Any:
    """The declared variable ``name``, checked; ``default`` when unset or empty.

    Raises :class:`InputError` naming the variable for a value of the wrong type or range, and
    KeyError for a variable nobody declared (declare it in :data:`VARIABLES`).
    """
    var = VARIABLES[name]
    raw = os.environ.get(name, "")
    if not raw.strip():
        return default
    try:
        return var.column.parse(raw, f"environment variable {name}")
    except InputError as e:
        raise InputError(f"{e}; unset {name} or fix it") from None
