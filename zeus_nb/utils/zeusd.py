"""Zeus's client of its privileged daemon zeusd, over HTTP on TCP or a Unix socket.

zeusd runs as root beside the training job and does what needs privileges on the process's
behalf: setting power limits, clocks and persistence mode, and reading RAPL counters. zeus-nb
itself reads and sets GPUs through NVML in the process (:mod:`zeus_nb.device`); this client is
for code written against Zeus that talks to a zeusd deployment, and for
:class:`~zeus_nb.monitor.power_streaming.PowerStreamingClient`.

A :class:`ZeusdClient` asks the daemon once what it offers (``GET /discover``: its GPUs, CPU
packages, enabled API groups and whether it wants a token), then, when a token is needed and
given, which scopes the token grants (``GET /auth/whoami``). An authentication problem does not
fail the constructor: it is kept in :attr:`ZeusdClient.auth_error`, the ``can_*`` properties
answer False, and :func:`require_capabilities` raises it. Every endpoint call that the daemon
refuses raises :class:`~zeus_nb.device.exception.ZeusdError` naming the call.

The records, :class:`ZeusdConfig` and the errors live in :mod:`zeus_nb.utils.zeusd_config` and
are importable from here, as in Zeus. The HTTP client is httpx (the ``net`` extra:
``pip install 'zeus-nb[net]'``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from zeus_nb.device.exception import ZeusdError
from zeus_nb.utils.zeusd_config import (
    CPU_READ,
    GPU_CONTROL,
    GPU_READ,
    CpuDramPower,
    CpuEnergyResult,
    CpuInfo,
    CpuPowerSnapshot,
    GpuInfo,
    GpuPowerSnapshot,
    ZeusdAuthError,
    ZeusdCapabilityError,
    ZeusdConfig,
    ZeusdConnectionError,
    ZeusdUnsupportedError,
    _httpx,
    zeusd_reason,
)

__all__ = [
    "CpuDramPower",
    "CpuEnergyResult",
    "CpuInfo",
    "CpuPowerSnapshot",
    "GpuInfo",
    "GpuPowerSnapshot",
    "ZeusdAuthError",
    "ZeusdCapabilityError",
    "ZeusdClient",
    "ZeusdConfig",
    "ZeusdConnectionError",
    "ZeusdUnsupportedError",
    "require_capabilities",
    "zeusd_reason",
]

log = logging.getLogger(__name__)


def _ids(ids: Iterable[int]) -> str:
    return ",".join(str(int(i)) for i in ids)


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _body(response: Any) -> str:
    """The response's text on one line, shortened: for error messages."""
    text = " ".join(response.text.split())
    return text if len(text) <= 300 else text[:297] + "..."


