"""The device layer: which GPUs this process has, real (NVML) or simulated.

One :class:`~zeus_nb.device.base.GPUSystem` is *current* per process. Everything else in zeus-nb
asks :func:`current` for it and never checks which backend it got.

Backend choice, highest priority first: the ``backend`` argument, the ``ZEUS_NB_BACKEND``
environment variable (``sim``, ``nvml`` or ``auto``), then ``auto``: NVML if it initializes, else
the simulated GPU with a one-line notice (a ``logging`` warning). A replayed profiling log
(:mod:`zeus_nb.device.replay`) is a backend too: :func:`use_replay` makes one current, or pass
its system to ``ZeusMonitor(system=...)``. The simulated GPU reads its settings from
``ZEUS_NB_SIM_GPU`` (``a40``, ``v100`` or a power-trace CSV), ``ZEUS_NB_SIM_WORKLOAD``,
``ZEUS_NB_SIM_BATCH_SIZE``, ``ZEUS_NB_SIM_GPUS`` (default: ``LOCAL_WORLD_SIZE`` under torchrun,
else as many as the code asks for), ``ZEUS_NB_SIM_NOISE``, ``ZEUS_NB_SIM_SEED``,
``ZEUS_NB_SIM_CLOCK`` (``virtual`` or ``wall``), ``ZEUS_NB_SIM_CPU_TDP`` and ``ZEUS_NB_SIM_DRAM_GB``
(the simulated CPU), ``ZEUS_NB_SIM_RANK_SPREAD`` (relative spread of step time and power between
the ranks of a ``torchrun`` job, each rank reading its ``RANK``) and ``ZEUS_NB_SIM_STRAGGLER``
(``RANK:FACTOR``, one slower rank); :func:`use_simulated` sets them in code.

Every system is Zeus's ``GPUs`` and its GPUs are Zeus's ``GPU`` (:mod:`zeus_nb.device.base`), so
Zeus's device API is this layer itself: :func:`get_gpus` (:mod:`zeus_nb.device.gpu`, mW and mJ as
in Zeus) returns the current system, :func:`get_cpus` (:mod:`zeus_nb.device.cpu`) its CPU
packages and :func:`get_soc` (:mod:`zeus_nb.device.soc`); they load on first use.
"""

from __future__ import annotations

import logging
from pathlib import Path

from zeus_nb.device.base import FROM_ENV, GPU, GPUSystem, PowerSampler, PowerTimeline
from zeus_nb.errors import InputError, NoGPUError, TraceFormatError
from zeus_nb.inputs import validate
from zeus_nb.inputs.env import env

__all__ = [
    "GPU",
    "GPUSystem",
    "PowerSampler",
    "PowerTimeline",
    "create",
    "current",
    "get_cpus",
    "get_gpus",
    "get_soc",
    "peek",
    "reset",
    "resolve_backend",
    "step",
    "use_replay",
    "use_simulated",
]

log = logging.getLogger(__name__)

BACKENDS = ("auto", "sim", "nvml")
_current: GPUSystem | None = None
# Whether code chose the current system (use_simulated, use_replay): the environment's
# ZEUS_NB_BACKEND then no longer replaces it, only an explicit backend argument does.
_chosen_in_code = False

# Zeus's device API: name -> module that defines it, imported on first use.
_ZEUS_API = {
    "get_gpus": "zeus_nb.device.gpu",
    "get_cpus": "zeus_nb.device.cpu",
    "get_soc": "zeus_nb.device.soc",
}


