"""zeusd's addresses, records and errors (re-exported by :mod:`zeus_nb.utils.zeusd`).

:class:`ZeusdConfig` says where a daemon listens and with which token; the frozen records are what
its endpoints answer, in its units (mW, mJ, uJ, ms); the errors are Zeus's. The client that
talks to the daemon is :class:`zeus_nb.utils.zeusd.ZeusdClient`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from zeus_nb.errors import UnsupportedError
from zeus_nb.exception import ZeusBaseError
from zeus_nb.inputs.env import env
from zeus_nb.utils.boundary import needs_extra

__all__ = [
    "CpuDramPower",
    "CpuEnergyResult",
    "CpuInfo",
    "CpuPowerSnapshot",
    "GpuInfo",
    "GpuPowerSnapshot",
    "ZeusdAuthError",
    "ZeusdCapabilityError",
    "ZeusdConfig",
    "ZeusdConnectionError",
    "ZeusdUnsupportedError",
    "zeusd_reason",
]

# zeusd's API groups, which are also the names of the token scopes that open them.
GPU_READ, GPU_CONTROL, CPU_READ = "gpu-read", "gpu-control", "cpu-read"


def zeusd_reason(
    name: str, instead: str = "zeus_nb.device.get_gpus() or zeus_nb.monitor.ZeusMonitor"
) -> str:
    """The one-line message of a zeus-nb class that is not routed through zeusd, and the fix."""
    return (
        f"{name} is not routed through Zeus's daemon zeusd in zeus-nb: zeus-nb reads and sets "
        "GPUs through NVML and reads CPU energy through RAPL directly, in this process. "
        "Measuring needs no privilege; changing power limits or clocks needs root or SYS_ADMIN "
        "(Docker: --cap-add SYS_ADMIN), reading RAPL needs read access to "
        f"/sys/class/powercap/intel-rapl:*/energy_uj. Use {instead} instead"
    )


class ZeusdConnectionError(ZeusBaseError):
    """zeusd cannot be reached, or what answered is not zeusd."""


class ZeusdAuthError(ZeusBaseError):
    """zeusd wants a token and none was given, or it refused the token."""


class ZeusdCapabilityError(ZeusBaseError):
    """zeusd does not offer what the caller needs (an API group, a scope, a device)."""


class ZeusdUnsupportedError(ZeusdConnectionError, UnsupportedError):
    """A zeus-nb class that does not go through zeusd (Zeus code sees a connection error)."""


@dataclass(frozen=True)
class GpuInfo:
    """A GPU as zeusd lists it: its index in zeusd's calls and its model name."""

    id: int
    name: str


@dataclass(frozen=True)
class CpuInfo:
    """A CPU package as zeusd lists it, and whether its DRAM energy can be read."""

    id: int
    dram_available: bool


@dataclass(frozen=True)
class GpuPowerSnapshot:
    """GPU power in mW by GPU index, at ``timestamp_ms`` (the daemon's Unix time in ms)."""

    timestamp_ms: int
    power_mw: dict[int, int]


@dataclass(frozen=True)
class CpuDramPower:
    """One CPU package's power and its DRAM's (None where not metered), in mW."""

    cpu_mw: int
    dram_mw: int | None


@dataclass(frozen=True)
class CpuPowerSnapshot:
    """CPU power by package index, at ``timestamp_ms`` (the daemon's Unix time in ms)."""

    timestamp_ms: int
    power_mw: dict[int, CpuDramPower]


@dataclass(frozen=True)
class CpuEnergyResult:
    """Cumulative CPU and DRAM energy of one package in uJ (None where not read)."""

    cpu_energy_uj: int | None
    dram_energy_uj: int | None


def _httpx():
    with needs_extra("net", "Talking to zeusd"):
        import httpx
    return httpx


@dataclass(frozen=True)
class ZeusdConfig:
    """Where a zeusd listens (TCP ``host_port`` or Unix ``socket_path``), its token, and which
    GPU and CPU indices :class:`~zeus_nb.monitor.power_streaming.PowerStreamingClient` streams
    (None: all the daemon has; ``[]``: none)."""

    host_port: str | None = None
    socket_path: str | None = None
    token: str | None = None
    gpu_indices: list[int] | None = None
    cpu_indices: list[int] | None = None

    @classmethod
    def tcp(
        cls,
        host: str,
        port: int,
        *,
        token: str | None = None,
        gpu_indices: list[int] | None = None,
        cpu_indices: list[int] | None = None,
    ) -> ZeusdConfig:
        """A daemon listening on ``host:port``."""
        return cls(f"{host}:{port}", None, token, gpu_indices, cpu_indices)

    @classmethod
    def uds(
        cls,
        socket_path: str,
        *,
        token: str | None = None,
        gpu_indices: list[int] | None = None,
        cpu_indices: list[int] | None = None,
    ) -> ZeusdConfig:
        """A daemon listening on the Unix socket ``socket_path``."""
        return cls(None, socket_path, token, gpu_indices, cpu_indices)

    @classmethod
    def from_env(cls) -> ZeusdConfig | None:
        """From ``ZEUSD_SOCK_PATH`` or else ``ZEUSD_HOST_PORT`` (token: ``ZEUSD_TOKEN``); None
        when neither is set."""
        token = env("ZEUSD_TOKEN")
        if (sock := env("ZEUSD_SOCK_PATH")) is not None:
            return cls.uds(sock, token=token)
        if (host_port := env("ZEUSD_HOST_PORT")) is not None:
            return cls(host_port=host_port, token=token)
        return None

    @property
    def endpoint(self) -> str:
        """The socket path or ``host:port``: how messages and readings name this daemon."""
        return str(self.socket_path if self.socket_path is not None else self.host_port)

    def url(self, path: str) -> str:
        """The URL of ``path`` on this daemon (a Unix socket is addressed as ``localhost``)."""
        host = "localhost" if self.socket_path is not None else self.host_port
        return f"http://{host}{path}"

    def _auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def make_client(self) -> Any:
        """A new ``httpx.Client`` that reaches this daemon and sends the token."""
        httpx = _httpx()
        transport = httpx.HTTPTransport(uds=self.socket_path) if self.socket_path else None
        return httpx.Client(transport=transport, headers=self._auth_headers())
