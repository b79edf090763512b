"""The JSON profile a power-limit optimizer saves, and reloads instead of profiling again.

A profile is tied to a GPU model, its power-limit range and the stride between limits: loading one
made elsewhere would choose among limits these GPUs do not have, so it is refused with a
:class:`ProfileError` that says what to do.

Zeus's own profile, ``{"measurements": [{"power_limit": W, "energy": J, "time": s}, ...]}``, is
read too. It records no GPU model, so its limits are checked against these GPUs' range instead;
the optimizer then writes it back in this format (which records the model and limits), keeping
Zeus's file beside it as ``<name>.zeus<suffix>``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from zeus_nb.errors import ZeusNbError
from zeus_nb.optimizer.power_limit.selectors import PowerLimitMeasurement

__all__ = [
    "PROFILE_FORMAT",
    "ProfileError",
    "ProfileKey",
    "is_zeus_profile",
    "load_profile",
    "save_profile",
    "upgrade_zeus_profile",
]

PROFILE_FORMAT = "zeus-nb power-limit profile"


class ProfileError(ZeusNbError, ValueError):
    """A saved profile is corrupt, or was made on another GPU model or power-limit range."""


@dataclass(frozen=True)
class ProfileKey:
    """What a saved profile must match to be reused."""

    gpu_model: str
    min_limit: float
    max_limit: float
    pl_step: float

    def header(self) -> dict[str, Any]:
        return {
            "format": PROFILE_FORMAT,
            "version": 1,
            "gpu_model": self.gpu_model,
            "power_limit_constraints": [self.min_limit, self.max_limit],
            "pl_step": self.pl_step,
        }


def _is_zeus(data: Any) -> bool:
    return isinstance(data, dict) and "format" not in data and "measurements" in data


def is_zeus_profile(path: Path) -> bool:
    """Whether ``path`` holds Zeus's profile format rather than zeus-nb's."""
    try:
        return _is_zeus(json.loads(path.read_text()))
    except (OSError, ValueError):
        return False


def _zeus_watts(value: Any) -> float:
    """Zeus records W; a value above 10 kW can only be mW (its internal unit), so it is scaled."""
    w = float(value)
    return w / 1000.0 if w > 10_000 else w


def _load_zeus(path: Path, data: dict, key: ProfileKey) -> list[PowerLimitMeasurement]:
    try:
        measurements = [
            PowerLimitMeasurement(
                _zeus_watts(m["power_limit"]), float(m["energy"]), float(m["time"])
            )
            for m in data["measurements"]
        ]
        if not measurements:
            raise ValueError("it holds no measurements")
    except (ValueError, KeyError, TypeError) as e:
        raise ProfileError(
            f"Zeus power-limit profile {path} is unreadable ({e}); delete it to profile again"
        ) from None
    outside = [
        m.power_limit for m in measurements if not key.min_limit <= m.power_limit <= key.max_limit
    ]
    if outside:
        raise ProfileError(
            f"Zeus power-limit profile {path} holds {outside[0]:g} W, outside these GPUs' range "
            f"[{key.min_limit:g}, {key.max_limit:g}] W ({key.gpu_model}); it was made on other "
            "GPUs: use another profile_path or delete the file"
        )
    return measurements


def load_profile(path: Path, key: ProfileKey) -> tuple[list[PowerLimitMeasurement], str | None]:
    """(measurements, the selector repr it was pruned for or None) of a profile matching ``key``."""
    try:
        data = json.loads(path.read_text())
        if _is_zeus(data):
            return _load_zeus(path, data, key), None
        if not isinstance(data, dict) or data.get("format") != PROFILE_FORMAT:
            raise ValueError("not a zeus-nb power-limit profile")
        measurements = [
            PowerLimitMeasurement(
                float(m["power_limit"]),
                float(m["energy"]),
                float(m["time"]),
                int(m.get("num_gpus", 1)),
            )
            for m in data["measurements"]
        ]
        if not measurements:
            raise ValueError("it holds no measurements")
        model = data["gpu_model"]
        lo, hi = (float(x) for x in data["power_limit_constraints"])
        step = data["pl_step"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ProfileError(
            f"power-limit profile {path} is unreadable ({e}); delete it to profile again"
        ) from None
    if model != key.gpu_model or (lo, hi) != (key.min_limit, key.max_limit):
        raise ProfileError(
            f"power-limit profile {path} was made on {model} with limits [{lo:g}, {hi:g}] W, "
            f"but these GPUs are {key.gpu_model} with [{key.min_limit:g}, "
            f"{key.max_limit:g}] W; use another profile_path or delete the file"
        )
    if step != key.pl_step:
        raise ProfileError(
            f"power-limit profile {path} used pl_step={step}, not {key.pl_step}; "
            "pass the same pl_step or delete the file"
        )
    return measurements, data.get("pruned_for")


def save_profile(
    path: Path,
    key: ProfileKey,
    selector: object,
    optimal_power_limit: float | None,
    measurements: list[PowerLimitMeasurement],
    abandoned: dict[float, str],
) -> None:
    """Write the profile; ``pruned_for`` names the selector if adaptive profiling skipped limits."""
    data = key.header()
    data["selector"] = repr(selector)
    data["pruned_for"] = repr(selector) if abandoned else None
    data["optimal_power_limit"] = optimal_power_limit
    data["measurements"] = [asdict(m) for m in measurements]
    data["abandoned"] = {f"{k:g}": v for k, v in abandoned.items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1))


def upgrade_zeus_profile(
    path: Path,
    key: ProfileKey,
    selector: object,
    optimal_power_limit: float | None,
    measurements: list[PowerLimitMeasurement],
) -> Path:
    """Rewrite Zeus's profile at ``path`` in zeus-nb's format; returns where Zeus's file went."""
    original = path.with_name(f"{path.stem}.zeus{path.suffix}")
    if not original.exists():
        original.write_text(path.read_text())
    save_profile(path, key, selector, optimal_power_limit, measurements, {})
    return original
