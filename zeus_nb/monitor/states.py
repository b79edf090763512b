"""A window's measurement (Zeus's ``Measurement``), an open window's start (Zeus's
``MeasurementState``) and the view of all of them. ``zeus_nb.monitor.energy`` exports both.

Every open window's start is a :class:`MeasurementState` (J); :class:`StatesView` is the
monitor's ``measurement_states``, a live view of them, as Zeus's monitor has.

Window edges are the monitor's hot path (a pair around each training step): ``begin_window``
fills a :class:`MeasurementState` slot by slot, and so does ``end_window`` its
:class:`Measurement` where counters are read as Zeus reads them, without the Python frame of the
generated ``__init__`` (1.1k of a pair's 30.2k instructions on a microsecond counter,
``benchmarks/bench_monitor_instructions.py``). A field added here must be filled there too;
``tests/test_monitor.py`` fails while one is left unset.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from zeus_nb.device import counter_track

if TYPE_CHECKING:
    from zeus_nb.device.counter_track import Mark


@dataclass(slots=True)
class Measurement:
    """Time (s) and energy (J) of one window.

    ``gpu_energy`` maps GPU index to J. ``cpu_energy`` and ``dram_energy`` map CPU package index
    to J, and are None when CPUs (or their DRAM) were not measured; ``soc_energy`` is always None
    here (zeus-nb measures no system-on-chip). As in Zeus, ``total_energy`` is the GPUs' energy
    only: add ``cpu_energy`` and ``dram_energy`` yourself for the whole machine.
    ``energy_method`` says per GPU how its energy was obtained (see :attr:`approximate`).
    """

    time: float
    gpu_energy: dict[int, float] = field(default_factory=dict)
    cpu_energy: dict[int, float] | None = None
    dram_energy: dict[int, float] | None = None
    soc_energy: Any = None
    energy_method: Mapping[int, str] | None = field(default=None, compare=False)

    @property
    def total_energy(self) -> float:
        """Energy of the measured GPUs in J (Zeus's meaning: CPU and DRAM not included)."""
        return sum(self.gpu_energy.values())

    @property
    def average_power(self) -> float:
        """Total energy over time in W (0 for an empty window)."""
        return self.total_energy / self.time if self.time > 0 else 0.0

    @property
    def approximate(self) -> list[int]:
        """GPUs whose energy is partly a power-based estimate rather than counter steps."""
        return [i for i, how in (self.energy_method or {}).items() if how not in _EXACT]


_EXACT = (*counter_track.EXACT, "simulated counter", "replayed log")


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
    """Window name -> :class:`MeasurementState`, over a monitor's own records of them.

    A start on a GPU read in the background holds a mark, and ``begin_window`` leaves its energy
    there out (the window's own energy comes from the marks): the view puts in the estimate
    known when asked, from the monitor's ``readers``, in the monitor's GPU order.
    """

    def __init__(
        self,
        states: dict[str, MeasurementState],
        readers: Mapping[int, Any] | None = None,
        order: list[int] | None = None,
    ) -> None:
        self._states = states
        self._readers = readers or {}
        self._order = order or []

    def __getitem__(self, key: str) -> MeasurementState:
        state = self._states[key]
        energy, marks = state.gpu_energy, state.marks
        if marks and any(i not in energy for i in marks):
            for i, m in marks.items():
                if i not in energy:
                    energy[i] = self._readers[i].estimate(m)
            state.gpu_energy = {i: energy[i] for i in self._order if i in energy}
        return state

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


def mark_starts(states: dict[str, MeasurementState], index: int, reader: Any, ago: float) -> None:
    """Give the windows begun on the timed first reads a mark at their start on GPU ``index``'s
    new ``reader`` (``ago``: time.time less the reader's clock). The counter they read there
    holds the last step's value, up to a whole step (69 J at an H100's 693 W) before the window
    began; the reader resolves the mark by power back from the first step it sees."""
    for state in list(states.values()):
        if state.marks is None or index not in state.marks:
            mark = reader.mark_at(state.time - ago)
            if mark is not None:
                state.marks = {**(state.marks or {}), index: mark}
                state.gpu_energy.pop(index, None)  # the view fills in the mark's estimate


def cpu_delta(
    start: MeasurementState, cpu_end: dict | None, dram_end: dict | None
) -> tuple[dict | None, dict | None]:
    """(CPU package J, DRAM J) from ``start`` to the end's readings, None where not measured."""
    cpu = dram = None
    if start.cpu_energy is not None and cpu_end is not None:
        cpu = {i: cpu_end[i] - start.cpu_energy[i] for i in start.cpu_energy}
    if start.dram_energy is not None and dram_end is not None:
        dram = {i: dram_end[i] - start.dram_energy[i] for i in start.dram_energy}
    return cpu, dram
