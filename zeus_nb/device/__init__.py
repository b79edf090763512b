"""The device layer: which GPUs this process has, real (NVML) or simulated.

One :class:`~zeus_nb.device.base.GPUSystem` is *current* per process. Everything else in zeus-nb
asks :func:`current` for it and never checks which backend it got.

Backend choice, highest priority first: the ``backend`` argument, the ``ZEUS_NB_BACKEND``
environment variable (``sim``, ``nvml`` or ``auto``), then ``auto``: NVML if it initializes, else
the simulated GPU with a one-line notice. The simulated GPU reads its settings from
``ZEUS_NB_SIM_GPU`` (``a40``, ``v100`` or a power-trace CSV), ``ZEUS_NB_SIM_WORKLOAD``,
``ZEUS_NB_SIM_BATCH_SIZE``, ``ZEUS_NB_SIM_GPUS`` (default: ``LOCAL_WORLD_SIZE`` under torchrun,
else 1), ``ZEUS_NB_SIM_NOISE`` and ``ZEUS_NB_SIM_SEED``; :func:`use_simulated` sets them in code.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from zeus_nb.device.base import GPU, GPUSystem, PowerSampler, PowerTimeline
from zeus_nb.errors import NoGPUError

__all__ = [
    "GPU",
    "GPUSystem",
    "PowerSampler",
    "PowerTimeline",
    "create",
    "current",
    "reset",
    "resolve_backend",
    "step",
    "use_simulated",
]

BACKENDS = ("auto", "sim", "nvml")
_current: GPUSystem | None = None


def resolve_backend(backend: str | None = None) -> str:
    """The backend name asked for by argument or environment (may be ``auto``).

    An argument of ``auto`` (a notebook's default parameter) states no preference, so the
    environment still decides.
    """
    if backend is not None and backend.strip().lower() == "auto":
        backend = None
    name = (backend or os.environ.get("ZEUS_NB_BACKEND") or "auto").strip().lower()
    if name in ("simulated", "simulation"):
        name = "sim"
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; use one of: {', '.join(BACKENDS)}")
    return name


def _env_int(name: str, default: int | None) -> int | None:
    value = os.environ.get(name)
    if value in (None, ""):
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name}={value!r} is not an integer") from None


def _sim_from_env(seed_offset: int = 0):
    from zeus_nb.device.sim import SimulatedSystem

    return SimulatedSystem(
        gpu=os.environ.get("ZEUS_NB_SIM_GPU", "a40"),
        workload=os.environ.get("ZEUS_NB_SIM_WORKLOAD", "imagenet"),
        batch_size=_env_int("ZEUS_NB_SIM_BATCH_SIZE", None),
        num_gpus=_env_int("ZEUS_NB_SIM_GPUS", _env_int("LOCAL_WORLD_SIZE", 1)) or 1,
        noise=float(os.environ.get("ZEUS_NB_SIM_NOISE", "0") or 0),
        seed=(_env_int("ZEUS_NB_SIM_SEED", 0) or 0) + seed_offset,
    )


def create(backend: str | None = None, *, seed_offset: int = 0) -> GPUSystem:
    """A new GPU system for ``backend`` (chosen as :func:`current` does), not made current.

    ``seed_offset`` is added to a simulated system's noise seed (``ZEUS_NB_SIM_SEED``), so that
    e.g. each rank of a data-parallel job draws its own noise, as real GPUs would differ.
    """
    name = resolve_backend(backend)
    if name == "sim":
        return _sim_from_env(seed_offset)
    from zeus_nb.device.nvml import NvmlSystem

    if name == "nvml":
        return NvmlSystem()
    try:
        return NvmlSystem()
    except (NoGPUError, ImportError) as e:
        reason = str(e).split(";")[0]
        print(f"zeus-nb: {reason}; using the simulated GPU backend", file=sys.stderr)
        return _sim_from_env(seed_offset)


def current(backend: str | None = None) -> GPUSystem:
    """The process's GPU system, created on first use.

    Asking for a backend other than the current one's replaces it (``auto`` keeps any).
    """
    global _current
    name = resolve_backend(backend)
    if _current is not None and name in ("auto", _current.backend):
        return _current
    _current = create(name)
    return _current


def use_simulated(
    gpu: str | Path = "a40",
    workload: str = "imagenet",
    batch_size: int | None = None,
    num_gpus: int = 1,
    noise: float = 0.0,
    seed: int = 0,
    num_samples: int | None = None,
):
    """Make a freshly configured simulated GPU system current and return it."""
    global _current
    from zeus_nb.device.sim import SimulatedSystem

    _current = SimulatedSystem(gpu, workload, batch_size, num_gpus, noise, seed, num_samples)
    return _current


def step(n: int = 1, batch_size: int | None = None) -> None:
    """Call once per training step: advances simulated GPUs, does nothing on real ones."""
    current().step(n, batch_size)


def reset() -> None:
    """Forget the current system (tests, or to pick a backend again)."""
    global _current
    _current = None
