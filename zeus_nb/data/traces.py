"""Load the Zeus NSDI '23 traces (shipped as package data) and user traces of the same schema.

The power trace gives, per (dataset, network, batch size, optimizer, power limit), the time of one
epoch and the average power. The train trace gives the epoch at which each training run first
reached each target metric. Both are real measurements; the simulator and the tradeoff analysis
only ever read numbers from them.
"""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from zeus_nb.data.workloads import (  # noqa: F401 (re-exported)
    WORKLOADS,
    Workload,
    get_workload,
    name_key,
    name_keys,
)
from zeus_nb.errors import InputError, MissingInputError, TraceFormatError, TraceNotFoundError
from zeus_nb.inputs import read_table, read_text, reader
from zeus_nb.inputs.kinds import POWER_TRACE, TRAIN_TRACE

if TYPE_CHECKING:
    import pandas as pd

POWER_COLUMNS = (
    "dataset",
    "network",
    "batch_size",
    "optimizer",
    "power_limit",
    "time_per_epoch",
    "average_power",
)
TRAIN_COLUMNS = (
    "dataset",
    "network",
    "batch_size",
    "optimizer",
    "learning_rate",
    "run",
    "target_metric",
    "target_epoch",
)
BUNDLED_GPUS = ("v100", "a40")
GPU_NAMES = {"v100": "NVIDIA Tesla V100", "a40": "NVIDIA A40"}


def resource_path(*parts: str) -> Path:
    """Path of a file shipped in ``zeus_nb/resources``."""
    return Path(str(resources.files("zeus_nb").joinpath("resources", *parts)))


def _frame(table, columns: tuple[str, ...]) -> pd.DataFrame:
    """The checked rows of a trace as a DataFrame of ``columns`` (NaN for an empty cell)."""
    import pandas as pd

    data = {c: [r.get(c) for r in table.rows] for c in columns}
    df = pd.DataFrame(data)
    for c in columns:
        if c not in ("dataset", "network", "optimizer"):
            df[c] = pd.to_numeric(df[c], errors="coerce").astype(float)
    return df


def _read(source, schema, bundled: Path | None = None):
    """A trace file (or DataFrame) through its declared schema: one boundary for every trace."""
    if _is_frame(source):
        # A DataFrame a user built passes the same checks as a file of the same table.
        name = f"{schema.name} (DataFrame)"
        return read_table(name, schema, text=source.to_csv(index=False))
    if bundled is not None:
        return read_table(bundled.name, schema, text=read_text(bundled, schema.name))
    try:
        return read_table(source, schema)
    except MissingInputError:
        shipped = ", ".join(BUNDLED_GPUS)
        text = str(source)
        if schema is POWER_TRACE and "/" not in text and "\\" not in text and "." not in text:
            raise TraceNotFoundError(
                f"unknown GPU {text!r}: zeus-nb ships the power traces of {shipped}; give one "
                "of those, or the path of a power-trace CSV (docs/traces.md)"
            ) from None
        also = f" (or a shipped GPU: {shipped})" if schema is POWER_TRACE else ""
        raise TraceNotFoundError(
            f"{source}: no such file; give the path of an existing CSV trace{also}"
        ) from None


def _stamp(source: str) -> tuple[int, int] | None:
    """A file's (mtime, size), so an edited trace is read again rather than served stale."""
    try:
        st = Path(source).stat()
    except (OSError, ValueError):
        return None
    return (st.st_mtime_ns, st.st_size)


def _checked_power_trace(table, source: str) -> pd.DataFrame:
    """A checked power trace as a DataFrame (int batch sizes, lower-case optimizers, no repeats)."""
    df = _frame(table, POWER_COLUMNS)
    df["batch_size"] = df["batch_size"].astype(int)
    _normalize_names(df)
    dup = df.duplicated(["dataset", "network", "batch_size", "optimizer", "power_limit"])
    if dup.any():
        i = int(dup.to_numpy().nonzero()[0][0])
        raise TraceFormatError(
            f"{source}, line {table.rows[i].line}: repeats an earlier "
            "(dataset, network, batch_size, optimizer, power_limit)"
        )
    return df.reset_index(drop=True)


@functools.lru_cache(maxsize=16)
def _load_power_trace_cached(source: str, stamp: tuple[int, int] | None = None) -> pd.DataFrame:
    bundled = source.lower() in BUNDLED_GPUS
    path = resource_path("zeus_traces", f"summary_power_{source.lower()}.csv") if bundled else None
    return _checked_power_trace(_read(source, POWER_TRACE, path), source)


