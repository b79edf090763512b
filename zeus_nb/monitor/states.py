"""An open measurement window's start (Zeus's ``MeasurementState``) and the view of all of them.

A monitor keeps the start of its usual window (one GPU read as Zeus reads it, no CPUs) as a bare
``(time, mJ)`` pair, which costs nothing to make; :class:`StatesView` is the monitor's
``measurement_states`` and hands each start out as a :class:`MeasurementState` in J, as Zeus's
monitor does.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from zeus_nb.device.counter import Mark


@dataclass(slots=True)
class MeasurementState:
    """An open window's start: its time and each GPU's (and CPU's) energy then, in J."""

    time: float
    gpu_energy: dict[int, float]
    cpu_energy: dict[int, float] | None = None
    dram_energy: dict[int, float] | None = None
    marks: dict[int, Mark] | None = field(default=None, repr=False)

    @property
    def total_energy(self) -> float:
        return sum(self.gpu_energy.values())


class StatesView(MutableMapping):
    """Window name -> :class:`MeasurementState`, over a monitor's own records of them."""

    def __init__(self, states: dict, gpu_index: int | None) -> None:
        self._states = states
        self._gpu = gpu_index

    @staticmethod
    def state(record, gpu_index: int | None) -> MeasurementState:
        if type(record) is tuple:  # (time, mJ) of the monitor's one GPU
            return MeasurementState(record[0], {gpu_index: record[1] / 1000.0})
        return record

    def __getitem__(self, key: str) -> MeasurementState:
        return self.state(self._states[key], self._gpu)

    def __setitem__(self, key: str, value: MeasurementState) -> None:
        self._states[key] = value

    def __delitem__(self, key: str) -> None:
        del self._states[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._states)

    def __len__(self) -> int:
        return len(self._states)

    def __contains__(self, key: object) -> bool:
        return key in self._states


def cpu_delta(start: MeasurementState, end: MeasurementState) -> tuple[dict | None, dict | None]:
    """(CPU package J, DRAM J) between two states, None where not measured."""
    cpu = dram = None
    if start.cpu_energy is not None and end.cpu_energy is not None:
        cpu = {i: end.cpu_energy[i] - start.cpu_energy[i] for i in start.cpu_energy}
    if start.dram_energy is not None and end.dram_energy is not None:
        dram = {i: end.dram_energy[i] - start.dram_energy[i] for i in start.dram_energy}
    return cpu, dram
