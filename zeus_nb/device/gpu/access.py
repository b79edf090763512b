"""Who may change a real GPU's settings: this process, Zeus's daemon zeusd for it, or nobody.

Most people who bring a GPU do not own it (a shared cluster node, a hosted notebook, a container
without SYS_ADMIN): NVML answers every reading there and refuses every setter with
``NVML_ERROR_NO_PERMISSION``. Such a *read-only* GPU is found once per GPU object (an
:class:`~zeus_nb.device.gpu.nvidia.NVIDIAGPU` keeps the :class:`Access` found), by the first setter
NVML refuses or by asking (``gpu.settings_access()``: writing the limit the GPU already has back,
which changes nothing), never by the account's name. From then on its setters go through zeusd
when ``ZEUSD_SOCK_PATH`` or ``ZEUSD_HOST_PORT`` names one (Zeus's variables), and otherwise fail
at once with one line that names zeusd and Docker's ``--cap-add SYS_ADMIN``, without asking NVML
again. Readings never depend on any of this: they stay on the GPU.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from zeus_nb.device.gpu.common import ZeusGPUClockPermissionError, ZeusGPUNoPermissionError
from zeus_nb.errors import NO_PERMISSION_HINT, ZeusNbError
from zeus_nb.utils.zeusd_config import ZeusdConfig

if TYPE_CHECKING:
    from zeus_nb.utils.zeusd import ZeusdClient

__all__ = [
    "DIRECT",
    "READ_ONLY",
    "ZEUSD",
    "Access",
    "ZeusdUnavailableError",
    "can_change",
    "change",
    "probe",
    "said",
    "read_only_error",
    "refused",
    "unavailable",
    "zeusd_configured",
]

log = logging.getLogger(__name__)

DIRECT, ZEUSD, READ_ONLY = "direct", "zeusd", "read-only"

#: How a process without the privilege changes a GPU's settings anyway.
ZEUSD_HINT = (
    "run Zeus's daemon zeusd as root beside it and set ZEUSD_SOCK_PATH (or ZEUSD_HOST_PORT)"
)
#: What to do on a GPU this process may not change.
HOW_TO_CHANGE = f"{NO_PERMISSION_HINT}; or {ZEUSD_HINT}"


@dataclass(frozen=True)
class Access:
    """How this process changes one GPU's settings (``mode``), and why, in words."""

    mode: str
    why: str
    client: ZeusdClient | None = field(default=None, compare=False, repr=False)

    @property
    def source(self) -> str:
        """What produced a value measured while changing this GPU: ``real`` or ``zeusd``."""
        return "zeusd" if self.mode == ZEUSD else "real"


class ZeusdUnavailableError(ZeusGPUNoPermissionError):
    """NVML refused a setter and the configured zeusd cannot do it either (down, refuses)."""


def zeusd_configured() -> str | None:
    """Where zeusd listens by ``ZEUSD_SOCK_PATH`` / ``ZEUSD_HOST_PORT`` (None: not set)."""
    config = ZeusdConfig.from_env()
    return None if config is None else config.endpoint


def refused(nvml_index: int, what: str) -> Access:
    """NVML refused ``what`` on GPU ``nvml_index``: how its settings change from now on.

    With zeusd configured, connects to it and checks that it may control that GPU; raises
    :class:`ZeusdUnavailableError` (one line) when it cannot be reached or may not: nothing was
    changed. Without zeusd, the GPU is read-only.
    """
    from zeus_nb.utils.zeusd import ZeusdClient, require_capabilities  # HTTP: the net extra

    config = ZeusdConfig.from_env()
    if config is None:
        return Access(
            READ_ONLY, "NVML refuses its setters (no root or SYS_ADMIN) and no zeusd is configured"
        )
    try:
        client = ZeusdClient(config)
    except ZeusNbError as e:
        raise unavailable(nvml_index, what, e) from e
    try:
        require_capabilities(client, read_gpu=True, control_gpu=True, gpu_ids=[nvml_index])
    except ZeusNbError as e:
        client.close()
        raise unavailable(nvml_index, what, e) from e
    return Access(ZEUSD, f"through zeusd at {config.endpoint}", client)