@reader(POWER_TRACE)
def load_power_trace(gpu: str | Path | pd.DataFrame = "v100") -> pd.DataFrame:
    """Power trace of a bundled GPU (``"v100"``, ``"a40"``), of a CSV file of the same schema,
    or an already read DataFrame of that schema (validated the same way).

    Read through :data:`zeus_nb.inputs.kinds.POWER_TRACE`. Returns a fresh copy, so callers may
    modify it.
    """
    if _is_frame(gpu):
        return _checked_power_trace(_read(gpu, POWER_TRACE), "power trace (DataFrame)")
    source = str(gpu)
    stamp = None if source.lower() in BUNDLED_GPUS else _stamp(source)
    return _load_power_trace_cached(source, stamp).copy()


@functools.lru_cache(maxsize=4)
def _load_train_trace_cached(source: str, stamp: tuple[int, int] | None = None) -> pd.DataFrame:
    bundled = resource_path("zeus_traces", "summary_train.csv") if source == "" else None
    return _checked_train_trace(_read(source, TRAIN_TRACE, bundled))


def _checked_train_trace(table) -> pd.DataFrame:
    df = _frame(table, TRAIN_COLUMNS)
    df["batch_size"] = df["batch_size"].astype(int)
    df["run"] = df["run"].astype(int)
    _normalize_names(df)
    return df.reset_index(drop=True)


def _normalize_names(df: pd.DataFrame) -> None:
    """Dataset, network and optimizer names as :func:`name_key` compares them, in place."""
    for column in ("dataset", "network", "optimizer"):
        df[column] = name_keys(df[column])


@reader(TRAIN_TRACE)
def load_train_trace(path: str | Path | pd.DataFrame | None = None) -> pd.DataFrame:
    """The bundled train trace, a CSV file of the same schema, or an already read DataFrame of
    that schema (through :data:`zeus_nb.inputs.kinds.TRAIN_TRACE`). ``target_epoch`` NaN: never."""
    if _is_frame(path):
        return _checked_train_trace(_read(path, TRAIN_TRACE))
    source = "" if path is None else str(path)
    return _load_train_trace_cached(source, _stamp(source) if source else None).copy()


def _is_frame(obj: object) -> bool:
    import pandas as pd

    return isinstance(obj, pd.DataFrame)


def power_curves(
    trace: pd.DataFrame, dataset: str, network: str | None = None, optimizer: str | None = None
) -> pd.DataFrame:
    """Rows of one workload, sorted by (batch size, power limit).

    ``network`` and ``optimizer`` default to the paper's choice when the dataset is a known workload
    and the trace has it; otherwise the dataset must identify a single (network, optimizer).
    """
    dataset = name_key(dataset)
    network = None if network is None else name_key(network)
    rows = trace[name_keys(trace["dataset"]) == dataset]
    if rows.empty:
        known = ", ".join(sorted(trace["dataset"].unique()))
        raise InputError(f"the power trace has no dataset {dataset!r}; it has: {known}")
    wl = WORKLOADS.get(dataset)
    if network is None:
        nets = rows["network"].unique()
        network = wl.network if wl and wl.network in nets else nets[0]
    if optimizer is None:
        opts = rows[rows["network"] == network]["optimizer"].unique()
        optimizer = wl.optimizer if wl and wl.optimizer in opts else opts[0]
    names = name_keys(rows["network"]), name_keys(rows["optimizer"])
    rows = rows[(names[0] == network) & (names[1] == name_key(optimizer))]
    if rows.empty:
        raise InputError(f"the power trace has no rows for {dataset}/{network}/{optimizer}")
    return rows.sort_values(["batch_size", "power_limit"]).reset_index(drop=True)


def default_batch_size(workload: str | Workload, power_trace: pd.DataFrame) -> int:
    """The workload's default batch size b0, clipped to the batch sizes the power trace has.

    A b0 larger than every traced batch size (DeepSpeech2's 256 on the V100, whose trace stops at
    192) becomes the largest traced one; a b0 between traced sizes becomes the next smaller one.
    """
    wl = workload if isinstance(workload, Workload) else get_workload(workload)
    sizes = sorted(int(b) for b in power_curves(power_trace, wl.dataset)["batch_size"].unique())
    smaller = [b for b in sizes if b <= wl.default_batch_size]
    return smaller[-1] if smaller else sizes[0]