class ZeusdClient:
    """A connection to one zeusd: what it offers, what the token may do, and its endpoints.

    ``config`` None reads ``ZEUSD_SOCK_PATH`` / ``ZEUSD_HOST_PORT`` / ``ZEUSD_TOKEN``. Raises
    :class:`ZeusdConnectionError` when no daemon is configured, reachable or answering as zeusd.
    GPU and CPU indices are the daemon's (NVML's and RAPL's package numbers).
    """

    def __init__(self, config: ZeusdConfig | None = None) -> None:
        if config is None:
            config = ZeusdConfig.from_env()
            if config is None:
                raise ZeusdConnectionError(
                    "No Zeusd connection configured: set ZEUSD_SOCK_PATH (Unix socket) or "
                    "ZEUSD_HOST_PORT (host:port), or pass ZeusdConfig.uds(...) / .tcp(...)"
                )
        self._config = config
        self._client = config.make_client()
        self._auth_error: str | None = None
        self._granted_scopes: frozenset[str] = frozenset()
        self._whoami_sub: str | None = None
        self._whoami_exp: int | None = None
        try:
            self._read_discovery(self._discover())
            if self._auth_required:
                self._authenticate()
        except BaseException:
            self._client.close()
            raise

    # --- set-up ------------------------------------------------------------------------------
    def _discover(self) -> Any:
        httpx = _httpx()
        where = self._config.endpoint
        try:
            response = self._client.get(self._config.url("/discover"))
        except httpx.RequestError as e:
            raise ZeusdConnectionError(
                f"Cannot reach Zeusd at {where} ({type(e).__name__}: {e}); check that zeusd "
                "runs there and that this process may open its socket or port"
            ) from e
        if response.status_code != 200:
            raise ZeusdConnectionError(
                f"Zeusd at {where} answered HTTP {response.status_code} on /discover: "
                f"{_body(response)}"
            )
        try:
            return response.json()
        except ValueError as e:
            raise ZeusdConnectionError(
                f"what answers at {where} is not zeusd: /discover is not JSON ({e})"
            ) from e

    def _read_discovery(self, data: Any) -> None:
        try:
            self._gpus = [GpuInfo(int(g["id"]), str(g["name"])) for g in data["gpus"]]
            self._cpus = [CpuInfo(int(c["id"]), bool(c["dram_available"])) for c in data["cpus"]]
            self._enabled_api_groups: set[str] = set(data["enabled_api_groups"])
            self._auth_required: bool = bool(data["auth_required"])
        except (KeyError, TypeError, ValueError) as e:
            raise ZeusdConnectionError(
                f"Zeusd at {self._config.endpoint} answered /discover without the fields this "
                f"client reads ({type(e).__name__}: {e}); is it a zeusd of Zeus 0.16 or newer?"
            ) from e

    def _authenticate(self) -> None:
        """Ask which scopes the token grants; a problem is kept in :attr:`auth_error`."""
        where = self._config.endpoint
        if self._config.token:
            self._auth_error = self._whoami(where)
        else:
            self._auth_error = (
                f"Zeusd at {where} requires a token, but no token was provided: set ZEUSD_TOKEN "
                "or pass token= to ZeusdConfig"
            )
        if self._auth_error:
            log.warning("zeusd at %s: %s", where, self._auth_error)

    def _whoami(self, where: str) -> str | None:
        """Read the token's subject, expiry and scopes; the problem, or None when it worked."""
        httpx = _httpx()
        try:
            response = self._client.get(self._config.url("/auth/whoami"))
        except httpx.RequestError as e:
            raise ZeusdConnectionError(
                f"Zeusd at {where} stopped answering during authentication ({e!r})"
            ) from e
        if response.status_code == 401:
            return f"Token rejected by Zeusd at {where}: {_body(response)}"
        if response.status_code != 200:
            return (
                f"Zeusd at {where} answered HTTP {response.status_code} on /auth/whoami: "
                f"{_body(response)}"
            )
        try:
            whoami = response.json()
            self._granted_scopes = frozenset(whoami.get("scopes", ()))
        except (ValueError, AttributeError, TypeError):
            return f"Zeusd at {where} answered /auth/whoami with no scopes: {_body(response)}"
        self._whoami_sub, self._whoami_exp = whoami.get("sub"), whoami.get("exp")
        log.info(
            "zeusd at %s: authenticated as %r with scopes %s",
            where,
            self._whoami_sub,
            sorted(self._granted_scopes),
        )
        return None

    def close(self) -> None:
        """Close the HTTP connection (the client cannot be used afterwards)."""
        self._client.close()

    def __enter__(self) -> ZeusdClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- what the daemon offers ---------------------------------------------------------------
    @property
    def endpoint(self) -> str:
        return self._config.endpoint

    @property
    def gpus(self) -> list[GpuInfo]:
        return list(self._gpus)

    @property
    def gpu_ids(self) -> list[int]:
        return [g.id for g in self._gpus]

    @property
    def cpus(self) -> list[CpuInfo]:
        return list(self._cpus)

    @property
    def cpu_ids(self) -> list[int]:
        return [c.id for c in self._cpus]

    @property
    def dram_available(self) -> list[bool]:
        """Whether each CPU package's DRAM energy can be read, in ``cpu_ids`` order."""
        return [c.dram_available for c in self._cpus]

    @property
    def auth_required(self) -> bool:
        return self._auth_required

    @property
    def auth_error(self) -> str | None:
        """Why authentication failed (None: it worked or is not required)."""
        return self._auth_error

    @property
    def granted_scopes(self) -> frozenset[str]:
        """The token's scopes (empty when authentication is off or failed)."""
        return self._granted_scopes

    def _can(self, group: str) -> bool:
        if group not in self._enabled_api_groups:
            return False
        return not self._auth_required or group in self._granted_scopes

    @property
    def can_read_gpu(self) -> bool:
        return self._can(GPU_READ)

    @property
    def can_control_gpu(self) -> bool:
        return self._can(GPU_CONTROL)

    @property
    def can_read_cpu(self) -> bool:
        return self._can(CPU_READ)

    def _why_not(self, group: str) -> str:
        if group not in self._enabled_api_groups:
            return f"API group '{group}' is not enabled on this server"
        if self._auth_required and group not in self._granted_scopes:
            return f"Token lacks required scope '{group}' (granted: {sorted(self._granted_scopes)})"
        return f"'{group}' is not available"

    # --- endpoints -----------------------------------------------------------------------------
    def _call(self, method: str, path: str, operation: str, params: dict[str, str]) -> Any:
        """``method path`` with ``params``; a refusal or a broken connection is ZeusdError."""
        httpx = _httpx()
        try:
            response = self._client.request(method, self._config.url(path), params=params)
        except httpx.RequestError as e:
            raise ZeusdError(
                f"Failed to {operation}: zeusd at {self.endpoint} cannot be reached "
                f"({type(e).__name__}: {e})"
            ) from e
        if response.status_code != 200:
            raise ZeusdError(
                f"Failed to {operation}: zeusd at {self.endpoint} answered HTTP "
                f"{response.status_code}: {_body(response)}"
            )
        return response

    def _get(self, path: str, operation: str, **params: str) -> Any:
        response = self._call("GET", path, operation, params)
        try:
            return response.json()
        except ValueError as e:
            raise ZeusdError(f"Failed to {operation}: zeusd answered no JSON ({e})") from e

    def _post(self, path: str, operation: str, **params: str) -> None:
        self._call("POST", path, operation, params)

    @staticmethod
    def _which(ids: Iterable[int] | None, name: str = "gpu_ids") -> dict[str, str]:
        return {} if ids is None else {name: _ids(ids)}

    def get_gpu_energy(self, gpu_ids: list[int]) -> dict[int, int]:
        """Cumulative energy in mJ by GPU index."""
        data = self._get("/gpu/get_cumulative_energy", "get_gpu_energy", gpu_ids=_ids(gpu_ids))
        return {int(k): int(v["energy_mj"]) for k, v in data.items()}

    def get_gpu_power(self, gpu_ids: list[int] | None = None) -> GpuPowerSnapshot:
        """Power in mW by GPU index (None: every GPU)."""
        data = self._get("/gpu/get_power", "get_gpu_power", **self._which(gpu_ids))
        power = {int(k): int(v) for k, v in data["power_mw"].items()}
        return GpuPowerSnapshot(int(data["timestamp_ms"]), power)

    def set_power_limit(self, gpu_ids: list[int], power_limit_mw: int, block: bool = True) -> None:
        self._post(
            "/gpu/set_power_limit",
            "set_power_limit",
            gpu_ids=_ids(gpu_ids),
            power_limit_mw=str(int(power_limit_mw)),
            block=_flag(block),
        )

    def set_persistence_mode(self, gpu_ids: list[int], enabled: bool, block: bool = True) -> None:
        self._post(
            "/gpu/set_persistence_mode",
            "set_persistence_mode",
            gpu_ids=_ids(gpu_ids),
            enabled=_flag(enabled),
            block=_flag(block),
        )

    def get_persistence_mode(self, gpu_ids: list[int] | None = None) -> dict[int, bool]:
        data = self._get(
            "/gpu/get_persistence_mode", "get_persistence_mode", **self._which(gpu_ids)
        )
        return {int(k): bool(v["enabled"]) for k, v in data.items()}

    def get_power_limit(self, gpu_ids: list[int] | None = None) -> dict[int, int]:
        """The power limit in mW by GPU index (None: every GPU)."""
        data = self._get("/gpu/get_power_limit", "get_power_limit", **self._which(gpu_ids))
        return {int(k): int(v["power_limit_mw"]) for k, v in data.items()}

    def get_power_limit_constraints(
        self, gpu_ids: list[int] | None = None
    ) -> dict[int, tuple[int, int]]:
        """(minimum, maximum) power limit in mW by GPU index (None: every GPU)."""
        data = self._get(
            "/gpu/get_power_limit_constraints",
            "get_power_limit_constraints",
            **self._which(gpu_ids),
        )
        return {
            int(k): (int(v["min_power_limit_mw"]), int(v["max_power_limit_mw"]))
            for k, v in data.items()
        }

    def _clocks(self, what: str, gpu_ids, lo: int | None, hi: int | None, block: bool) -> None:
        params = {"gpu_ids": _ids(gpu_ids), "block": _flag(block)}
        if lo is not None and hi is not None:
            params |= {"min_clock_mhz": str(int(lo)), "max_clock_mhz": str(int(hi))}
        self._post(f"/gpu/{what}", what, **params)

    def set_gpu_locked_clocks(
        self, gpu_ids: list[int], min_clock_mhz: int, max_clock_mhz: int, block: bool = True
    ) -> None:
        self._clocks("set_gpu_locked_clocks", gpu_ids, min_clock_mhz, max_clock_mhz, block)

    def reset_gpu_locked_clocks(self, gpu_ids: list[int], block: bool = True) -> None:
        self._clocks("reset_gpu_locked_clocks", gpu_ids, None, None, block)

    def set_mem_locked_clocks(
        self, gpu_ids: list[int], min_clock_mhz: int, max_clock_mhz: int, block: bool = True
    ) -> None:
        self._clocks("set_mem_locked_clocks", gpu_ids, min_clock_mhz, max_clock_mhz, block)

    def reset_mem_locked_clocks(self, gpu_ids: list[int], block: bool = True) -> None:
        self._clocks("reset_mem_locked_clocks", gpu_ids, None, None, block)

    def get_cpu_energy(
        self, cpu_ids: list[int] | None = None, cpu: bool = True, dram: bool = True
    ) -> dict[int, CpuEnergyResult]:
        """Cumulative package (``cpu``) and DRAM (``dram``) energy in uJ by CPU index."""
        data = self._get(
            "/cpu/get_cumulative_energy",
            "get_cpu_energy",
            cpu=_flag(cpu),
            dram=_flag(dram),
            **self._which(cpu_ids, "cpu_ids"),
        )
        return {
            int(k): CpuEnergyResult(v.get("cpu_energy_uj"), v.get("dram_energy_uj"))
            for k, v in data.items()
        }

    def get_cpu_power(self, cpu_ids: list[int] | None = None) -> CpuPowerSnapshot:
        """Package and DRAM power in mW by CPU index (None: every package)."""
        data = self._get("/cpu/get_power", "get_cpu_power", **self._which(cpu_ids, "cpu_ids"))
        power = {
            int(k): CpuDramPower(int(v["cpu_mw"]), v.get("dram_mw"))
            for k, v in data["power_mw"].items()
        }
        return CpuPowerSnapshot(int(data["timestamp_ms"]), power)

    def get_time(self) -> float:
        """The daemon's clock as Unix time in seconds."""
        return self._get("/time", "get_time")["timestamp_ms"] / 1000.0

    def make_client(self) -> Any:
        """A new ``httpx.Client`` to this daemon with the token (e.g. for a long-lived stream)."""
        return self._config.make_client()

    def url(self, path: str) -> str:
        return self._config.url(path)


