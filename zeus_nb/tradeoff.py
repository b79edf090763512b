"""The energy-time tradeoff: the Zeus cost, the Pareto front, and the potential savings.

Cost = eta x Energy + (1 - eta) x MaxPower x Time (:func:`zeus_nb.utils.metric.zeus_cost`, which
every optimizer minimizes). ``eta`` = 1 minds energy only, 0 time only. The Pareto front shows
which (batch size, power limit) choices are worth making at all, and the potential-savings table
how much energy they save over the usual defaults.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from zeus_nb.data.traces import (
    WORKLOADS,
    default_batch_size,
    get_workload,
    load_power_trace,
    tta_eta,
)
from zeus_nb.data.workloads import name_keys
from zeus_nb.errors import InputError
from zeus_nb.utils.metric import check_eta, zeus_cost

__all__ = ["check_eta", "min_cost", "pareto_front", "potential_savings", "zeus_cost"]

if TYPE_CHECKING:
    import pandas as pd


def pareto_front(data: pd.DataFrame, time: str = "tta", energy: str = "eta") -> pd.DataFrame:
    """Rows of ``data`` that no other row beats in both time and energy, fastest first.

    A row is on the front when every faster row uses more energy. Rows with NaN time or energy
    (configurations that did not reach the target) are ignored. Of exact duplicates the first
    row in ``data`` is kept.
    """
    for col in (time, energy):
        if col not in data.columns:
            raise InputError(
                f"no column {col!r}; the data has: {', '.join(map(str, data.columns))}"
            )
    ok = data.dropna(subset=[time, energy])
    ordered = ok.sort_values([time, energy], kind="stable")
    keep, best = [], float("inf")
    for idx, e in zip(ordered.index, ordered[energy], strict=True):
        if e < best:
            keep.append(idx)
            best = e
    return ordered.loc[keep].reset_index(drop=True)


def min_cost(
    data: pd.DataFrame,
    eta_knob: float = 1.0,
    max_power: float | None = None,
    time: str = "tta",
    energy: str = "eta",
) -> pd.Series:
    """The row with the least Zeus cost (eta_knob = 1: least energy).

    ``max_power`` defaults to the largest ``power_limit`` in ``data``.
    """
    ok = data.dropna(subset=[time, energy])
    if ok.empty:
        raise InputError("no configuration reached the target; nothing to choose from")
    mp = float(ok["power_limit"].max()) if max_power is None else float(max_power)
    cost = [zeus_cost(e, t, eta_knob, mp) for t, e in zip(ok[time], ok[energy], strict=True)]
    return ok.iloc[min(range(len(cost)), key=cost.__getitem__)]


SAVINGS_COLUMNS = (
    "workload",
    "network",
    "default_batch_size",
    "max_power_limit",
    "baseline_eta",
    "best_batch_size",
    "best_batch_size_ratio",
    "best_power_limit",
    "best_power_limit_ratio",
    "optimal_batch_size",
    "optimal_power_limit",
    "best_both_ratio",
)


def potential_savings(
    gpu: str | Path | pd.DataFrame = "v100",
    workloads: list[str] | None = None,
    train_trace: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """How much energy choosing the batch size, the power limit, or both could save.

    Per workload, the mean ETA of (a) the best batch size at the highest power limit, (b) the best
    power limit at the default batch size b0, and (c) the best (batch size, power limit), each
    divided by the ETA of b0 at the highest limit. Only configurations where every run reached the
    target count. ``workloads`` defaults to every known workload the power trace has.
    """
    import pandas as pd

    power = gpu if isinstance(gpu, pd.DataFrame) else load_power_trace(gpu)
    if workloads is None:
        present = set(name_keys(power["dataset"]))
        workloads = [w for w in WORKLOADS if w in present]
        if not workloads:
            raise InputError(
                "the power trace has none of the traced workloads "
                f"({', '.join(WORKLOADS)}); name the datasets it has in the dataset column"
            )
    rows = []
    for name in workloads:
        wl_dataset = get_workload(name).dataset
        table = tta_eta(wl_dataset, power, train_trace=train_trace)
        b0 = default_batch_size(name, power)
        top = float(table["power_limit"].max())
        base = table[(table["batch_size"] == b0) & (table["power_limit"] == top)]
        if base.empty or not bool(base["reached"].iloc[0]):
            raise InputError(
                f"{wl_dataset}: the default configuration (batch size {b0}, {top:g} W) has no ETA "
                "(not traced, or some run never reached the target); no baseline to compare with"
            )
        base_eta = float(base["eta"].iloc[0])
        ok = table.dropna(subset=["eta"])
        at_top = ok[ok["power_limit"] == top].sort_values("eta", kind="stable").iloc[0]
        at_b0 = ok[ok["batch_size"] == b0].sort_values("eta", kind="stable").iloc[0]
        both = ok.sort_values("eta", kind="stable").iloc[0]
        rows.append(
            {
                "workload": wl_dataset,
                "network": WORKLOADS[wl_dataset].network,
                "default_batch_size": b0,
                "max_power_limit": top,
                "baseline_eta": base_eta,
                "best_batch_size": int(at_top["batch_size"]),
                "best_batch_size_ratio": float(at_top["eta"]) / base_eta,
                "best_power_limit": float(at_b0["power_limit"]),
                "best_power_limit_ratio": float(at_b0["eta"]) / base_eta,
                "optimal_batch_size": int(both["batch_size"]),
                "optimal_power_limit": float(both["power_limit"]),
                "best_both_ratio": float(both["eta"]) / base_eta,
            }
        )
    return pd.DataFrame(rows, columns=list(SAVINGS_COLUMNS))