def _metric_rows(train: pd.DataFrame, wl: Workload, target: float) -> pd.DataFrame:
    rows = train[
        (name_keys(train["dataset"]) == name_key(wl.dataset))
        & (name_keys(train["network"]) == name_key(wl.network))
        & (name_keys(train["optimizer"]) == name_key(wl.optimizer))
    ]
    if rows.empty:
        have = sorted(
            {
                f"{d}/{n}/{o}"
                for d, n, o in train[["dataset", "network", "optimizer"]]
                .map(name_key)
                .itertuples(index=False)
            }
        )
        raise InputError(
            f"the train trace has no runs of {wl.dataset}/{wl.network}/{wl.optimizer}; "
            f"it has: {', '.join(have)}"
        )
    hit = rows[(rows["target_metric"] - target).abs() <= 1e-9 * max(1.0, abs(target))]
    if hit.empty:
        have = ", ".join(f"{m:g}" for m in sorted(rows["target_metric"].unique()))
        raise InputError(
            f"the train trace records no target metric {target:g} for {wl.dataset}; "
            f"choose one of: {have}"
        )
    return hit


def target_epochs(
    workload: str | Workload,
    train_trace: pd.DataFrame | None = None,
    target_metric: float | None = None,
    max_epochs: int | None = None,
    *,
    file_order: bool = False,
) -> pd.DataFrame:
    """Epoch at which each recorded run first reached the target, per (batch size, run).

    Columns: batch_size, run, target_epoch (NaN: never), reached. A run that reached the target
    only after ``max_epochs`` (default: the workload's) counts as not reached, as a training job
    capped at ``max_epochs`` would have stopped first. Rows are sorted by (batch size, run), or
    with ``file_order`` kept in the trace's own order (run 10 after run 1 there), the order the
    simulators draw recorded runs from, as Zeus's simulator does.
    """
    wl = workload if isinstance(workload, Workload) else get_workload(workload)
    train = load_train_trace() if train_trace is None else train_trace
    target = wl.target_metric if target_metric is None else float(target_metric)
    cap = wl.max_epochs if max_epochs is None else int(max_epochs)
    rows = _metric_rows(train, wl, target)
    out = rows[["batch_size", "run", "target_epoch"]].copy()
    out["reached"] = out["target_epoch"].notna() & (out["target_epoch"] <= cap)
    out.loc[~out["reached"], "target_epoch"] = float("nan")
    if not file_order:
        out = out.sort_values(["batch_size", "run"])
    return out.reset_index(drop=True)


def tta_eta(
    workload: str | Workload,
    gpu: str | Path | pd.DataFrame = "v100",
    *,
    per_run: bool = False,
    train_trace: pd.DataFrame | None = None,
    target_metric: float | None = None,
    max_epochs: int | None = None,
) -> pd.DataFrame:
    """Time- and energy-to-accuracy of every traced (batch size, power limit) of a workload.

    TTA = target_epoch x time_per_epoch (s) and ETA = TTA x average_power (J), from the power
    trace of ``gpu`` (a bundled name, a CSV path or an already loaded trace) and the train trace.

    ``per_run=True``: one row per (batch size, power limit, run), with ``reached`` per run.
    Otherwise one row per (batch size, power limit): ``runs`` recorded, ``runs_reached``, and
    ``reached`` (every run reached the target). ``epochs``, ``tta`` and ``eta`` are the means over
    runs, and NaN unless every run reached the target: a configuration that sometimes fails is
    reported as failing rather than averaged over its lucky runs only. Only batch sizes present in
    both traces appear.
    """
    import pandas as pd

    wl = workload if isinstance(workload, Workload) else get_workload(workload)
    power = gpu if isinstance(gpu, pd.DataFrame) else load_power_trace(gpu)
    curves = power_curves(power, wl.dataset, wl.network, wl.optimizer)
    curves = curves[["batch_size", "power_limit", "time_per_epoch", "average_power"]]
    runs = target_epochs(wl, train_trace, target_metric, max_epochs)
    if per_run:
        df = curves.merge(runs, on="batch_size", how="inner")
        df["tta"] = df["target_epoch"] * df["time_per_epoch"]
        df["eta"] = df["tta"] * df["average_power"]
        return df.sort_values(["batch_size", "power_limit", "run"]).reset_index(drop=True)
    grouped = runs.groupby("batch_size")
    per_bs = pd.DataFrame(
        {
            "runs": grouped["run"].count(),
            "runs_reached": grouped["reached"].sum().astype(int),
            "epochs": grouped["target_epoch"].mean(),
        }
    ).reset_index()
    per_bs["reached"] = per_bs["runs_reached"] == per_bs["runs"]
    per_bs.loc[~per_bs["reached"], "epochs"] = float("nan")
    df = curves.merge(per_bs, on="batch_size", how="inner")
    df["tta"] = df["epochs"] * df["time_per_epoch"]
    df["eta"] = df["tta"] * df["average_power"]
    return df.sort_values(["batch_size", "power_limit"]).reset_index(drop=True)
