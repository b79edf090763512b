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

import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from zeus_nb.errors import InputError, ZeusNbError
from zeus_nb.inputs import check_record, read_json, read_text, reader
from zeus_nb.inputs.kinds import PL_MEASUREMENT
from zeus_nb.inputs.registry import not_input
from zeus_nb.inputs.validate import POWER_LIMIT, number
from zeus_nb.optimizer.power_limit.selectors import PowerLimitMeasurement
from zeus_nb.utils.boundary import describe_os_error
from zeus_nb.utils.files import atomic_write, write_json

logger = logging.getLogger("zeus_nb.optimizer.power_limit.optimizer")  # the optimizer's lines

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


def _measurement(m: Any, where: str, lo: float, hi: float) -> PowerLimitMeasurement:
    """A saved measurement through :data:`~zeus_nb.inputs.kinds.PL_MEASUREMENT` (every number
    checked, energy / time a power a GPU can draw): a NaN or negative one would pick a wrong
    limit."""
    row = check_record(m, PL_MEASUREMENT, where)
    limit = row["power_limit"]
    if not lo <= limit <= hi:
        raise InputError(f"{where}.power_limit: {limit:g} W is outside [{lo:g}, {hi:g}] W")
    return PowerLimitMeasurement(limit, row["energy"], row["time"], row.get("num_gpus") or 1)


def _is_zeus(data: Any) -> bool:
    return isinstance(data, dict) and "format" not in data and "measurements" in data


@not_input(
    "a probe: any error means 'not Zeus's format', and load_profile then reads the "
    "file through its schema"
)
def is_zeus_profile(path: Path) -> bool:
    """Whether ``path`` holds Zeus's profile format rather than zeus-nb's."""
    try:
        return _is_zeus(read_json(path, "power-limit profile"))
    except (OSError, ValueError):
        return False


def _zeus_watts(value: Any) -> Any:
    """Zeus records W; a value above 10 kW can only be mW (its internal unit), so it is scaled."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 10_000:
        return value / 1000.0
    return value


def _load_zeus(path: Path, data: dict, key: ProfileKey) -> list[PowerLimitMeasurement]:
    """Zeus's ``{"measurements": [...]}``, every number checked as in zeus-nb's own format."""
    lo, hi = 0.0, float("inf")
    try:
        raw = data["measurements"]
        if not isinstance(raw, list) or not raw:
            raise InputError("it holds no measurements")
        measurements = []
        for i, m in enumerate(raw):
            if isinstance(m, dict):
                m = {**m, "power_limit": _zeus_watts(m.get("power_limit"))}
            measurements.append(_measurement(m, f"measurements[{i}]", lo, hi))
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


@reader(PL_MEASUREMENT)
def load_profile(path: Path, key: ProfileKey) -> tuple[list[PowerLimitMeasurement], str | None]:
    """(measurements, the selector repr it was pruned for or None) of a profile matching ``key``.

    Every number is checked (:mod:`zeus_nb.inputs.validate`); a damaged profile is refused with a
    :class:`ProfileError` naming the field, never applied.
    """
    try:
        data = read_json(path, "power-limit profile")
        if _is_zeus(data):
            return _load_zeus(path, data, key), None
        if not isinstance(data, dict) or data.get("format") != PROFILE_FORMAT:
            raise InputError("not a zeus-nb power-limit profile")
        model = data["gpu_model"]
        bounds = data["power_limit_constraints"]
        if not isinstance(bounds, list) or len(bounds) != 2:
            raise InputError("power_limit_constraints is not a [min, max] pair")
        lo, hi = (number(x, "power_limit_constraints", POWER_LIMIT, text_ok=False) for x in bounds)
        step = data["pl_step"]
        raw = data["measurements"]
        if not isinstance(raw, list) or not raw:
            raise InputError("it holds no measurements")
        measurements = [_measurement(m, f"measurements[{i}]", lo, hi) for i, m in enumerate(raw)]
        limits = [m.power_limit for m in measurements]
        if len(set(limits)) != len(limits):
            raise InputError("a power limit is measured twice")
        pruned = data.get("pruned_for")
        if pruned is not None and not isinstance(pruned, str):
            raise InputError("pruned_for is not a string")
    except ProfileError:
        raise
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
    return measurements, pruned


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
    write_json(path, data)


def save_profile_or_warn(
    path: Path,
    key: ProfileKey,
    selector: object,
    optimal_power_limit: float,
    measurements: list[PowerLimitMeasurement],
    abandoned: dict[float, str],
) -> None:
    """:func:`save_profile`, where a failure is a warning: the limit is already chosen and
    applied and the measurements stay in memory, so training goes on."""
    try:
        save_profile(path, key, selector, optimal_power_limit, measurements, abandoned)
    except OSError as e:
        logger.warning(
            "could not save the power-limit profile to %s (%s); training goes on at "
            "%g W, and the next run will profile again. Fix the path or free disk space",
            path,
            describe_os_error(e),
            optimal_power_limit,
        )


@not_input("copies Zeus's file, which load_profile read and checked, beside it byte for byte")
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
        atomic_write(original, read_text(path, "Zeus power-limit profile"))
    save_profile(path, key, selector, optimal_power_limit, measurements, {})
    return original


def load_for(
    path: Path, key: ProfileKey, selector
) -> tuple[list[PowerLimitMeasurement], float, str | None]:
    """(measurements, the selector's optimum in W, a note to log) of the profile at ``path``.

    A profile pruned by adaptive profiling for another selector loads with a warning; Zeus's
    format is written back in ours (the note says so).
    """
    import warnings

    measurements, pruned = load_profile(path, key)
    if pruned and pruned != repr(selector):
        warnings.warn(
            f"{path} was profiled adaptively for {pruned}; {selector!r} chooses among the "
            "limits it kept only",
            stacklevel=5,
        )
    optimal = float(selector.select(measurements))
    if not is_zeus_profile(path):
        return measurements, optimal, None
    try:  # Zeus's format: write it back in ours (model and limits)
        kept = upgrade_zeus_profile(path, key, selector, optimal, measurements)
    except OSError as e:
        logger.warning("could not rewrite %s in zeus-nb's format (%s)", path, e)
        return measurements, optimal, None
    return (
        measurements,
        optimal,
        f"read Zeus's profile {path}; rewrote it with the GPU model, kept {kept.name}",
    )
