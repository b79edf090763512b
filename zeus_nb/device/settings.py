"""The kinds of GPU setting zeus-nb changes and restores, and where their state files live.

A :class:`SettingKind` says how to read and write one setting of a GPU (``power_limit``,
``locked_clocks``); :data:`SETTING_KINDS` is the registry that the settings guard
(:mod:`zeus_nb.device.guard`) and crash recovery (:mod:`zeus_nb.device.recovery`) both dispatch
on. The state files live in ``$ZEUS_NB_STATE_DIR``, else ``$XDG_CACHE_HOME/zeus-nb/power_limits``,
else ``~/.cache/zeus-nb/power_limits``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zeus_nb.errors import ZeusNbError
from zeus_nb.inputs import validate
from zeus_nb.inputs.env import env
from zeus_nb.inputs.registry import environ_read
from zeus_nb.inputs.validate import number

if TYPE_CHECKING:
    from zeus_nb.device.base import GPU

STATE_DIR_ENV = "ZEUS_NB_STATE_DIR"
FORMAT = "zeus-nb device settings"
LEGACY_FORMAT = "zeus-nb power-limit state"  # format 1: power limits only, still restored


@dataclass(frozen=True)
class SettingKind:
    """How to read and write back one kind of GPU setting. Values must be JSON-serializable."""

    name: str
    read: Callable[[GPU], Any]
    write: Callable[[GPU, Any], None]
    unit: str = ""
    # check(value, where) -> value: validates a value read back from a state file.
    check: Callable[[Any, str], Any] | None = None

    def describe(self, value: Any) -> str:
        return f"{value:g} {self.unit}".strip() if isinstance(value, float) else f"{value}"


def _set_power_limit(gpu: GPU, watts: Any) -> None:
    gpu.set_power_limit(float(watts))


def _check_power_limit(value: Any, where: str) -> float:
    fix = "restore that GPU by hand (nvidia-smi -pl)"
    return number(value, where, validate.POWER_LIMIT, fix, text_ok=False)


POWER_LIMIT = SettingKind(
    "power_limit",
    lambda g: float(g.get_power_limit()),
    _set_power_limit,
    "W",
    _check_power_limit,
)


def _read_locked_clocks(gpu: GPU) -> list[int] | None:
    locked = gpu.locked_clocks()
    return None if locked is None else [int(locked[0]), int(locked[1])]


def _write_locked_clocks(gpu: GPU, value: Any) -> None:
    """None: let the driver choose again; [min, max]: lock the SM clock to that range (MHz)."""
    if value is None:
        gpu.reset_locked_clocks()
    else:
        gpu.set_locked_clocks(int(value[0]), int(value[1]))


# Locked SM clocks (pipeline frequency plans): None means the driver chooses.
LOCKED_CLOCKS = SettingKind("locked_clocks", _read_locked_clocks, _write_locked_clocks, "MHz")
SETTING_KINDS: dict[str, SettingKind] = {
    POWER_LIMIT.name: POWER_LIMIT,
    LOCKED_CLOCKS.name: LOCKED_CLOCKS,
}


def register_setting_kind(kind: SettingKind) -> None:
    """Make ``kind`` guardable and restorable by ``zeus-nb restore`` (replaces a same-named one)."""
    SETTING_KINDS[kind.name] = kind


def _kind(name: str) -> SettingKind:
    try:
        return SETTING_KINDS[name]
    except KeyError:
        known = ", ".join(sorted(SETTING_KINDS))
        raise ZeusNbError(
            f"unknown GPU setting kind {name!r} (this zeus-nb knows: {known}); restore it with "
            "the zeus-nb version that wrote the state file"
        ) from None


@environ_read("XDG_CACHE_HOME, a standard folder variable")
def state_dir() -> Path:
    """Folder of the state files (not created here)."""
    folder = env(STATE_DIR_ENV)
    if folder:
        return Path(folder).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "zeus-nb" / "power_limits"
