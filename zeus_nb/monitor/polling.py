"""Period-by-period accounting behind ``CarbonEmissionMonitor`` and ``EnergyCostMonitor``.

A carbon intensity or an electricity price holds for one provider period (an hour), so a window's
energy is measured period by period and each period's energy is converted at that period's
value, as Zeus does. A :class:`WindowLedger` keeps, for every open window, the energy of each
period (with the first and last moment measured in it) and the converted totals so far; a
span of energy measured across a period boundary is split between the periods in proportion to
time.

Two drivers feed a ledger. On real time, :func:`serve` is Zeus's polling loop: a thread takes
``(Op.BEGIN, key)`` and ``(Op.END, key)`` messages, closes every open window's period when the
clock reaches the next boundary, and answers each END with the window's converted energy
``(gpu, cpu, dram)`` (dicts by index) on the ``finished`` queue. On a simulated GPU's virtual
clock, time moves only when training steps run, so :class:`PollingMonitor` calls the ledger
directly at ``begin_window`` and ``end_window`` with the system's own time instead.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from enum import Enum
from typing import Any

from zeus_nb.errors import IntensityProviderError, WindowError
from zeus_nb.monitor.providers import J_PER_KWH
from zeus_nb.utils.multiprocessing import warn_if_global_in_subprocess

log = logging.getLogger(__name__)

KINDS = ("gpu", "cpu", "dram")
ONE_HOUR = timedelta(hours=1)


class Op(Enum):
    """Messages to the polling loop; NEXTITER moves it to the next period at once (for tests)."""

    BEGIN = 0
    END = 1
    NEXTITER = 2


@dataclass
class Period:
    """One window's energy within one provider period (``start``), measured from t0 to t1."""

    start: datetime
    t0: datetime
    t1: datetime
    energy: dict[tuple[str, int], float] = field(default_factory=lambda: defaultdict(float))


#: Called when a window's periods are converted; returns the value per kWh of a period.
Factors = Callable[[], Callable[[Period], float]]


