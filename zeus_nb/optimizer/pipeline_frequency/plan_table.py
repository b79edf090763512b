"""Many frequency plans of one pipeline as rows of a clock table, evaluated all at once.

A solver yields one plan per time quantum: hundreds to thousands of them. Each row of the table
holds one plan's clocks (MHz) in the order of :func:`~zeus_nb.optimizer.pipeline_frequency.
schedule.dependencies`; :meth:`PlanTable.evaluate` runs every row on paper at once, with exactly
the arithmetic of :func:`~zeus_nb.optimizer.pipeline_frequency.schedule.evaluate` (the same
additions in the same order, per row), so each row's iteration time and energy equal what
``evaluate`` returns for its plan, bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from zeus_nb.optimizer.pipeline_frequency.profile import InstructionProfile
from zeus_nb.optimizer.pipeline_frequency.schedule import (
    FrequencyPlan,
    Op,
    dependencies,
    stage_order,
)


@dataclass
class PlanTable:
    """The instructions of a (stages, microbatches) 1F1B iteration as table columns."""

    stages: int
    microbatches: int

    def __post_init__(self) -> None:
        deps = dependencies(self.stages, self.microbatches)
        self.ops: list[Op] = list(deps)
        self.column: dict[Op, int] = {op: k for k, op in enumerate(self.ops)}
        self.predecessors: list[list[int]] = [[self.column[p] for p in deps[op]] for op in self.ops]
        self._stage_columns = [
            [(i, j, self.column[(s, i, j)]) for i, j in stage_order(s, *self._shape)]
            for s in range(self.stages)
        ]

    @property
    def _shape(self) -> tuple[int, int]:
        return self.stages, self.microbatches

    def columns_of(self, stage: int, instruction: str) -> np.ndarray:
        """The columns of one stage's forwards or backwards."""
        return np.array(
            [k for k, (s, i, _) in enumerate(self.ops) if s == stage and i == instruction], int
        )

    def row(self, plan: FrequencyPlan) -> np.ndarray:
        clocks = np.empty(len(self.ops), np.int64)
        for s, stage in enumerate(plan.stages):
            for i, j, f in stage:
                clocks[self.column[(s, i, j)]] = f
        return clocks

    def plan(self, row: np.ndarray) -> FrequencyPlan:
        clocks = row.tolist()
        return FrequencyPlan(
            tuple(tuple((i, j, clocks[k]) for i, j, k in cols) for cols in self._stage_columns)
        )

    def _lookup(self, profile: InstructionProfile, clocks: np.ndarray):
        """Per-row time and energy of every instruction (columns first)."""
        times = np.empty(clocks.shape[::-1])
        energies = np.empty(clocks.shape[::-1])
        for s in range(self.stages):
            for inst in ("forward", "backward"):
                ms = sorted(profile.measurements[(s, inst)], key=lambda m: m.frequency)
                freqs = np.array([m.frequency for m in ms])
                cols = self.columns_of(s, inst)
                f = clocks[:, cols].T
                k = np.clip(np.searchsorted(freqs, f), 0, len(freqs) - 1)
                if not np.array_equal(freqs[k], f):
                    bad = f[freqs[k] != f][0]
                    raise KeyError(f"stage {s} {inst} was not profiled at {bad} MHz")
                times[cols] = np.array([m.time for m in ms])[k]
                energies[cols] = np.array([m.energy for m in ms])[k]
        return times, energies

    def evaluate(self, profile: InstructionProfile, clocks: np.ndarray):
        """Iteration time and energy (arrays, one per row) of the plans in ``clocks``."""
        profile.check_stages(self.stages)
        times, energies = self._lookup(profile, np.atleast_2d(clocks))
        rows = times.shape[1]
        end = np.empty_like(times)
        busy = np.zeros((self.stages, rows))
        energy = np.zeros(rows)
        for k, (s, _, _) in enumerate(self.ops):
            preds = self.predecessors[k]
            if not preds:
                start = np.zeros(rows)
            else:
                start = end[preds[0]]
                for p in preds[1:]:
                    start = np.maximum(start, end[p])
            end[k] = start + times[k]
            busy[s] += times[k]
            energy += energies[k]
        total = end.max(axis=0)
        power = profile.blocking_power
        blocking = power[0] * (total - busy[0])
        for s in range(1, self.stages):
            blocking = blocking + power[s] * (total - busy[s])
        return total, energy + blocking


def pareto_rows(times: np.ndarray, energies: np.ndarray) -> list[int]:
    """Rows where a longer iteration buys strictly less energy, fastest first.

    Ties in (time, energy) keep the earliest row, as a stable sort of the rows would.
    """
    kept: list[int] = []
    for k in np.lexsort((energies, times)).tolist():
        if not kept or (times[k] > times[kept[-1]] and energies[k] < energies[kept[-1]]):
            kept.append(k)
    return kept
