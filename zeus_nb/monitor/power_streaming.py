"""Zeus's power streaming: live GPU and CPU power from one or more zeusd daemons.

:class:`PowerStreamingClient` connects to each daemon (:class:`~zeus_nb.utils.zeusd.ZeusdClient`:
discovery, token, scopes), decides what to stream from it, estimates how far the daemon's clock
is from this machine's, and keeps one background thread per stream (GPU, CPU) reading the
daemon's server-sent events (``/gpu/stream_power``, ``/cpu/stream_power``). Each event updates
one device's reading; the latest readings of every daemon are read with :meth:`get_power`, or
waited for with ``for readings in client`` / ``async for readings in client``. A dropped stream
reconnects after ``reconnect_delay_s``; a stream the daemon refuses for lack of rights (HTTP 401
or 403) is logged and not retried.

Power of the GPUs in *this* process needs no daemon: :class:`zeus_nb.monitor.PowerMonitor`
samples them (real or simulated) into a timeline.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import statistics
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from zeus_nb.utils.zeusd import ZeusdCapabilityError, ZeusdClient, ZeusdConfig, _httpx

__all__ = ["CpuPowerReading", "PowerReadings", "PowerStreamingClient"]

log = logging.getLogger(__name__)

CLOCK_SAMPLES = 5  # round trips to /time per daemon; the median offset is used
WAIT_S = 1.0  # how long an iterator waits before checking for stop()


@dataclass
class CpuPowerReading:
    """One CPU package's power and its DRAM's (None where not metered), in W."""

    cpu_w: float = 0.0
    dram_w: float | None = None


@dataclass
class PowerReadings:
    """The latest readings of one daemon: Unix time in s (this machine's clock) of the newest,
    GPU power and CPU power in W by device index."""

    timestamp_s: float = 0.0
    gpu_power_w: dict[int, float] = field(default_factory=dict)
    cpu_power_w: dict[int, CpuPowerReading] = field(default_factory=dict)

    def copy(self) -> PowerReadings:
        return PowerReadings(
            self.timestamp_s,
            dict(self.gpu_power_w),
            {i: CpuPowerReading(r.cpu_w, r.dram_w) for i, r in self.cpu_power_w.items()},
        )


def _wanted(
    asked: list[int] | None, have: list[int], allowed: bool, kind: str, scope: str, where: str
) -> bool:
    """Whether to stream ``kind`` from a daemon.

    None asks for whatever the daemon has and the token may read (else skipped with a log line);
    ``[]`` asks for nothing; a list of indices must all exist and be readable, else it raises.
    """
    if asked is not None:
        if not asked:
            return False
        missing = sorted(set(asked) - set(have))
        if missing:
            raise ValueError(
                f"{kind} indices {missing} requested for {where} but only {sorted(have)} are "
                f"available; pass {kind.lower()}_indices from those, or None for all"
            )
        if not allowed:
            raise ZeusdCapabilityError(
                f"Token for {where} lacks required scope '{scope}' (explicitly requested "
                f"{kind.lower()}_indices={asked}); use a token with that scope"
            )
        return True
    if not have:
        log.info("%s has no %ss: not streaming %s power", where, kind, kind)
    elif not allowed:
        log.info("%s: the token lacks '%s', so %s power is not streamed", where, scope, kind)
    return bool(have) and allowed


class PowerStreamingClient:
    """Stream GPU and CPU power from the zeusd daemons of ``servers``.

    Raises at once (before any thread starts) when a daemon cannot be reached
    (:class:`~zeus_nb.utils.zeusd.ZeusdConnectionError`), when indices asked for do not exist
    (ValueError) or may not be read (:class:`~zeus_nb.utils.zeusd.ZeusdCapabilityError`), or
    when two servers name the same endpoint. Call :meth:`stop` (or use it as a context manager)
    to end the streams.
    """

    def __init__(self, servers: Sequence[ZeusdConfig], reconnect_delay_s: float = 1.0) -> None:
        self._servers = list(servers)
        self._reconnect_delay = reconnect_delay_s
        endpoints = [s.endpoint for s in self._servers]
        repeated = sorted({e for e in endpoints if endpoints.count(e) > 1})
        if repeated:
            raise ValueError(f"Duplicate server endpoints: {repeated}; list each daemon once")
        self._lock = threading.Lock()
        self._condition = threading.Condition(self._lock)
        self._readings: dict[str, PowerReadings] = {}
        self._clock_offsets: dict[str, float] = {}
        self._daemon_clients: dict[str, ZeusdClient] = {}
        self._threads: list[threading.Thread] = []
        self._stop_event = threading.Event()
        self._responses: set[Any] = set()

        try:
            plans = [(server, *self._plan(server)) for server in self._servers]
        except BaseException:
            for client in self._daemon_clients.values():
                client.close()
            raise
        for server, gpu, cpu in plans:
            where = server.endpoint
            self._clock_offsets[where] = self._estimate_clock_offset(where)
            for kind, wanted, ids in (
                ("gpu", gpu, server.gpu_indices),
                ("cpu", cpu, server.cpu_indices),
            ):
                if wanted:
                    self._start(kind, where, ids)
        if not self._threads:
            log.warning(
                "no power stream started: the daemons have no GPUs or CPUs this token may read"
            )

    # --- set-up ------------------------------------------------------------------------------
    def _plan(self, server: ZeusdConfig) -> tuple[bool, bool]:
        """Connect to ``server`` and decide whether to stream its GPUs and its CPUs."""
        client = ZeusdClient(server)
        where = server.endpoint
        self._daemon_clients[where] = client
        gpu = _wanted(
            server.gpu_indices, client.gpu_ids, client.can_read_gpu, "GPU", "gpu-read", where
        )
        cpu = _wanted(
            server.cpu_indices, client.cpu_ids, client.can_read_cpu, "CPU", "cpu-read", where
        )
        return gpu, cpu

    def _estimate_clock_offset(self, endpoint: str, num_samples: int = CLOCK_SAMPLES) -> float:
        """Seconds to add to the daemon's timestamps to put them on this machine's clock.

        Each sample compares the daemon's time with the midpoint of the round trip that asked
        for it; the median of ``num_samples`` resists one slow round trip.
        """
        client = self._daemon_clients[endpoint]
        offsets = []
        for _ in range(num_samples):
            before = time.time()
            daemon = client.get_time()
            after = time.time()
            offsets.append((before + after) / 2 - daemon)
        offset = statistics.median(offsets)
        log.info("%s: daemon clock offset %+.4f s (median of %d)", endpoint, offset, num_samples)
        return offset

    def _start(self, kind: str, endpoint: str, ids: list[int] | None) -> None:
        url = self._daemon_clients[endpoint].url(f"/{kind}/stream_power")
        if ids is not None:
            url += f"?{kind}_ids=" + ",".join(str(int(i)) for i in ids)
        process = self._process_gpu_event if kind == "gpu" else self._process_cpu_event
        thread = threading.Thread(
            target=self._stream_loop,
            args=(url, endpoint, process, kind.upper()),
            name=f"{kind}-power-stream-{endpoint}",
            daemon=True,
        )
        thread.start()
        self._threads.append(thread)
        log.info("streaming %s power from %s", kind.upper(), endpoint)

    # --- the stream threads ----------------------------------------------------------------------
    def _stream_loop(
        self, url: str, endpoint: str, process: Callable[[str, str], None], label: str
    ) -> None:
        """Keep one stream open until :meth:`stop`, reconnecting after a drop."""
        httpx = _httpx()
        while not self._stop_event.is_set():
            try:
                self._connect_and_stream(url, endpoint, process)
            except httpx.HTTPStatusError as e:
                code = e.response.status_code
                if code in (401, 403):
                    log.error(
                        "%s power stream from %s refused (HTTP %d): the token may not read it; "
                        "not retrying",
                        label,
                        endpoint,
                        code,
                    )
                    return
                self._pause(f"{label} power stream from {endpoint} answered HTTP {code}")
            except (httpx.HTTPError, httpx.StreamError) as e:
                self._pause(f"{label} power stream from {endpoint} dropped ({e!r})")
            except Exception as e:  # a stream must outlive one bad connection; stop() ends it
                if self._stop_event.is_set():
                    return
                log.warning("%s power stream from %s failed", label, endpoint, exc_info=True)
                self._pause(f"{label} power stream from {endpoint} failed ({e!r})")

    def _pause(self, what: str) -> None:
        if not self._stop_event.is_set():
            log.warning("%s; reconnecting in %.1f s", what, self._reconnect_delay)
            self._stop_event.wait(self._reconnect_delay)

    def _connect_and_stream(
        self, url: str, endpoint: str, process: Callable[[str, str], None]
    ) -> None:
        """Read one connection's events until it ends or :meth:`stop` is called."""
        httpx = _httpx()
        timeout = httpx.Timeout(10.0, read=None)  # events may be far apart
        with (
            self._daemon_clients[endpoint].make_client() as http,
            http.stream("GET", url, timeout=timeout) as response,
        ):
            response.raise_for_status()
            with self._lock:
                self._responses.add(response)
            try:
                pending = ""
                for chunk in response.iter_text():
                    if self._stop_event.is_set():
                        return
                    pending += chunk.replace("\r\n", "\n")
                    *events, pending = pending.split("\n\n")
                    for event in events:
                        process(event, endpoint)
            finally:
                with self._lock:
                    self._responses.discard(response)

    # --- events ----------------------------------------------------------------------------------
    @staticmethod
    def _data(event_text: str, endpoint: str, label: str) -> Iterator[dict[str, Any]]:
        """The JSON objects of an event's ``data:`` lines; a bad line is logged and skipped."""
        for line in event_text.splitlines():
            if not line.startswith("data:"):
                continue  # comments (":"), event names, ids
            raw = line[len("data:") :].strip()
            try:
                data = json.loads(raw)
            except json.JSONDecodeError:
                log.warning("%s event from %s is not JSON: %.100s", label, endpoint, raw)
                continue
            if isinstance(data, dict):
                yield data
            else:
                log.warning("%s event from %s is not an object: %.100s", label, endpoint, raw)

    def _store(self, endpoint: str, timestamp_s: float, which: str, index: int, value: Any):
        """Set one reading (``which``: ``gpu_power_w`` or ``cpu_power_w``); wake waiters."""
        with self._condition:
            readings = self._readings.get(endpoint)
            if readings is None:
                readings = self._readings[endpoint] = PowerReadings(timestamp_s=timestamp_s)
            readings.timestamp_s = max(readings.timestamp_s, timestamp_s)
            getattr(readings, which)[index] = value
            self._condition.notify_all()

    def _local_time(self, endpoint: str, timestamp_ms: Any) -> float:
        return float(timestamp_ms) / 1000.0 + self._clock_offsets.get(endpoint, 0.0)

    def _process_gpu_event(self, event_text: str, endpoint: str) -> None:
        """Apply a GPU event: ``{"timestamp_ms", "gpu_id", "power_mw"}``."""
        for data in self._data(event_text, endpoint, "GPU"):
            try:
                gpu, watts = int(data["gpu_id"]), float(data["power_mw"]) / 1000.0
                when = self._local_time(endpoint, data["timestamp_ms"])
            except (KeyError, TypeError, ValueError):
                log.warning("malformed GPU event from %s: %.100s", endpoint, data)
                continue
            self._store(endpoint, when, "gpu_power_w", gpu, watts)

    def _process_cpu_event(self, event_text: str, endpoint: str) -> None:
        """Apply a CPU event: ``{"timestamp_ms", "cpu_id", "cpu_mw", "dram_mw" (or null)}``."""
        for data in self._data(event_text, endpoint, "CPU"):
            try:
                cpu = int(data["cpu_id"])
                dram = data.get("dram_mw")
                reading = CpuPowerReading(
                    float(data["cpu_mw"]) / 1000.0, None if dram is None else float(dram) / 1000.0
                )
                when = self._local_time(endpoint, data["timestamp_ms"])
            except (KeyError, TypeError, ValueError):
                log.warning("malformed CPU event from %s: %.100s", endpoint, data)
                continue
            self._store(endpoint, when, "cpu_power_w", cpu, reading)

    # --- reading ---------------------------------------------------------------------------------
    def get_power(self) -> dict[str, PowerReadings]:
        """The latest readings by endpoint, copied (changing them changes nothing here)."""
        with self._lock:
            return self._generation()

    def _generation(self) -> dict[str, PowerReadings]:
        """What the readings are now (the caller holds the condition): an iterator yields when
        this changes, so a reading that arrives while no one waits is not lost."""
        return {endpoint: r.copy() for endpoint, r in self._readings.items()}

    def _wait_past(self, seen: dict[str, PowerReadings]) -> dict[str, PowerReadings]:
        """The readings once they differ from ``seen``, or after :meth:`stop` or ``WAIT_S``."""
        with self._condition:
            self._condition.wait_for(
                lambda: self._generation() != seen or self._stop_event.is_set(), timeout=WAIT_S
            )
            return self._generation()

    def __iter__(self) -> Iterator[dict[str, PowerReadings]]:
        """The readings after each update, until :meth:`stop` (an update that came before it is
        still yielded)."""
        seen = self.get_power()
        while True:
            now = self._wait_past(seen)
            if now != seen:
                seen = now
                yield self.get_power()
            elif self._stop_event.is_set():
                return

    async def __aiter__(self) -> AsyncIterator[dict[str, PowerReadings]]:
        """As ``__iter__``, waiting in an executor thread so the event loop keeps running."""
        loop = asyncio.get_running_loop()
        seen = self.get_power()
        while True:
            now = await loop.run_in_executor(None, self._wait_past, seen)
            if now != seen:
                seen = now
                yield self.get_power()
            elif self._stop_event.is_set():
                return

    def stop(self) -> None:
        """End every stream, wake waiting iterators, and wait (up to 5 s each) for the threads."""
        self._stop_event.set()
        with self._condition:
            self._condition.notify_all()
            responses = list(getattr(self, "_responses", ()))
        for response in responses:  # unblocks a thread waiting for the next event
            with contextlib.suppress(Exception):
                response.close()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout=5.0)
        self._threads.clear()
        for client in getattr(self, "_daemon_clients", {}).values():
            with contextlib.suppress(Exception):
                client.close()
        log.info("power streaming stopped")

    def __enter__(self) -> PowerStreamingClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