def period_start(t: datetime, period: timedelta) -> datetime:
    """The start of the period holding ``t`` (periods are counted from the Unix epoch)."""
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    if period == ONE_HOUR:
        return t.replace(minute=0, second=0, microsecond=0)
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    return epoch + ((t - epoch) // period) * period


def value_for(table: dict[datetime, float], start: datetime, error: type[Exception], what: str):
    """The value of a provider's table for the period at ``start``: its own entry, else the
    latest earlier one, else the earliest."""
    if start in table:
        return table[start]
    if not table:
        raise error(f"the provider gave no {what} values at all (for the period at {start})")
    earlier = [t for t in table if t <= start]
    return table[max(earlier)] if earlier else table[min(table)]


def _energies(measurement: Any) -> dict[tuple[str, int], float]:
    out: dict[tuple[str, int], float] = {}
    for kind in KINDS:
        for index, joules in (getattr(measurement, f"{kind}_energy", None) or {}).items():
            out[(kind, index)] = joules
    return out


class WindowLedger:
    """The energy of open windows, period by period, and their converted totals.

    ``monitor`` is a ZeusMonitor of its own (its windows carry the same names); ``factors``
    turns periods into values per kWh; ``refresh_every`` periods, open windows are converted so
    far (a provider that remembers only its last ``history_length`` periods is asked in time).
    """

    def __init__(
        self,
        monitor: Any,
        period: timedelta,
        factors: Factors,
        refresh_every: int | None = None,
    ) -> None:
        self.monitor = monitor
        self.period = period
        self.factors = factors
        self.refresh_every = refresh_every
        self._since: dict[str, datetime | None] = {}  # open window -> start of its running span
        self._periods: dict[str, dict[datetime, Period]] = {}
        self._totals: dict[str, dict[tuple[str, int], float]] = {}
        self._measured: dict[str, dict[tuple[str, int], float]] = {}
        #: Energy (J) each finished window measured here, by (kind, index), until taken.
        self.measured: dict[str, dict[tuple[str, int], float]] = {}

    @property
    def keys(self) -> list[str]:
        """The open windows."""
        return list(self._since)

    def begin(self, key: str, t: datetime) -> None:
        self.monitor.begin_window(key, sync_execution=False)
        self._since[key] = t
        self._periods[key] = {}
        self._totals[key] = defaultdict(float)
        self._measured[key] = defaultdict(float)

    def resume(self, key: str, t: datetime) -> None:
        """Start measuring ``key`` again after :meth:`cut` (a new period began)."""
        self.monitor.begin_window(key, sync_execution=False)
        self._since[key] = t

    def cut(self, key: str, t: datetime) -> None:
        """Record ``key``'s energy since its span began, up to ``t``."""
        since = self._since[key]
        if since is None:  # already cut at this boundary
            return
        measurement = self.monitor.end_window(key, sync_execution=False)
        self._since[key] = None
        self._add(key, since, t, _energies(measurement))

    def _add(self, key: str, t0: datetime, t1: datetime, energy: dict) -> None:
        for part, joules in energy.items():
            self._measured[key][part] += joules
        periods = self._periods[key]
        for start, a, b, share in self._split(t0, t1):
            p = periods.setdefault(start, Period(start, a, b))
            p.t0, p.t1 = min(p.t0, a), max(p.t1, b)
            for part, joules in energy.items():
                p.energy[part] += joules * share

    def _split(self, t0: datetime, t1: datetime):
        """(period start, from, to, share of the span) for each period the span touches."""
        start = period_start(t0, self.period)
        if t1 <= t0 or t1 <= start + self.period:
            return [(start, t0, max(t0, t1), 1.0)]
        total = (t1 - t0).total_seconds()
        parts, a = [], t0
        while a < t1:
            b = min(start + self.period, t1)
            parts.append((start, a, b, (b - a).total_seconds() / total))
            start, a = start + self.period, b
        return parts

    def convert(self, key: str) -> None:
        """Convert ``key``'s recorded periods at the provider's values (asked now)."""
        periods = self._periods.get(key)
        if not periods:
            return
        value = self.factors()
        totals = self._totals[key]
        for p in periods.values():
            factor = value(p)
            for part, joules in p.energy.items():
                totals[part] += joules / J_PER_KWH * factor
        periods.clear()

    def finish(self, key: str, t: datetime) -> tuple[dict[int, float], ...]:
        """End ``key`` at ``t``: its converted energy as (gpu, cpu, dram) dicts by index."""
        self.cut(key, t)
        self.convert(key)
        del self._since[key], self._periods[key]
        self.measured[key] = dict(self._measured.pop(key))
        totals = self._totals.pop(key)
        return tuple({i: v for (kind, i), v in totals.items() if kind == k} for k in KINDS)


def serve(
    command_q: Any,
    finished_q: Any,
    make_ledger: Callable[[], WindowLedger],
    now: Callable[[], datetime],
) -> None:
    """Zeus's polling loop over a ledger, until the last open window ends.

    ``now`` is read at each period's start and after each message but the last; a failure is
    put on ``finished_q`` for the waiting ``end_window`` to raise, and ends the loop.
    """
    try:
        ledger = make_ledger()
        periods = converted_at = 0
        while True:
            t = now()
            start = period_start(t, ledger.period)
            end = start + ledger.period
            for key in ledger.keys:
                ledger.resume(key, t)
            try:
                while t < end:
                    op, key = command_q.get(timeout=(end - t).total_seconds())
                    if op == Op.BEGIN:
                        ledger.begin(key, t)
                    elif op == Op.END:
                        finished_q.put(ledger.finish(key, t))
                        if not ledger.keys:
                            return
                    elif op == Op.NEXTITER:
                        break
                    t = now()
            except queue.Empty:
                pass
            periods += 1
            for key in ledger.keys:
                ledger.cut(key, end)
            if ledger.refresh_every and periods - converted_at == ledger.refresh_every:
                for key in ledger.keys:
                    ledger.convert(key)
                converted_at = periods
    except Exception as e:  # noqa: BLE001 (any failure goes to the waiting end_window)
        log.debug("polling loop stopped: %s", e)
        finished_q.put(e)


def _rescale(kind: str, converted: dict, measured: dict, window: dict | None) -> dict:
    """Converted energy of the window as this monitor measured it: the polling loop's own
    windows begin and end a thread hand-off apart, so they decide only how the window's energy
    is spread over the periods."""
    out = {}
    for index, value in converted.items():
        got, want = measured.get((kind, index), 0.0), (window or {}).get(index)
        out[index] = value * want / got if got > 0 and want is not None else value
    return out


class PollingMonitor:
    """Windows over a ZeusMonitor whose energy is also converted period by period.

    Subclasses name the polling function (their module's ``_polling_process``), build a ledger
    for the virtual clock (:meth:`_ledger`) and a measurement (:meth:`_measurement`).
    """

    _what = "window"

    def __init__(self, provider: Any, zeus_monitor: Any) -> None:
        warn_if_global_in_subprocess(self)
        self.provider = provider
        self.zeus_monitor = zeus_monitor
        self.gpu_indices = zeus_monitor.gpu_indices
        self.cpu_indices = zeus_monitor.cpu_indices
        self.current_keys: set[str] = set()
        self.command_q: queue.Queue = queue.Queue()
        self.finished_q: queue.Queue = queue.Queue()
        self.polling_process: threading.Thread | None = None
        system = getattr(zeus_monitor, "system", None)
        self._monitor_args = {"system": system} if system is not None else {}
        self._clock: Callable[[], datetime] | None = None
        self._direct: WindowLedger | None = None
        self._polled: WindowLedger | None = None  # the polling thread's, once it made one
        if getattr(system, "virtual_clock", False):
            self._clock = lambda: datetime.fromtimestamp(system.wall_time(), timezone.utc)

    # --- what subclasses provide --------------------------------------------------------------
    def _poll(self, command_q, finished_q, gpu_indices, cpu_indices, provider, **kw) -> None:
        """Run the module's polling loop (on this monitor's thread)."""
        raise NotImplementedError

    def _ledger(self) -> WindowLedger:
        raise NotImplementedError

    def _measurement(self, m: Any, gpu: dict, cpu: dict, dram: dict) -> Any:
        raise NotImplementedError

    # --- windows --------------------------------------------------------------------------------
    def begin_window(self, key: str, sync_execution: bool = True) -> None:
        """Begin window ``key`` (names may nest and overlap, as in ZeusMonitor)."""
        if key in self.current_keys:
            raise WindowError(f"{type(self).__name__} window {key!r} is already open; end it first")
        self.zeus_monitor.begin_window(key, sync_execution=sync_execution)
        self.current_keys.add(key)
        if self._clock is not None:
            if self._direct is None:
                self._direct = self._ledger()
            self._direct.begin(key, self._clock())
            return
        if self.polling_process is None or not self.polling_process.is_alive():
            self.command_q, self.finished_q = queue.Queue(), queue.Queue()
            self.polling_process = threading.Thread(
                target=self._poll,
                args=(
                    self.command_q,
                    self.finished_q,
                    self.gpu_indices,
                    self.cpu_indices,
                    self.provider,
                ),
                kwargs={"monitor_args": self._monitor_args, "ledger_ready": self._use},
                daemon=True,
                name=f"zeus-nb-{type(self).__name__}",
            )
            self.polling_process.start()
        self.command_q.put((Op.BEGIN, key))

    def end_window(self, key: str, sync_execution: bool = True) -> Any:
        """End window ``key``: its time, energy and converted energy."""
        if key not in self.current_keys:
            opened = ", ".join(repr(k) for k in sorted(self.current_keys)) or "none"
            raise WindowError(
                f"{type(self).__name__} window {key!r} was never begun (open windows: {opened}); "
                "call begin_window first"
            )
        self.current_keys.discard(key)
        try:
            if self._direct is not None:
                ledger = self._direct
                converted = ledger.finish(key, self._clock())  # type: ignore[misc]
            else:
                self.command_q.put((Op.END, key))
                converted = self._answer()
                ledger = self._polled
        finally:
            m = self.zeus_monitor.end_window(key, sync_execution=sync_execution)
            if not self.current_keys and self.polling_process is not None:
                self.polling_process.join(timeout=5.0)
        measured = ledger.measured.pop(key, {}) if ledger is not None else {}
        parts = [
            _rescale(kind, values, measured, getattr(m, f"{kind}_energy", None))
            for kind, values in zip(KINDS, converted, strict=True)
        ]
        return self._measurement(m, *parts)

    def _use(self, ledger: WindowLedger) -> None:
        self._polled = ledger

    def _answer(self) -> tuple:
        """The polling thread's answer to an END, or its failure raised here."""
        while True:
            try:
                item = self.finished_q.get(timeout=0.5)
            except queue.Empty:
                thread = self.polling_process
                if thread is not None and thread.is_alive():
                    continue
                try:
                    item = self.finished_q.get_nowait()
                except queue.Empty:
                    raise IntensityProviderError(
                        f"the {type(self).__name__} polling thread stopped without an answer; "
                        "see the log for why"
                    ) from None
            if isinstance(item, BaseException):
                raise item
            return item