def require_capabilities(
    client: ZeusdClient,
    *,
    read_gpu: bool = False,
    control_gpu: bool = False,
    read_cpu: bool = False,
    gpu_ids: list[int] | None = None,
    cpu_ids: list[int] | None = None,
) -> None:
    """Fail early, before any work, when the daemon cannot do what the caller will ask.

    Raises :class:`ZeusdAuthError` when authentication failed, else
    :class:`ZeusdCapabilityError` listing every missing API group, scope and device index.
    """
    if client.auth_error:
        raise ZeusdAuthError(client.auth_error)
    problems = [
        client._why_not(group)
        for group, wanted, can in (
            (GPU_READ, read_gpu, client.can_read_gpu),
            (GPU_CONTROL, control_gpu, client.can_control_gpu),
            (CPU_READ, read_cpu, client.can_read_cpu),
        )
        if wanted and not can
    ]
    for kind, wanted, have in (("GPU", gpu_ids, client.gpu_ids), ("CPU", cpu_ids, client.cpu_ids)):
        missing = sorted(set(wanted or ()) - set(have))
        if missing:
            problems.append(f"{kind} indices {missing} not available (available: {sorted(have)})")
    if problems:
        raise ZeusdCapabilityError(f"Zeusd at {client.endpoint}: " + "; ".join(problems))
