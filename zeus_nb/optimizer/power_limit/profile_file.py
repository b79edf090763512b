"""The JSON profile a power-limit optimizer saves, and reloads instead of profiling again.

A profile is tied to a GPU model, its power-limit range and the stride between limits: loading one
made elsewhere would choose among limits these GPUs do not have, so it is refused with a
:class:`ProfileError` that says what to do.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from zeus_nb.errors import ZeusNbError
from zeus_nb.optimizer.power_limit.selectors import PowerLimitMeasurement

__all__ = ["PROFILE_FORMAT", "ProfileError", "ProfileKey", "load_profile", "save_profile"]

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


def load_profile(path: Path, key: ProfileKey) -> tuple[list[PowerLimitMeasurement], str | None]:
    """(measurements, the selector repr it was pruned for or None) of a profile matching ``key``."""
    try:
        data = json.loads(path.read_text())
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
