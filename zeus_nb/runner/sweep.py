"""Live (batch size, power limit) sweeps that survive interruptions.

:func:`run_sweep` trains once per configuration on the current backend, measuring each run with
:class:`~zeus_nb.monitor.ZeusMonitor` until the target metric or the epoch cap, and appends each
finished configuration to a JSON-lines results file at once. Running it again with the same file
resumes: finished configurations are skipped, the one that was interrupted is redone from scratch.

The training function
---------------------
``train_fn(batch_size, epoch) -> metric`` is called once per epoch (``epoch`` counts from 0; at 0
start from a fresh model), trains one epoch at ``batch_size`` and returns the validation metric.
Inside, call ``zeus_nb.step(batch_size=batch_size)`` once per training step: a simulated GPU then
charges the traced time and energy of that batch size, a real GPU ignores the call. The sweep sets
the power limit of every monitored GPU before each configuration; ``train_fn`` never needs to know
which backend it runs on.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zeus_nb import device
from zeus_nb.data.traces import get_workload, load_train_trace
from zeus_nb.data.workloads import name_keys
from zeus_nb.device.guard import power_limits_restored
from zeus_nb.errors import InputError, ZeusNbError
from zeus_nb.inputs import check_record, read_text, reader
from zeus_nb.inputs.kinds import SWEEP_RESULT
from zeus_nb.inputs.table import check_rows
from zeus_nb.monitor import ZeusMonitor
from zeus_nb.runner.points import measure_configuration, sweep_on_cluster
from zeus_nb.utils.files import append_rows, repair_tail

if TYPE_CHECKING:
    import pandas as pd

TrainFn = Callable[[int, int], float]
log = logging.getLogger(__name__)

RESULT_FIELDS = (
    "batch_size",
    "power_limit",
    "epochs",
    "metric",
    "reached",
    "time",
    "energy",
    "target_metric",
    "max_epochs",
    "higher_is_better",
    "finished_at",
)


class SweepResultsError(ZeusNbError, ValueError):
    """A results file cannot be resumed (another sweep's file, or corrupted)."""


def _key(batch_size: float, power_limit: float) -> tuple[int, float]:
    return int(batch_size), float(power_limit)


@reader(SWEEP_RESULT)
def read_results(path: str | Path) -> list[dict]:
    """Finished configurations recorded in a results file (empty if it does not exist).

    Each line goes through :data:`zeus_nb.inputs.kinds.SWEEP_RESULT` (every number checked).
    A last line without its newline is what a killed process may leave behind: it is kept if it
    is a whole, valid record, else dropped with a warning. A configuration recorded twice (files
    written before writers took the lock) counts once, its first record.
    """
    p = Path(path)
    if not p.exists():
        return []
    text = read_text(p, SWEEP_RESULT.name)
    lines = text.split("\n")
    if lines[-1]:
        if check_rows(lines[-1], SWEEP_RESULT, None, str(p), quiet=True):
            log.warning("%s: the last line has no line end but is a whole record; kept it", p)
            lines.append("")
        else:
            log.warning("%s: the last line has no line end (a write cut short); ignored it", p)
    records = []
    seen: set[tuple[int, float]] = set()
    for n, raw in enumerate(lines[:-1], start=1):  # the part after the last newline is partial
        if not raw.strip():
            continue
        try:
            rec = dict(check_record(json.loads(raw), SWEEP_RESULT, f"{p}: line {n}"))
        except (ValueError, KeyError, TypeError) as e:
            raise SweepResultsError(
                f"{p}: line {n} is not a sweep result ({e}); pass another results_path or "
                "delete the file to start over"
            ) from None
        key = _key(rec["batch_size"], rec["power_limit"])
        if key in seen:
            log.warning("%s: line %d repeats batch size %d at %g W; using the first", p, n, *key)
            continue
        seen.add(key)
        records.append(rec)
    return records


def _recorded(path: Path) -> set[tuple[int, float]]:
    return {_key(r["batch_size"], r["power_limit"]) for r in read_results(path)}


def results_lock(path: str | Path):
    """The lock every writer of a results file holds (processes and threads alike)."""
    from filelock import FileLock

    return FileLock(f"{path}.lock", timeout=600)


def _append(p: Path, record: dict) -> bool:
    """Append one JSON line under the file's lock, unless its configuration is there already.

    Two sweeps over one file (two processes, or threads) may both run a configuration; only the
    first to finish records it, so the file never holds a duplicate or a torn line. Returns
    whether the line was written.
    """
    line = json.dumps(record, sort_keys=False, allow_nan=False) + "\n"
    key = _key(record["batch_size"], record["power_limit"])
    with results_lock(p):
        repair_tail(p, SWEEP_RESULT)  # a complete last line is kept, a torn one cut
        if key in _recorded(p):
            log.info("%s already records batch size %d at %g W; not written twice", p, *key)
            return False
        # checked as read_results will read it, then one write, fsynced: no torn line
        append_rows(p, line, SWEEP_RESULT)
    return True


def _settings(
    workload: str | None,
    target_metric: float | None,
    max_epochs: int | None,
    higher_is_better: bool | None,
) -> tuple[float, int, bool]:
    """Target, epoch cap and direction: the given values, else the traced workload's defaults."""
    if workload is not None:
        wl = get_workload(workload)
        target_metric = wl.target_metric if target_metric is None else target_metric
        max_epochs = wl.max_epochs if max_epochs is None else max_epochs
        higher_is_better = wl.higher_is_better if higher_is_better is None else higher_is_better
    if target_metric is None or max_epochs is None:
        raise InputError("give target_metric and max_epochs, or a traced workload= for defaults")
    if int(max_epochs) < 1:
        raise InputError(f"max_epochs must be >= 1, got {max_epochs}")
    higher = True if higher_is_better is None else bool(higher_is_better)
    return float(target_metric), int(max_epochs), higher


def _grid(batch_sizes: Iterable[int], power_limits: Iterable[float]) -> list[tuple[int, float]]:
    """Every (batch size, power limit) once; an empty or repeating grid is a mistake."""
    grid = [_key(b, p) for b in batch_sizes for p in power_limits]
    if not grid:
        raise InputError("empty sweep: give at least one batch size and one power limit")
    if len(set(grid)) != len(grid):
        raise InputError("batch_sizes and power_limits must not repeat values")
    return grid


def _done_keys(path: Path, target: float, cap: int) -> set[tuple[int, float]]:
    """Configurations ``path`` already holds; a file of another sweep is refused, not mixed."""
    with results_lock(path):
        repair_tail(path, SWEEP_RESULT)
    done = set()
    for rec in read_results(path):
        theirs = (float(rec.get("target_metric", target)), int(rec.get("max_epochs", cap)))
        if theirs != (target, cap):
            raise SweepResultsError(
                f"{path} holds a sweep with target {rec.get('target_metric')} and "
                f"{rec.get('max_epochs')} max epochs, not {target:g} and {cap}; pass another "
                "results_path"
            )
        done.add(_key(rec["batch_size"], rec["power_limit"]))
    return done


def _train_one(
    monitor, train_fn: TrainFn, bs: int, pl: float, target: float, cap: int, higher: bool
) -> dict:
    """Train one configuration at power limit ``pl`` here; its record, logged."""
    for g in monitor.gpus:
        g.set_power_limit(pl)
    row = measure_configuration(monitor, train_fn, bs, pl, target, cap, higher)
    log.info(
        "batch size %d at %g W: metric %.3f after %d epoch(s), %.1f s, %.0f J%s",
        bs,
        pl,
        row["metric"],
        row["epochs"],
        row["time"],
        row["energy"],
        "" if row["reached"] else " (target not reached)",
    )
    return row


def run_sweep(
    train_fn: TrainFn,
    batch_sizes: Iterable[int],
    power_limits: Iterable[float],
    *,
    results_path: str | Path,
    workload: str | None = None,
    target_metric: float | None = None,
    max_epochs: int | None = None,
    higher_is_better: bool | None = None,
    gpu_indices: list[int] | None = None,
    progress: bool = True,
    executor=None,
) -> pd.DataFrame:
    """Train every (batch size, power limit) until the target metric or ``max_epochs``.

    Args:
        train_fn: ``train_fn(batch_size, epoch) -> metric``; see the module docstring.
        batch_sizes, power_limits: the grid; power limits in W.
        results_path: JSON-lines file; one line per finished configuration. Resumable.
        workload: a traced workload (``"imagenet"``...) whose paper defaults fill in
            ``target_metric``, ``max_epochs`` and ``higher_is_better`` unless given.
        gpu_indices: GPUs to measure and to set the power limit of (default: all).
        progress: show a tqdm progress bar over configurations.
        executor: run configurations in parallel on Dask workers, one GPU each: a number of
            local workers, a scheduler address, ``"slurm"`` or a ``distributed.Client`` (see
            docs/cluster.md). ``train_fn`` is shipped to the workers; only this process
            writes the results file. Default: one after another, here.

    Returns the results of the whole grid (earlier runs included) as :func:`load_results` does.
    The power limits in force before the sweep are restored afterwards, also on errors.
    """
    target, cap, higher = _settings(workload, target_metric, max_epochs, higher_is_better)
    grid = _grid(batch_sizes, power_limits)
    path = Path(results_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    done = _done_keys(path, target, cap)
    todo = [k for k in grid if k not in done]
    params = (target, cap, higher)
    if executor is not None:
        _sweep_on_workers(train_fn, path, grid, todo, params, gpu_indices, executor, progress)
    else:
        _sweep_here(train_fn, path, grid, todo, params, gpu_indices, progress)
    return load_results(path, grid)


def _sweep_on_workers(
    train_fn: TrainFn,
    path: Path,
    grid: list[tuple[int, float]],
    todo: list[tuple[int, float]],
    params: tuple[float, int, bool],
    gpu_indices: list[int] | None,
    executor,
    progress: bool,
) -> None:
    """Dask dispatch: workers train, this process alone appends each finished row."""
    sweep_on_cluster(
        train_fn,
        todo,
        (*params, gpu_indices),
        lambda row: _append(path, row),
        executor,
        progress,
        len(grid) - len(todo),
    )


@contextlib.contextmanager
def _progress_bar(show: bool, total: int, initial: int) -> Iterator[Any]:
    """A tqdm bar over configurations, or None when ``show`` is False; closed on the way out."""
    if not show:
        yield None
        return
    from tqdm.auto import tqdm  # heavy-ish; a sweep without a bar does not load it

    bar = tqdm(total=total, initial=initial, desc="sweep", unit="config")
    try:
        yield bar
    finally:
        bar.close()


def _sweep_here(
    train_fn: TrainFn,
    path: Path,
    grid: list[tuple[int, float]],
    todo: list[tuple[int, float]],
    params: tuple[float, int, bool],
    gpu_indices: list[int] | None,
    progress: bool,
) -> None:
    """The training loop in this process: every limit checked first, each row appended at once."""
    monitor = ZeusMonitor(gpu_indices=gpu_indices)
    for _, pl in grid:  # validate every limit before changing anything
        for g in monitor.gpus:
            g.check_power_limit(pl)
    if len(todo) < len(grid):
        log.info(
            "resuming %s: %d of %d configurations already done",
            path,
            len(grid) - len(todo),
            len(grid),
        )
    # Limits come back afterwards (errors, Ctrl-C and SIGTERM included). Only changed limits are
    # set back, so a permission error on the first change surfaces as it is.
    with (
        _progress_bar(progress, len(grid), len(grid) - len(todo)) as bar,
        power_limits_restored(monitor.gpus, backend=monitor.system.backend),
    ):
        for bs, pl in todo:
            if (bs, pl) in _recorded(path):
                log.info("batch size %d at %g W was recorded by another sweep", bs, pl)
            else:
                if bar is not None:
                    bar.set_postfix_str(f"batch {bs}, {pl:g} W")
                _append(path, _train_one(monitor, train_fn, bs, pl, *params))
            if bar is not None:
                bar.update(1)


def load_results(path: str | Path, grid: Iterable[tuple[int, float]] | None = None) -> pd.DataFrame:
    """A results file as a DataFrame ready for the tradeoff functions and plots.

    Columns: the recorded fields, plus ``tta`` and ``eta`` (= time and energy where the target was
    reached, NaN otherwise). ``grid`` restricts the rows to those configurations.
    """
    import pandas as pd

    recs = read_results(path)
    df = pd.DataFrame(recs, columns=list(RESULT_FIELDS))
    if grid is not None:
        keys = set(grid)
        mask = [
            _key(b, p) in keys for b, p in zip(df["batch_size"], df["power_limit"], strict=True)
        ]
        df = df[mask]
    df = df.astype({"batch_size": int, "power_limit": float, "reached": bool})
    df["tta"] = df["time"].where(df["reached"])
    df["eta"] = df["energy"].where(df["reached"])
    return df.sort_values(["batch_size", "power_limit"]).reset_index(drop=True)


def trace_train_fn(
    workload: str,
    run: int = 1,
    train_trace: pd.DataFrame | None = None,
    step_delay: float = 0.0,
) -> TrainFn:
    """A ``train_fn`` that replays recorded training runs instead of training.

    Each call is one epoch: it steps the GPU through the workload's steps per epoch at that batch
    size (``zeus_nb.step``), then returns the best metric threshold that ``run`` of the train trace
    had reached by that epoch. The target is thus reached at exactly the recorded epoch, and on the
    simulated GPU set to the same workload (``zeus_nb.use_simulated(gpu, workload=...)``) a sweep
    reproduces the traced TTA and ETA. Batch sizes without a recorded run raise ValueError.
    ``step_delay`` (s) sleeps once per epoch, to make demos visibly progress.
    """
    wl = get_workload(workload)
    train = load_train_trace() if train_trace is None else train_trace
    rows = train[
        (name_keys(train["dataset"]) == wl.dataset)
        & (name_keys(train["network"]) == wl.network)
        & (name_keys(train["optimizer"]) == wl.optimizer)
        & (train["run"] == int(run))
    ]
    curves: dict[int, list[tuple[float, float]]] = {}
    for bs, g in rows.groupby("batch_size"):
        recorded = g.dropna(subset=["target_epoch"])
        pts = list(
            zip(recorded["target_epoch"].astype(float), recorded["target_metric"], strict=True)
        )
        curves[int(bs)] = sorted(pts)
    if not curves:
        raise InputError(f"the train trace has no run {run} of {wl.dataset}")
    worst = min if wl.higher_is_better else max
    better = max if wl.higher_is_better else min
    floor = worst(float(m) for m in rows["target_metric"])
    # Below every recorded threshold: report a value just past the worst one, never a fake score.
    start = floor - 1e-9 if wl.higher_is_better else floor + 1e-9

    def train_fn(batch_size: int, epoch: int) -> float:
        pts = curves.get(int(batch_size))
        if pts is None:
            raise InputError(
                f"the train trace has no run {run} of {wl.dataset} at batch size {batch_size}; "
                f"use one of {sorted(curves)}"
            )
        device.step(wl.steps_per_epoch(batch_size), batch_size=int(batch_size))
        if step_delay:
            time.sleep(step_delay)
        reached = [m for e, m in pts if e <= epoch + 1]
        return better(reached) if reached else start

    return train_fn
