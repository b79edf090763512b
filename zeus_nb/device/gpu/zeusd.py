"""A GPU whose privileged settings go through Zeus's daemon zeusd, for Zeus's ``ZeusdNVIDIAGPU``.

Reading a GPU needs no privilege; changing its power limit, clocks or persistence mode needs
root or SYS_ADMIN. With zeusd deployed as root, :class:`ZeusdSettersMixin` sends those changes to
the daemon and keeps every read on the GPU class it is mixed into::

    class ZeusdNVIDIAGPU(ZeusdSettersMixin, NVIDIAGPU): ...

    gpu = ZeusdNVIDIAGPU(0, ZeusdClient(ZeusdConfig.uds("/var/run/zeusd.sock")))

The constructor fails at once (:class:`~zeus_nb.utils.zeusd.ZeusdCapabilityError` or
``ZeusdAuthError``) when the daemon or the token may not read and control that GPU. What is
changed through it is put back through the daemon at interpreter exit (not after SIGKILL): the
power limit and persistence mode to their values before the first change, locked clocks reset.
"""

from __future__ import annotations

import atexit
import logging
from typing import Any

from zeus_nb.utils.zeusd import ZeusdClient, require_capabilities

__all__ = ["ZeusdSettersMixin"]

log = logging.getLogger(__name__)


class ZeusdSettersMixin:
    """Mixin before a :class:`~zeus_nb.device.gpu.backend.BackendGPU` subclass: setters via zeusd.

    ``gpu_index`` must be the index zeusd uses for the GPU (NVML's) and the one the base class
    takes.
    """

    def __init__(self, gpu_index: int, client: ZeusdClient) -> None:
        super().__init__(gpu_index)  # type: ignore[call-arg]
        require_capabilities(client, read_gpu=True, control_gpu=True, gpu_ids=[gpu_index])
        self._client = client
        self._gpu_index = gpu_index
        self._disable_sys_admin_warning = True  # the daemon holds the privilege
        self._zeusd_originals: dict[str, Any] = {}

    def _zeusd_remember(self, kind: str, read) -> None:
        """Note ``kind``'s value before the first change through the daemon; put back at exit."""
        if not self._zeusd_originals:
            atexit.register(self.restore_zeusd_settings)
        if kind not in self._zeusd_originals:
            self._zeusd_originals[kind] = read()

    def restore_zeusd_settings(self) -> None:
        """Put back what was changed through the daemon (also run at interpreter exit)."""
        originals, self._zeusd_originals = self._zeusd_originals, {}
        atexit.unregister(self.restore_zeusd_settings)
        ids, client = [self._gpu_index], self._client
        actions = {
            "power_limit": lambda v: client.set_power_limit(ids, v, True),
            "persistence_mode": lambda v: client.set_persistence_mode(ids, v, True),
            "gpu_locked_clocks": lambda v: client.reset_gpu_locked_clocks(ids, True),
            "mem_locked_clocks": lambda v: client.reset_mem_locked_clocks(ids, True),
        }
        for kind, original in originals.items():
            try:
                actions[kind](original)
            except Exception as e:  # keep restoring the others
                log.warning("GPU %d: zeusd could not restore %s: %s", self._gpu_index, kind, e)

    @property
    def supports_nonblocking_setters(self) -> bool:
        """zeusd returns at once when ``block=False`` and applies the change afterwards."""
        return True

    def set_power_management_limit(self, power_limit_mw: int, block: bool = True) -> None:
        if self.get_power_management_limit() == power_limit_mw:  # type: ignore[attr-defined]
            return
        ids = [self._gpu_index]
        self._zeusd_remember("power_limit", lambda: self._client.get_power_limit(ids)[ids[0]])
        self._client.set_power_limit(ids, power_limit_mw, block)

    def reset_power_management_limit(self, block: bool = True) -> None:
        default_w = self.device.default_power_limit()  # type: ignore[attr-defined]
        self.set_power_management_limit(int(round(default_w * 1000)), block)

    def set_persistence_mode(self, enabled: bool, block: bool = True) -> None:
        ids = [self._gpu_index]
        self._zeusd_remember(
            "persistence_mode", lambda: self._client.get_persistence_mode(ids)[ids[0]]
        )
        self._client.set_persistence_mode(ids, enabled, block)

    def get_persistence_mode(self) -> bool:
        return self._client.get_persistence_mode([self._gpu_index])[self._gpu_index]

    def set_memory_locked_clocks(
        self, min_clock_mhz: int, max_clock_mhz: int, block: bool = True
    ) -> None:
        self._zeusd_remember("mem_locked_clocks", lambda: None)
        self._client.set_mem_locked_clocks([self._gpu_index], min_clock_mhz, max_clock_mhz, block)

    def reset_memory_locked_clocks(self, block: bool = True) -> None:
        self._client.reset_mem_locked_clocks([self._gpu_index], block)
        self._zeusd_originals.pop("mem_locked_clocks", None)

    def set_gpu_locked_clocks(
        self, min_clock_mhz: int, max_clock_mhz: int, block: bool = True
    ) -> None:
        self._zeusd_remember("gpu_locked_clocks", lambda: None)
        self._client.set_gpu_locked_clocks([self._gpu_index], min_clock_mhz, max_clock_mhz, block)

    def reset_gpu_locked_clocks(self, block: bool = True) -> None:
        self._client.reset_gpu_locked_clocks([self._gpu_index], block)
        self._zeusd_originals.pop("gpu_locked_clocks", None)