def __getattr__(name: str):
    if name in _ZEUS_API:
        import importlib

        return getattr(importlib.import_module(_ZEUS_API[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def resolve_backend(backend: str | None = None) -> str:
    """The backend name asked for by argument or environment (may be ``auto``).

    An argument of ``auto`` (a notebook's default parameter) states no preference, so the
    environment still decides.
    """
    if backend is not None and backend.strip().lower() == "auto":
        backend = None
    name = (backend or env("ZEUS_NB_BACKEND") or "auto").strip().lower()
    if name in ("simulated", "simulation"):
        name = "sim"
    if name not in BACKENDS:
        raise InputError(f"unknown backend {name!r}; use one of: {', '.join(BACKENDS)}")
    return name


_SIM_VARS = (
    "ZEUS_NB_SIM_GPU",
    "ZEUS_NB_SIM_WORKLOAD",
    "ZEUS_NB_SIM_BATCH_SIZE",
    "ZEUS_NB_SIM_CLOCK",
    "ZEUS_NB_SIM_STRAGGLER",
)


def _sim_from_env(seed_offset: int = 0):
    """A simulated system configured by the ``ZEUS_NB_SIM_*`` variables, each one checked."""
    from zeus_nb.device.sim import SimulatedSystem

    # every variable is declared and checked in zeus_nb.inputs.env
    fixed = env("ZEUS_NB_SIM_GPUS", env("LOCAL_WORLD_SIZE"))
    settings = dict(
        batch_size=env("ZEUS_NB_SIM_BATCH_SIZE"),
        num_gpus=fixed or 1,
        noise=env("ZEUS_NB_SIM_NOISE", 0.0),
        seed=env("ZEUS_NB_SIM_SEED", 0) + seed_offset,
        clock=env("ZEUS_NB_SIM_CLOCK", "virtual"),
        grow=fixed is None,
        cpu_tdp=env("ZEUS_NB_SIM_CPU_TDP"),
        dram_gb=env("ZEUS_NB_SIM_DRAM_GB"),
        rank=env("RANK", 0),
        rank_spread=env("ZEUS_NB_SIM_RANK_SPREAD", 0.0),
        straggler=env("ZEUS_NB_SIM_STRAGGLER"),
    )
    gpu = env("ZEUS_NB_SIM_GPU", "a40")
    workload = env("ZEUS_NB_SIM_WORKLOAD", "imagenet")
    try:
        return SimulatedSystem(gpu=gpu, workload=workload, **settings)
    except TraceFormatError:
        raise  # a bad trace file: its message names the file, line and column
    except ValueError as e:
        given = ", ".join(f"{v}={env(v)!r}" for v in _SIM_VARS if env(v) is not None)
        raise InputError(
            f"{e} (simulated GPU from the environment: {given or 'defaults'}); fix or unset "
            + ", ".join(_SIM_VARS)
        ) from None


def create(
    backend: str | None = None,
    *,
    seed_offset: int = 0,
    cuda_visible_devices: str | None = FROM_ENV,
) -> GPUSystem:
    """A new GPU system for ``backend`` (chosen as :func:`current` does), not made current.

    ``seed_offset`` is added to a simulated system's noise seed (``ZEUS_NB_SIM_SEED``), so that
    e.g. each rank of a data-parallel job draws its own noise, as real GPUs would differ.
    ``cuda_visible_devices`` numbers real GPUs as another process saw them (``zeus-nb restore``
    passes the crashed process's value); default: this process's environment.
    """
    name = resolve_backend(backend)
    if name == "sim":
        return _sim_from_env(seed_offset)
    from zeus_nb.device.gpu.nvidia import NVIDIAGPUs

    if name == "nvml":
        return NVIDIAGPUs(cuda_visible_devices=cuda_visible_devices)
    try:
        return NVIDIAGPUs(cuda_visible_devices=cuda_visible_devices)
    except (NoGPUError, ImportError) as e:
        reason = str(e).split(";")[0]
        log.warning("%s; using the simulated GPU backend", reason)
        return _sim_from_env(seed_offset)


def _make_current(system: GPUSystem, in_code: bool = False) -> GPUSystem:
    """``system`` as the process's current one; the one it replaces is marked so that a
    monitor still bound to it fails instead of measuring nothing."""
    global _current, _chosen_in_code
    if _current is not None and _current is not system:
        _current.retire(system)
    _current, _chosen_in_code = system, in_code
    return system


def current(backend: str | None = None) -> GPUSystem:
    """The process's GPU system, created on first use.

    Asking for a backend other than the current one's replaces it (``auto`` keeps any); the
    environment's ``ZEUS_NB_BACKEND`` does not replace a system that code made current (a
    notebook part that runs on a simulated GPU because the real one may not be changed).
    """
    global _current
    if backend is None and _current is not None and _chosen_in_code:
        return _current
    name = resolve_backend(backend)
    if _current is None or name not in ("auto", _current.backend):
        _make_current(create(name))
        log.debug("GPU backend: %s, %d GPU(s)", _current.backend, len(_current.gpus))
    return _current


def use_simulated(
    gpu: str | Path = "a40",
    workload: str = "imagenet",
    batch_size: int | None = None,
    num_gpus: int | None = None,
    noise: float = 0.0,
    seed: int = 0,
    num_samples: int | None = None,
    clock: str | None = None,
    cpu_tdp: float | None = None,
    dram_gb: float | None = None,
    rank: int = 0,
    rank_spread: float = 0.0,
    straggler: tuple[int, float] | str | None = None,
):
    """Make a freshly configured simulated GPU system current and return it.

    ``num_gpus=None`` starts with one GPU and adds more when code asks for a higher index.
    ``clock``: ``"virtual"`` (default, or ``ZEUS_NB_SIM_CLOCK``) advances on ``zeus_nb.step()``;
    ``"wall"`` follows real time. ``cpu_tdp``/``dram_gb`` size the simulated CPU. ``rank``,
    ``rank_spread`` and ``straggler`` make this rank's GPUs differ from other ranks' (see
    :func:`zeus_nb.device.sim.rank_factors`).
    """
    global _current
    from zeus_nb.device.sim import SimulatedSystem

    if cpu_tdp is None:
        cpu_tdp = env("ZEUS_NB_SIM_CPU_TDP")
    if dram_gb is None:
        dram_gb = env("ZEUS_NB_SIM_DRAM_GB")
    return _make_current(
        SimulatedSystem(
            gpu,
            workload,
            batch_size,
            num_gpus or 1,
            noise,
            seed,
            num_samples,
            clock=clock or env("ZEUS_NB_SIM_CLOCK") or "virtual",
            grow=num_gpus is None,
            cpu_tdp=cpu_tdp,
            dram_gb=dram_gb,
            rank=rank,
            rank_spread=rank_spread,
            straggler=straggler,
        ),
        in_code=True,
    )


def use_replay(log, steps_per_window: int = 40, gpu_name: str | None = None):
    """Make the GPUs of a replayed ZeusMonitor log current and return their system.

    See :class:`zeus_nb.device.replay.ReplaySystem`; ``zeus_nb.step()`` then advances the replay.
    """
    global _current
    from zeus_nb.device.replay import ReplaySystem

    return _make_current(ReplaySystem(log, steps_per_window, gpu_name), in_code=True)


def step(n: int = 1, batch_size: int | None = None) -> None:
    """Call once per training step: advances simulated GPUs, does nothing on real ones.

    ``n`` (steps) and ``batch_size`` are checked on every backend: a NaN or a fraction is an
    error here rather than a NaN energy in every later window.
    """
    n, batch_size = validate.step_count(n, batch_size)
    current().step(n, batch_size)


def peek() -> GPUSystem | None:
    """The current system, or None before one was created (creates nothing)."""
    return _current


def reset() -> None:
    """Forget the current system (tests, or to pick a backend again)."""
    global _current, _chosen_in_code
    _current, _chosen_in_code = None, False
