"""Zeus's client of its privileged daemon, zeusd: names only, because zeus-nb does not use zeusd.

Zeus can hand the calls that need SYS_ADMIN (power limits, clocks, persistence mode) and the
reading of RAPL files to a root daemon. zeus-nb talks to NVML and RAPL directly, in the process
itself, so the daemon is never needed. The records (:class:`ZeusdConfig`, :class:`GpuInfo`...)
and the errors are real, so code that builds a configuration or catches the errors still runs;
constructing :class:`ZeusdClient` or calling :func:`require_capabilities` raises
:class:`ZeusdUnsupportedError`, whose message says what to do instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from zeus_nb.errors import UnsupportedError
from zeus_nb.exception import ZeusBaseError
from zeus_nb.inputs.env import env

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


def zeusd_reason(
    name: str, instead: str = "zeus_nb.device.get_gpus() or zeus_nb.monitor.ZeusMonitor"
) -> str:
    """The one-line message of every zeusd placeholder: why not, and what to do instead."""
    return (
        f"{name} needs Zeus's daemon zeusd, which zeus-nb does not use: zeus-nb reads and sets "
        "GPUs through NVML and reads CPU energy through RAPL directly, in this process. "
        "Measuring needs no privilege; changing power limits or clocks needs root or SYS_ADMIN "
        "(Docker: --cap-add SYS_ADMIN), reading RAPL needs read access to "
        f"/sys/class/powercap/intel-rapl:*/energy_uj. Use {instead} instead"
    )


class ZeusdConnectionError(ZeusBaseError):
    """zeusd cannot be reached."""


class ZeusdAuthError(ZeusBaseError):
    """zeusd refused the token."""


class ZeusdCapabilityError(ZeusBaseError):
    """zeusd does not offer what the caller needs."""


class ZeusdUnsupportedError(ZeusdConnectionError, UnsupportedError):
    """zeusd is not used by zeus-nb (a connection error to Zeus code, unsupported to zeus-nb)."""


@dataclass(frozen=True)
class GpuInfo:
    """A GPU as zeusd lists it."""

    id: int
    name: str


@dataclass(frozen=True)
class CpuInfo:
    """A CPU package as zeusd lists it."""

    id: int
    dram_available: bool


@dataclass(frozen=True)
class GpuPowerSnapshot:
    """GPU power in mW by GPU index, at ``timestamp_ms`` (Unix time in ms)."""

    timestamp_ms: int
    power_mw: dict[int, int]


@dataclass(frozen=True)
class CpuDramPower:
    """One CPU package's power and its DRAM's (None where not metered), in mW."""

    cpu_mw: int
    dram_mw: int | None


@dataclass(frozen=True)
class CpuPowerSnapshot:
    """CPU power by package index, at ``timestamp_ms`` (Unix time in ms)."""

    timestamp_ms: int
    power_mw: dict[int, CpuDramPower]


@dataclass(frozen=True)
class CpuEnergyResult:
    """Cumulative CPU and DRAM energy of one package in uJ (None where not read)."""

    cpu_energy_uj: int | None
    dram_energy_uj: int | None


@dataclass(frozen=True)
class ZeusdConfig:
    """Where a zeusd listens (TCP ``host_port`` or Unix ``socket_path``) and which devices."""

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
        return cls(None, socket_path, token, gpu_indices, cpu_indices)

    @classmethod
    def from_env(cls) -> ZeusdConfig | None:
        """From ``ZEUSD_SOCK_PATH`` or else ``ZEUSD_HOST_PORT`` (token: ``ZEUSD_TOKEN``)."""
        token = env("ZEUSD_TOKEN")
        if (sock := env("ZEUSD_SOCK_PATH")) is not None:
            return cls.uds(sock, token=token)
        if (host_port := env("ZEUSD_HOST_PORT")) is not None:
            return cls(host_port=host_port, token=token)
        return None

    @property
    def endpoint(self) -> str:
        """The socket path or ``host:port``, for messages."""
        return str(self.socket_path if self.socket_path is not None else self.host_port)

    def url(self, path: str) -> str:
        host = "localhost" if self.socket_path is not None else self.host_port
        return f"http://{host}{path}"

    def make_client(self):
        """Raises :class:`ZeusdUnsupportedError`: zeus-nb has no HTTP client for zeusd."""
        raise ZeusdUnsupportedError(zeusd_reason("ZeusdConfig.make_client"))


class ZeusdClient:
    """Zeus's zeusd client; constructing it raises :class:`ZeusdUnsupportedError`."""

    def __init__(self, config: ZeusdConfig | None = None) -> None:
        raise ZeusdUnsupportedError(zeusd_reason("ZeusdClient"))


def require_capabilities(
    client: ZeusdClient,
    *,
    read_gpu: bool = False,
    control_gpu: bool = False,
    read_cpu: bool = False,
    gpu_ids: list[int] | None = None,
    cpu_ids: list[int] | None = None,
) -> None:
    """Raises :class:`ZeusdUnsupportedError` (there is no zeusd client to check)."""
    raise ZeusdUnsupportedError(zeusd_reason("require_capabilities"))
