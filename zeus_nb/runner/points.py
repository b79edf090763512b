"""Sweep points as Dask tasks: workers compute, the client alone writes.

A worker may sit on another machine with no view of the client's output folder, and two
writers of one folder could lose or duplicate results. So a point's task gets everything it
needs by value (the notebook's bytes, the parameters, the simulated GPU's settings) and
returns everything it produced by value (the executed notebook and its records sidecar, or
the measured result row); the client writes each returned point once, atomically, in the
order points finish.
"""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zeus_nb import device
from zeus_nb.device.guard import power_limits_restored
from zeus_nb.errors import InputError, ZeusNbError
from zeus_nb.inputs.registry import environ_read, not_input, system_read
from zeus_nb.inputs.table import MAX_NOTEBOOK_BYTES, read_bytes
from zeus_nb.monitor import ZeusMonitor
from zeus_nb.runner.notebooks import run_notebook
from zeus_nb.runner.records import sidecar_of
from zeus_nb.utils.files import atomic_write, writes_itself


@dataclass(frozen=True)
class NotebookTask:
    """One notebook execution, shipped to a worker."""

    name: str
    notebook_name: str
    notebook: bytes
    parameters: dict[str, Any]
    timeout: float | None = None
    kernel: str = "python3"


@environ_read("CUDA_VISIBLE_DEVICES of the worker")
@system_read("bytes of a notebook shipped to a worker")
@writes_itself("a worker's private temporary folder")
def execute_notebook_task(task: NotebookTask) -> dict[str, Any]:
    """Run on a worker: execute the notebook in a private folder and return its files."""

    with tempfile.TemporaryDirectory(prefix="zeus-nb-point-") as d:
        src = Path(d) / task.notebook_name
        src.write_bytes(task.notebook)
        out = Path(d) / "out" / f"{task.name}.ipynb"
        res = run_notebook(src, out, task.parameters, timeout=task.timeout, kernel_name=task.kernel)
        side = sidecar_of(out)
        return {
            "ok": res.ok,
            "error": res.error,
            "seconds": res.seconds,
            "notebook": out.read_bytes() if out.exists() else None,
            "sidecar": side.read_bytes() if side.exists() else None,
            "worker": f"{socket.gethostname()}:{os.getpid()}",
            "gpu": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
        }