def unavailable(index: int, what: str, error: Exception) -> ZeusdUnavailableError:
    """zeusd could not do ``what`` (down, or refused): one line, and nothing was changed."""
    return ZeusdUnavailableError(
        f"GPU {index}: {what}: NVML refuses (no root or SYS_ADMIN) and zeusd could not do it "
        f"either: {error}; nothing was changed"
    )


def read_only_error(index: int, what: str, setting: str | None = None) -> ZeusGPUNoPermissionError:
    """The one-line error of a setter on a GPU this process may not change (``setting``: what
    it changes, when not the power limit)."""
    cls = ZeusGPUNoPermissionError if setting is None else ZeusGPUClockPermissionError
    hint = (
        NO_PERMISSION_HINT
        if setting is None
        else NO_PERMISSION_HINT.replace("power limits", setting)
    )
    return cls(f"GPU {index}: {what}: {hint}; or {ZEUSD_HINT}")


def change(
    gpu: Any,
    what: str | Callable[[], str],
    attempt: Callable[[], None],
    through_zeusd: Callable[[ZeusdClient, list[int]], object],
    setting: str | None = None,
    ask_only: bool = False,
) -> None:
    """Change a setting of ``gpu`` (its ``_access`` holds what was found): ``attempt()`` (the
    NVML call, raising Zeus's errors) until NVML refuses one, then through zeusd when one is
    configured; on a read-only GPU, one line without asking NVML again. ``ask_only``: the
    attempt changes nothing (:func:`probe`), so zeusd is not asked to repeat it."""
    found = gpu._access
    if found is None or found.mode == DIRECT:
        try:
            attempt()
        except ZeusGPUNoPermissionError as e:
            if found is not None:
                raise
            what = said(what)
            found = gpu._access = refused(gpu.gpu_index, what)
            log.debug("GPU %d: %s", gpu.index, found.why)
            if found.mode == READ_ONLY:
                raise read_only_error(gpu.index, what, setting) from e
            if ask_only:
                return
        else:
            if found is None:
                gpu._access = Access(DIRECT, "NVML accepts its setters")
            return
    if found.mode == READ_ONLY:
        raise read_only_error(gpu.index, said(what), setting)
    try:
        through_zeusd(found.client, [gpu.gpu_index])
    except ZeusNbError as e:
        raise unavailable(gpu.index, said(what), e) from e


def said(what: str | Callable[[], str]) -> str:
    """``what`` in words: messages are built only when needed (a mocked NVML's values, in
    Zeus's tests, cannot be formatted)."""
    return what() if callable(what) else what


def probe(gpu: Any) -> Access:
    """What :func:`change` finds for ``gpu``, asked by writing back the power limit it has
    (no change) where nothing was found yet; a read-only GPU refuses that too."""
    if gpu._access is None:
        with contextlib.suppress(ZeusGPUNoPermissionError):
            gpu._write_power_limit(gpu.get_power_management_limit(), ask_only=True)
    return gpu._access or Access(DIRECT, "NVML accepts its setters")


def can_change(gpu: Any, sys_admin: bool) -> tuple[bool, str]:
    """Whether this process may change ``gpu``'s power limit, and why not (asks NVML once:
    :func:`probe`)."""
    found = probe(gpu)
    if found.mode == READ_ONLY:
        return False, f"{found.why}; {HOW_TO_CHANGE}"
    if found.mode == ZEUSD or sys_admin:
        return True, found.why if found.mode == ZEUSD else "this process holds CAP_SYS_ADMIN"
    if (endpoint := zeusd_configured()) is not None:
        return True, f"through zeusd at {endpoint} (this process lacks CAP_SYS_ADMIN)"
    return False, NO_PERMISSION_HINT
