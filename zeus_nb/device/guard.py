"""Put GPU settings back at the values they had before zeus-nb changed them.

Before its first change, a :class:`SettingsGuard` records each GPU's original value of every
setting *kind* it guards (``power_limit``, ``locked_clocks``) in memory and in a small JSON state
file. It restores them when asked (:meth:`SettingsGuard.restore`), at interpreter exit (normal
end, an uncaught exception or KeyboardInterrupt all pass through ``atexit``) and on SIGTERM (a
handler restores, then hands the signal to whatever handler was installed before). Nothing in a
process survives SIGKILL or a power cut, which is what the state file is for: ``zeus-nb restore``
(:func:`restore_from_state_files`) reads it in a fresh process and sets the values back.

Setting kinds
-------------
The state file lists ``(gpu, kind, original)`` entries, and restoring dispatches on ``kind``
through :data:`~zeus_nb.device.settings.SETTING_KINDS`. A new kind of setting (locked SM clocks,
say) is one :class:`SettingKind` passed to :func:`register_setting_kind`: the guard, its hooks,
the state file and ``zeus-nb restore`` need no change.

The state files live in ``$ZEUS_NB_STATE_DIR``, else ``$XDG_CACHE_HOME/zeus-nb/power_limits``, else
``~/.cache/zeus-nb/power_limits``.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import json
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zeus_nb.device.settings import (  # noqa: F401 (the setting kinds, importable from here too)
    FORMAT,
    LEGACY_FORMAT,
    LOCKED_CLOCKS,
    POWER_LIMIT,
    SETTING_KINDS,
    STATE_DIR_ENV,
    SettingKind,
    _kind,
    register_setting_kind,
    state_dir,
)
from zeus_nb.errors import ZeusNbError
from zeus_nb.inputs.registry import environ_read
from zeus_nb.utils.files import atomic_write

if TYPE_CHECKING:
    from zeus_nb.device.base import GPU

log = logging.getLogger(__name__)

_active: list[SettingsGuard] = []
_lock = threading.RLock()
_hooks_installed = False
_previous_sigterm = None
_counter = itertools.count()


# --- the guard ----------------------------------------------------------------------------------
class SettingsGuard:
    """Remembers the original values of some settings of some GPUs and restores them once.

    Args:
        gpus: device-layer GPU objects whose settings will be changed.
        kinds: names of the setting kinds to guard (keys of :data:`SETTING_KINDS`).
        backend: the GPU system's backend name, so ``zeus-nb restore`` can reopen the GPUs.
        persist: write a state file; default: unless a GPU's settings do not outlive the process
            (``GPU.persistent`` false, e.g. a replayed log's GPUs).
    """

    def __init__(
        self,
        gpus: Iterable[GPU],
        kinds: Sequence[str] = ("power_limit",),
        backend: str = "auto",
        persist: bool | None = None,
    ):
        self.gpus = list(gpus)
        self.kinds = [_kind(k) for k in kinds]
        self.backend = backend
        self.persist = all(g.persistent for g in self.gpus) if persist is None else persist
        self.originals: dict[tuple[int, str], Any] | None = None
        self.path: Path | None = None

    @property
    def armed(self) -> bool:
        return self.originals is not None

    def record(self) -> None:
        """Record the current values (once, before the first change) and arm the restore hooks."""
        if self.originals is not None:
            return
        self.originals = {}
        for g in self.gpus:
            for k in self.kinds:
                value = self._original_of(g, k)
                try:
                    if k.check is not None and value is not None:
                        k.check(value, f"GPU {g.index}'s {k.name.replace('_', ' ')}")
                except ZeusNbError as e:  # e.g. a stand-in GPU of a test: nothing to put back
                    log.warning("%s; it will not be restored", e)
                    continue
                self.originals[(g.index, k.name)] = value
        if self.persist:
            self.path = self._write_state()
        log.debug(
            "recorded %s of GPU(s) %s (state file: %s)",
            self._describe(),
            self._indices(),
            self.path,
        )
        with _lock:
            _active.append(self)
        _install_hooks()

    @staticmethod
    def _original_of(gpu: GPU, kind: SettingKind) -> Any:
        """The GPU's value, or what an earlier live guard recorded for it (a re-run cell)."""
        with _lock:
            key = (gpu.index, kind.name)
            for guard in _active:
                recorded = guard.originals or {}
                if key in recorded and any(g is gpu for g in guard.gpus):
                    return recorded[key]
        return kind.read(gpu)

    def _indices(self) -> str:
        return ", ".join(str(g.index) for g in self.gpus)

    def _describe(self, only: Iterable[str] | None = None) -> str:
        """The guarded kinds (or ``only`` those) in words, e.g. "power limits"."""
        kinds = [k.name for k in self.kinds] if only is None else list(only)
        names = (n.replace("_", " ") for n in kinds)
        return " and ".join(n if n.endswith("s") else n + "s" for n in names)

    def _entries(self) -> list[dict[str, Any]]:
        names = {g.index: g.name for g in self.gpus}
        return [
            {"gpu": i, "name": names[i], "kind": kind, "original": value}
            for (i, kind), value in (self.originals or {}).items()
        ]

    @environ_read("CUDA_VISIBLE_DEVICES recorded as is")
    def _write_state(self) -> Path | None:
        folder = state_dir()
        state = {
            "format": FORMAT,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "created": time.time(),
            "backend": self.backend,
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "settings": self._entries(),
        }
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{socket.gethostname()}-{os.getpid()}-{next(_counter)}.json"
            atomic_write(path, json.dumps(state, indent=1))
            return path
        except OSError as e:
            log.warning(
                "could not write the GPU settings state file in %s (%s); set %s to a writable "
                "folder so `zeus-nb restore` can help after a crash",
                folder,
                e,
                STATE_DIR_ENV,
            )
            return None

    def restore(self) -> None:
        """Set every guarded setting back to its recorded value and forget the record."""
        with _lock:
            if self.originals is None:
                return
            originals, self.originals = self.originals, None
            if self in _active:
                _active.remove(self)
        gpus = {g.index: g for g in self.gpus}
        kinds = {k.name: k for k in self.kinds}
        failed, written = [], []
        for (index, name), value in originals.items():
            kind = kinds[name]
            try:
                if kind.read(gpus[index]) != value:
                    kind.write(gpus[index], value)
                    written.append((index, name))
            except Exception as e:  # keep restoring the other settings
                failed.append(f"GPU {index} {name}: {e}")
        if self.path is not None and not failed:
            with contextlib.suppress(OSError):
                self.path.unlink()
        self.path = None if not failed else self.path
        if failed:
            log.warning(
                "could not restore GPU settings (%s); run `zeus-nb restore` as root",
                "; ".join(failed),
            )
        elif written:  # said only of what was put back: a guard never used says nothing
            shown = ", ".join(str(i) for i in dict.fromkeys(i for i, _ in written))
            names = dict.fromkeys(n for _, n in written)
            log.info("restored the original %s of GPU(s) %s", self._describe(names), shown)
        else:
            log.debug("%s of GPU(s) %s unchanged", self._describe(), self._indices())


class PowerLimitGuard(SettingsGuard):
    """A :class:`SettingsGuard` of power limits alone (what the optimizers and sweeps change)."""

    def __init__(self, gpus: Iterable[GPU], backend: str = "auto", persist: bool | None = None):
        super().__init__(gpus, ("power_limit",), backend=backend, persist=persist)


@contextlib.contextmanager
def settings_restored(
    gpus: Iterable[GPU],
    kinds: Sequence[str] = ("power_limit",),
    backend: str = "auto",
    persist: bool | None = None,
):
    """Change the given settings freely inside the block; they get their original values back.

    The restore also happens on errors, Ctrl-C and SIGTERM, and the state file lets
    ``zeus-nb restore`` finish the job after a crash. Yields the :class:`SettingsGuard`.
    """
    guard = SettingsGuard(gpus, kinds, backend=backend, persist=persist)
    guard.record()
    try:
        yield guard
    finally:
        guard.restore()


def power_limits_restored(gpus: Iterable[GPU], backend: str = "auto", persist: bool | None = None):
    """Change power limits freely inside the block; each GPU gets its original limit back after it.

    See :func:`settings_restored`; yields the guard.
    """
    return settings_restored(gpus, ("power_limit",), backend=backend, persist=persist)


def restore_all() -> None:
    """Restore every armed guard of this process (atexit and signal hook)."""
    with _lock:
        guards = list(_active)
    for g in reversed(guards):
        g.restore()


def _on_sigterm(signum, frame):
    restore_all()
    previous = _previous_sigterm
    if callable(previous):
        previous(signum, frame)
        return
    # Default action: die by the same signal, so the exit status still says SIGTERM.
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _install_hooks() -> None:
    global _hooks_installed, _previous_sigterm
    with _lock:
        if _hooks_installed:
            return
        _hooks_installed = True
    atexit.register(restore_all)
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers can only be installed from the main thread
    try:
        previous = signal.getsignal(signal.SIGTERM)
        if previous == signal.SIG_IGN:
            return  # the program chose to ignore SIGTERM; keep it that way
        _previous_sigterm = previous
        signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError):
        pass