def write_notebook_result(output: Path, result: dict[str, Any]) -> None:
    """Client side: store a point's executed notebook (and its sidecar first)."""

    side = sidecar_of(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    if result.get("sidecar") is not None:
        atomic_write(side, result["sidecar"])
    else:
        side.unlink(missing_ok=True)
    if result.get("notebook") is not None:
        atomic_write(output, result["notebook"])


def simulated_settings() -> dict[str, Any] | None:
    """The current simulated GPU's settings, so workers simulate the same GPU (or None)."""

    system = device._current
    if system is None or getattr(system, "backend", None) != "sim":
        return None
    return {
        "gpu": system.source,
        "workload": system.workload,
        "batch_size": system.batch_size,
        "noise": system.noise,
        "seed": system.seed,
        "num_samples": system.num_samples,
    }


def use_settings(settings: dict[str, Any] | None) -> None:
    """On a worker: simulate the client's GPU (one simulated GPU per worker), if it had one."""

    if settings is not None:
        device.use_simulated(num_gpus=1, **settings)


# --- (batch size, power limit) configurations ----------------------------------------------
def reached(metric: float, target: float, higher_is_better: bool) -> bool:
    return metric >= target if higher_is_better else metric <= target


def measure_configuration(
    monitor,
    train_fn,
    batch_size: int,
    power_limit: float,
    target: float,
    max_epochs: int,
    higher_is_better: bool,
) -> dict[str, Any]:
    """Train one configuration until the target or ``max_epochs``; the result row.

    The caller has set the power limit; the window is cancelled when training raises.
    """
    import math
    from datetime import datetime, timezone

    window = "__zeus_nb_sweep"
    monitor.begin_window(window, restart=True)
    metric, epochs = math.nan, 0
    try:
        for epoch in range(max_epochs):
            metric = float(train_fn(batch_size, epoch))
            epochs = epoch + 1
            if math.isnan(metric):
                raise InputError(
                    f"train_fn returned NaN at batch size {batch_size}, epoch {epoch}; it must "
                    "return the validation metric"
                )
            if reached(metric, target, higher_is_better):
                break
    except BaseException:
        monitor.end_window(window, cancel=True)
        raise
    m = monitor.end_window(window)
    return {
        "batch_size": batch_size,
        "power_limit": power_limit,
        "epochs": epochs,
        "metric": metric,
        "reached": reached(metric, target, higher_is_better),
        "time": m.time,
        "energy": m.total_energy,
        "num_gpus": len(monitor.gpus),  # lets a reader check energy / time per GPU
        "target_metric": target,
        "max_epochs": max_epochs,
        "higher_is_better": higher_is_better,
        "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


@dataclass(frozen=True)
class ConfigTask:
    """One (batch size, power limit) run, shipped to a worker with the client's settings."""

    train_fn: Any
    batch_size: int
    power_limit: float
    target: float
    max_epochs: int
    higher_is_better: bool
    gpu_indices: list[int] | None = None
    simulated: dict[str, Any] | None = None


def train_config_task(task: ConfigTask) -> dict[str, Any]:
    """Run on a worker: set the limit on this worker's GPU, train, restore, return the row."""

    use_settings(task.simulated)
    monitor = ZeusMonitor(gpu_indices=task.gpu_indices)
    with power_limits_restored(monitor.gpus, backend=monitor.system.backend):
        for g in monitor.gpus:
            g.set_power_limit(task.power_limit)
        return measure_configuration(
            monitor,
            task.train_fn,
            task.batch_size,
            task.power_limit,
            task.target,
            task.max_epochs,
            task.higher_is_better,
        )


class SweepPointsFailed(ZeusNbError):
    """Some configurations of a distributed sweep failed; the others are recorded."""


def config_key(batch_size: int, power_limit: float) -> str:
    return f"batch_size={batch_size},power_limit={power_limit:g}"


def run_configs(
    todo: list[tuple[int, float]],
    make_task: Callable[[int, float], ConfigTask],
    write: Callable[[dict[str, Any]], None],
    executor: Any,
    *,
    progress: bool = True,
    done_before: int = 0,
) -> None:
    """Run configurations on Dask workers; ``write(row)`` records each one here, as it ends.

    Raises :class:`SweepPointsFailed` after the others finished if any configuration failed.
    """
    from zeus_nb.runner.cluster import open_client, run_points

    points = {config_key(bs, pl): make_task(bs, pl) for bs, pl in todo}
    with open_client(executor) as client:
        out = run_points(
            points,
            train_config_task,
            client,
            on_result=lambda _key, row: write(row),
            progress=progress,
            desc="sweep",
            done_before=done_before,
        )
    if out.failed:
        lines = "; ".join(f"{k}: {why}" for k, why in out.failed.items())
        raise SweepPointsFailed(
            f"{len(out.failed)} configuration(s) failed ({lines}); the others are recorded, "
            "run the sweep again to retry the failed ones"
        )


def sweep_on_cluster(
    train_fn,
    todo: list[tuple[int, float]],
    params: tuple[float, int, bool, list[int] | None],
    record: Callable[[dict], Any],
    executor: Any,
    progress: bool,
    done_before: int,
) -> None:
    """:func:`zeus_nb.runner.sweep.run_sweep`'s configurations on Dask workers (``executor``).

    ``record(row)`` writes one finished configuration (the sweep's results file, in the client).
    """

    target, cap, higher, gpu_indices = params
    if device.resolve_backend() == "sim":
        device.current("sim")  # workers simulate this process's GPU, not their own default
    sim = simulated_settings()
    if sim is not None:  # the client knows the simulated GPU: check every limit up front
        checker = device.current()
        for _, pl in todo:
            checker.gpu(0).check_power_limit(pl)

    def make_task(bs: int, pl: float) -> ConfigTask:
        return ConfigTask(train_fn, bs, pl, target, cap, higher, gpu_indices, sim)

    run_configs(
        todo,
        make_task,
        record,
        executor,
        progress=progress,
        done_before=done_before,
    )


# --- notebook sweeps -------------------------------------------------------------------------
@not_input("bytes of a notebook shipped to workers")
def sweep_notebook_on_cluster(
    notebook: Path,
    todo: list[tuple[str, dict[str, Any], Path]],
    executor: Any,
    *,
    timeout: float | None,
    kernel: str,
    done_before: int,
    report: Callable[[str], None] = print,
) -> list[tuple[str, str]]:
    """Execute ``todo`` (label, parameters, output) on Dask workers; returns the failures.

    Each point's executed notebook (and records sidecar) comes back to this process, which
    writes it into the output folder when the point ends, failed points included (their
    notebook shows the error and is re-run next time).
    """
    from zeus_nb.runner.cluster import open_client, run_points

    source = read_bytes(notebook, "notebook", MAX_NOTEBOOK_BYTES)
    outputs = {label: out for label, _, out in todo}
    points = {
        label: NotebookTask(label, notebook.name, source, params, timeout, kernel)
        for label, params, _ in todo
    }
    failed: list[tuple[str, str]] = []
    total = len(todo) + done_before
    count = [done_before]

    def on_result(label: str, result: dict[str, Any]) -> None:
        write_notebook_result(outputs[label], result)
        count[0] += 1
        where = f" on {result['worker']}" + (f" (GPU {result['gpu']})" if result["gpu"] else "")
        if result["ok"]:
            report(f"[{count[0]}/{total}] {label}: ok ({result['seconds']:.1f} s{where})")
        else:
            failed.append((label, result["error"]))
            report(f"[{count[0]}/{total}] {label}: FAILED: {result['error']}{where}")

    def on_failure(label: str, reason: str) -> None:
        count[0] += 1
        failed.append((label, reason))
        report(f"[{count[0]}/{total}] {label}: FAILED: {reason}")

    with open_client(executor) as client:
        run_points(
            points,
            execute_notebook_task,
            client,
            on_result=on_result,
            on_failure=on_failure,
            progress=False,
            done_before=done_before,
        )
    return failed
