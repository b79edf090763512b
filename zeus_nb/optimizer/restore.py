"""Moved to :mod:`zeus_nb.device.guard`; these names stay importable from here."""

from zeus_nb.device.guard import (
    STATE_DIR_ENV,
    PowerLimitGuard,
    RestoreResult,
    SettingsGuard,
    power_limits_restored,
    restore_all,
    restore_from_state_files,
    state_dir,
)

__all__ = [
    "STATE_DIR_ENV",
    "PowerLimitGuard",
    "RestoreResult",
    "SettingsGuard",
    "power_limits_restored",
    "restore_all",
    "restore_from_state_files",
    "state_dir",
]
