"""Put GPUs back at the power limits they had before an optimizer changed them.

Before its first change, a :class:`PowerLimitGuard` records each GPU's limit in memory and in a
small JSON state file. It restores them when asked (:meth:`PowerLimitGuard.restore`), at
interpreter exit (normal end, an uncaught exception or KeyboardInterrupt all pass through
``atexit``) and on SIGTERM (a handler restores, then hands the signal to whatever handler was
installed before). Nothing in a process survives SIGKILL or a power cut, which is what the state
file is for: ``zeus-nb restore`` (:func:`restore_from_state_files`) reads it in a fresh process and
sets the limits back.

The state files live in ``$ZEUS_NB_STATE_DIR``, else ``$XDG_CACHE_HOME/zeus-nb/power_limits``, else
``~/.cache/zeus-nb/power_limits``.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import json
import os
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from zeus_nb.errors import ZeusNbError

STATE_DIR_ENV = "ZEUS_NB_STATE_DIR"
_FORMAT = "zeus-nb power-limit state"

_active: list[PowerLimitGuard] = []
_lock = threading.RLock()
_hooks_installed = False
_previous_sigterm = None
_counter = itertools.count()


def state_dir() -> Path:
    """Folder of the state files (not created here)."""
    env = os.environ.get(STATE_DIR_ENV)
    if env:
        return Path(env).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "zeus-nb" / "power_limits"


class PowerLimitGuard:
    """Remembers the original limits of some GPUs and restores them exactly once per change.

    Args:
        gpus: device-layer GPU objects whose limits will be changed.
        backend: the GPU system's backend name, so ``zeus-nb restore`` can reopen the GPUs.
        persist: write a state file (off for GPUs that do not outlive the process, e.g. replays).
    """

    def __init__(self, gpus, backend: str = "auto", persist: bool = True):
        self.gpus = list(gpus)
        self.backend = backend
        self.persist = persist
        self.originals: dict[int, float] | None = None
        self.path: Path | None = None

    @property
    def armed(self) -> bool:
        return self.originals is not None

    def record(self) -> None:
        """Record the current limits (once, before the first change) and arm the restore hooks."""
        if self.originals is not None:
            return
        self.originals = {g.index: self._original_of(g) for g in self.gpus}
        if self.persist:
            self.path = self._write_state()
        with _lock:
            _active.append(self)
        _install_hooks()

    @staticmethod
    def _original_of(gpu) -> float:
        """The GPU's limit, or what an earlier live guard recorded for it (a re-run cell)."""
        with _lock:
            for guard in _active:
                for g in guard.gpus:
                    if g is gpu and guard.originals is not None:
                        return guard.originals[g.index]
        return float(gpu.get_power_limit())

    def _write_state(self) -> Path | None:
        folder = state_dir()
        state = {
            "format": _FORMAT,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "created": time.time(),
            "backend": self.backend,
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "gpus": [
                {"index": g.index, "name": g.name, "power_limit": self.originals[g.index]}
                for g in self.gpus
            ],
        }
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{socket.gethostname()}-{os.getpid()}-{next(_counter)}.json"
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(state, indent=1))
            os.replace(tmp, path)
            return path
        except OSError as e:
            print(
                f"zeus-nb: could not write the power-limit state file in {folder} ({e}); "
                f"set {STATE_DIR_ENV} to a writable folder so `zeus-nb restore` can help after "
                "a crash",
                file=sys.stderr,
            )
            return None

    def restore(self) -> None:
        """Set every GPU back to its recorded limit and forget the record."""
        with _lock:
            if self.originals is None:
                return
            originals, self.originals = self.originals, None
            if self in _active:
                _active.remove(self)
        failed = []
        for g in self.gpus:
            try:
                if g.get_power_limit() != originals[g.index]:
                    g.set_power_limit(originals[g.index])
            except Exception as e:  # keep restoring the other GPUs
                failed.append(f"GPU {g.index}: {e}")
        if self.path is not None and not failed:
            with contextlib.suppress(OSError):
                self.path.unlink()
        self.path = None if not failed else self.path
        if failed:
            print(
                "zeus-nb: could not restore power limits ("
                + "; ".join(failed)
                + "); run `zeus-nb restore` as root",
                file=sys.stderr,
            )


@contextlib.contextmanager
def power_limits_restored(gpus, backend: str = "auto", persist: bool = True):
    """Change power limits freely inside the block; each GPU gets its original limit back after it.

    The restore also happens on errors, Ctrl-C and SIGTERM, and the state file lets
    ``zeus-nb restore`` finish the job after a crash. Yields the :class:`PowerLimitGuard`.
    """
    guard = PowerLimitGuard(gpus, backend=backend, persist=persist)
    guard.record()
    try:
        yield guard
    finally:
        guard.restore()


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


# --- after a crash ------------------------------------------------------------------------------
@dataclass
class RestoreResult:
    path: Path
    action: str  # "restored", "skipped", "failed"
    detail: str


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read_state(path: Path) -> dict:
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ZeusNbError(f"{path}: not a readable power-limit state file ({e})") from None
    if not isinstance(state, dict) or state.get("format") != _FORMAT:
        raise ZeusNbError(f"{path}: not a zeus-nb power-limit state file")
    return state


def restore_from_state_files(
    folder: str | Path | None = None, force: bool = False
) -> list[RestoreResult]:
    """Restore the limits recorded by processes that died without restoring them.

    Files of processes still running on this host are skipped unless ``force``; files written
    on other hosts (a shared home folder) are always left alone.
    """
    from zeus_nb import device

    folder = Path(folder) if folder is not None else state_dir()
    results: list[RestoreResult] = []
    host = socket.gethostname()
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            state = _read_state(path)
        except ZeusNbError as e:
            results.append(RestoreResult(path, "failed", str(e)))
            continue
        pid = int(state.get("pid", -1))
        if state.get("host") != host:
            results.append(RestoreResult(path, "skipped", f"written on host {state.get('host')}"))
            continue
        if pid != os.getpid() and _pid_alive(pid) and not force:
            results.append(
                RestoreResult(
                    path,
                    "skipped",
                    f"process {pid} is still running (it restores its GPUs itself; "
                    "pass --force to restore now)",
                )
            )
            continue
        saved_env = os.environ.get("CUDA_VISIBLE_DEVICES")
        try:
            cvd = state.get("cuda_visible_devices")
            if cvd is None:
                os.environ.pop("CUDA_VISIBLE_DEVICES", None)
            else:
                os.environ["CUDA_VISIBLE_DEVICES"] = cvd
            device.reset()
            system = device.current(state.get("backend") or "auto")
            done = []
            for entry in state["gpus"]:
                gpu = system.gpu(int(entry["index"]))
                gpu.set_power_limit(float(entry["power_limit"]))
                done.append(f"GPU {entry['index']} -> {float(entry['power_limit']):g} W")
            path.unlink()
            results.append(RestoreResult(path, "restored", ", ".join(done)))
        except (ZeusNbError, ValueError, KeyError, TypeError) as e:
            results.append(RestoreResult(path, "failed", str(e)))
        finally:
            if saved_env is None:
                os.environ.pop("CUDA_VISIBLE_DEVICES", None)
            else:
                os.environ["CUDA_VISIBLE_DEVICES"] = saved_env
            device.reset()
    return results
