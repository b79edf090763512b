"""Worker plugins: what every Dask worker process sets up before it runs sweep points.

The client side is :mod:`zeus_nb.runner.cluster`, which registers these plugins and re-exports them.
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any

from zeus_nb.device.gpu import nvml as pynvml
from zeus_nb.inputs.env import env
from zeus_nb.inputs.registry import environ_read

try:  # the cluster extra; without it the plugins are plain classes nobody registers
    from distributed.diagnostics.plugin import WorkerPlugin
except ImportError:  # pragma: no cover
    WorkerPlugin = object  # type: ignore[assignment,misc]

log = logging.getLogger(__name__)


@environ_read("CUDA_VISIBLE_DEVICES, parsed there")
def _visible_gpus() -> list[str]:
    text = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    return [g.strip() for g in text.split(",") if g.strip()]


class PinGPU(WorkerPlugin):
    """Worker plugin: each worker process of a machine sees only its own GPU.

    A worker's index is the number its name ends with (a local cluster names workers 0, 1...;
    ``dask worker --nworkers N`` and dask-jobqueue add ``-0``, ``-1``...). The
    plugin narrows ``CUDA_VISIBLE_DEVICES`` (all GPUs of the machine or job when unset) to the
    one at that index, before any point imports CUDA. With no GPU list it changes nothing.
    """

    name = "zeus-nb-pin-gpu"
    idempotent = True

    def __init__(self, gpus: list[str] | None = None):
        self.gpus = gpus

    @staticmethod
    def index_of(worker_name: Any) -> int | None:
        if isinstance(worker_name, int):
            return worker_name
        m = re.search(r"(\d+)$", str(worker_name))
        return int(m.group(1)) if m else None

    def setup(self, worker) -> None:
        gpus = self.gpus if self.gpus is not None else _visible_gpus()
        if not gpus:
            gpus = _nvml_gpus()
        i = self.index_of(worker.name)
        if not gpus or i is None:
            return
        gpu = gpus[i % len(gpus)]
        os.environ["CUDA_VISIBLE_DEVICES"] = gpu
        log.info("worker %s pinned to GPU %s", worker.name, gpu)


class IgnoreInterrupts(WorkerPlugin):
    """Worker plugin for local clusters: Ctrl-C in the terminal is for the client alone.

    A terminal sends SIGINT to every process of the foreground group, the local workers
    included; they ignore it, so the client can let running points finish.
    """

    name = "zeus-nb-ignore-sigint"
    idempotent = True

    def setup(self, worker) -> None:
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.SIG_IGN)


def _nvml_gpus() -> list[str]:
    """Indices of this machine's NVIDIA GPUs (empty without a driver or on the simulator)."""
    if env("ZEUS_NB_BACKEND") in ("sim", "simulated", "simulation"):
        return []
    try:
        pynvml.nvmlInit()
        try:
            return [str(i) for i in range(pynvml.nvmlDeviceGetCount())]
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return []
