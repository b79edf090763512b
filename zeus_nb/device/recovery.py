"""Restore GPU settings after a process died without restoring them (``zeus-nb restore``).

A :class:`~zeus_nb.device.guard.SettingsGuard` writes a state file before its first change;
a fresh process reads it here, checks every field, and writes each original value back through
the setting kind's writer. Each file is handled alone: a damaged one is reported, the others are
still restored.
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from zeus_nb import device
from zeus_nb.device.settings import FORMAT, LEGACY_FORMAT, SETTING_KINDS, _kind, state_dir
from zeus_nb.errors import ZeusNbError
from zeus_nb.inputs import check_record, read_json, reader
from zeus_nb.inputs.kinds import STATE_FILE, STATE_SETTING

log = logging.getLogger(__name__)


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


@reader(STATE_FILE, STATE_SETTING)
def read_state(path: Path) -> dict:
    """A state file as a checked dict with a ``settings`` list (format-1 files are converted).

    Read through :data:`~zeus_nb.inputs.kinds.STATE_FILE` and
    :data:`~zeus_nb.inputs.kinds.STATE_SETTING` (``pid`` a positive integer, each entry's
    ``gpu`` an index) and each setting kind's own check of ``original``, so a damaged file is a
    :class:`ZeusNbError` naming it and the field, never a wrong setting written to a GPU.
    """
    state = read_json(path, "GPU settings state file")
    if not isinstance(state, dict) or state.get("format") not in (FORMAT, LEGACY_FORMAT):
        raise ZeusNbError(f"{path}: not a zeus-nb GPU settings state file")
    fix = "restore that GPU by hand (nvidia-smi -pl) and delete the file"
    if state["format"] == LEGACY_FORMAT:
        gpus = state.get("gpus")
        if not isinstance(gpus, list) or not all(isinstance(g, dict) for g in gpus):
            raise ZeusNbError(f"{path}: 'gpus' is not a list of GPU entries; {fix}")
        state["settings"] = [
            {"gpu": g.get("index"), "kind": "power_limit", "original": g.get("power_limit")}
            for g in gpus
        ]
    state = dict(check_record(state, STATE_FILE, str(path)))
    settings = state.get("settings")
    if not isinstance(settings, list) or not all(isinstance(e, dict) for e in settings):
        raise ZeusNbError(f"{path}: 'settings' is not a list of entries; {fix}")
    for n, raw in enumerate(settings):
        where = f"{path}: settings[{n}]"
        entry = settings[n] = dict(check_record(raw, STATE_SETTING, where))
        kind = SETTING_KINDS.get(entry["kind"])
        if kind is not None and kind.check is not None:
            entry["original"] = kind.check(entry.get("original"), f"{where}.original")
    return state


def _restore_file(path: Path, state: dict) -> RestoreResult:
    system = device.create(
        state.get("backend") or "auto", cuda_visible_devices=state.get("cuda_visible_devices")
    )
    done = []
    for entry in state["settings"]:
        kind = _kind(str(entry["kind"]))
        kind.write(system.gpu(int(entry["gpu"])), entry["original"])
        done.append(f"GPU {entry['gpu']} {kind.name} -> {kind.describe(entry['original'])}")
    path.unlink()
    return RestoreResult(path, "restored", ", ".join(done))


def restore_from_state_files(
    folder: str | Path | None = None, force: bool = False
) -> list[RestoreResult]:
    """Restore the settings recorded by processes that died without restoring them.

    Files of processes still running on this host are skipped unless ``force``; files written
    on other hosts (a shared home folder) are always left alone. The process's own current GPU
    system is left as it is: each file gets a freshly opened one.
    """
    folder = Path(folder) if folder is not None else state_dir()
    results: list[RestoreResult] = []
    host = socket.gethostname()
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            results.append(_restore_one(path, host, force))
        except Exception as e:  # one damaged file must not keep the others unrestored
            log.debug("restoring from %s failed", path, exc_info=True)
            results.append(RestoreResult(path, "failed", f"{type(e).__name__}: {e}"))
    return results


def _restore_one(path: Path, host: str, force: bool) -> RestoreResult:
    try:
        state = read_state(path)
    except ZeusNbError as e:
        return RestoreResult(path, "failed", str(e))
    pid = state["pid"]
    if state.get("host") != host:
        return RestoreResult(path, "skipped", f"written on host {state.get('host')}")
    if pid != os.getpid() and _pid_alive(pid) and not force:
        return RestoreResult(
            path,
            "skipped",
            f"process {pid} is still running (it restores its GPUs itself; "
            "pass --force to restore now)",
        )
    try:
        return _restore_file(path, state)
    except (ZeusNbError, OSError, ValueError, KeyError, TypeError) as e:
        return RestoreResult(path, "failed", str(e))
