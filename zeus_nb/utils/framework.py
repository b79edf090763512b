"""Which framework runs, and reductions over the ranks of a distributed job (Zeus's names).

Every reduction asks :func:`initialized_dist` whether ``torch.distributed`` is running and
otherwise returns the local values, so the same code serves a single-process notebook and a
torchrun job. Nothing imports torch at module level: a program that never imported torch is not
distributed with it, so the checks look in ``sys.modules`` instead of importing it (importing the
power-limit optimizer stays cheap). The training loop, the power-limit optimizer and the
batch-size client all reduce through here.
"""

from __future__ import annotations

import importlib
import logging
import sys
import types
from typing import Any, Literal

from zeus_nb.errors import InputError

logger = logging.getLogger(__name__)

# framework name -> its module, once found (Zeus's name for the same cache)
MODULE_CACHE: dict[str, types.ModuleType] = {}


def _framework(name: str, ensure_available: bool) -> types.ModuleType | None:
    if name not in MODULE_CACHE:
        try:
            MODULE_CACHE[name] = importlib.import_module(name)
        except ImportError as e:
            if ensure_available:
                raise RuntimeError(f"{name} is not installed: pip install {name}") from e
            return None
    return MODULE_CACHE[name]


def torch_is_available(ensure_available: bool = False, ensure_cuda: bool = True) -> bool:
    """Whether torch imports (and, with ``ensure_cuda``, sees CUDA; else a RuntimeError)."""
    torch = _framework("torch", ensure_available)
    if torch is None:
        return False
    if ensure_cuda and not torch.cuda.is_available():
        raise RuntimeError("PyTorch is installed without CUDA support (or sees no GPU)")
    return True


def jax_is_available(ensure_available: bool = False, ensure_cuda: bool = True) -> bool:
    """Whether jax imports (and, with ``ensure_cuda``, has GPU devices; else a RuntimeError)."""
    jax = _framework("jax", ensure_available)
    if jax is None:
        return False
    if ensure_cuda and not [d for d in jax.devices() if d.platform == "gpu"]:
        raise RuntimeError("JAX is installed without CUDA support (or sees no GPU)")
    return True


def cupy_is_available(ensure_available: bool = False) -> bool:
    """Whether cupy imports."""
    return _framework("cupy", ensure_available) is not None


def sync_execution(
    gpu_devices: list[int], sync_with: Literal["torch", "jax", "cupy"] = "torch"
) -> None:
    """Wait until queued GPU work on ``gpu_devices`` is done (a no-op without that framework)."""
    if sync_with == "torch":
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available():
            for i in gpu_devices:
                torch.cuda.synchronize(i)
    elif sync_with == "jax":
        jax = sys.modules.get("jax")
        if jax is not None:
            gpus = [d for d in jax.devices() if d.platform == "gpu"]
            for i in gpu_devices:
                if i < len(gpus):
                    jax.device_put(0.0, device=gpus[i]).block_until_ready()
    elif sync_with == "cupy":
        cupy = sys.modules.get("cupy")
        if cupy is not None:
            for i in gpu_devices:
                with cupy.cuda.Device(i):
                    cupy.cuda.Device(i).synchronize()
    else:
        raise InputError(f"sync_with={sync_with!r}: use 'torch', 'jax' or 'cupy'")


def initialized_dist():
    """``torch.distributed`` if the program initialized it, else None (never imports torch)."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist
    return None


def is_distributed() -> bool:
    """Whether this process is one rank of an initialized ``torch.distributed`` job."""
    return initialized_dist() is not None


def get_rank() -> int:
    """This process's rank, 0 when not distributed."""
    dist = initialized_dist()
    return 0 if dist is None else dist.get_rank()


def get_world_size() -> int:
    """The number of ranks, 1 when not distributed."""
    dist = initialized_dist()
    return 1 if dist is None else dist.get_world_size()


def _reduce_device(dist) -> str:
    """NCCL reduces CUDA tensors only (on this rank's current GPU); gloo reduces CPU tensors."""
    if dist.get_backend() == "nccl":
        import torch

        return f"cuda:{torch.cuda.current_device()}"
    return "cpu"


def all_reduce(
    object: list[int] | list[float], operation: Literal["sum", "max"]
) -> list[int] | list[float]:
    """Element-wise sum or max of ``object`` over all ranks; the list itself when not distributed.

    Integers stay integers (Zeus's call shape); the reduction itself runs in float64.
    """
    if operation not in ("sum", "max"):
        raise InputError(f"all_reduce operation {operation!r}: use 'sum' or 'max'")
    dist = initialized_dist()
    if dist is None:
        return object
    import torch

    t = torch.tensor(list(object), dtype=torch.float64, device=_reduce_device(dist))
    dist.all_reduce(t, op=dist.ReduceOp.SUM if operation == "sum" else dist.ReduceOp.MAX)
    values = t.tolist()
    if all(isinstance(v, int) for v in object):
        return [int(round(v)) for v in values]
    return values


def all_sum(values: list[float]) -> list[float]:
    """Element-wise sums of ``values`` over all ranks; the local values otherwise."""
    return [float(v) for v in all_reduce([float(v) for v in values], "sum")]


def gather(obj: Any) -> list[Any]:
    """Every rank's ``obj`` in rank order; ``[obj]`` otherwise."""
    dist = initialized_dist()
    if dist is None:
        return [obj]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def reduce_time_energy(time: float, energy: float, gpus: int) -> tuple[float, float, int]:
    """(max time, summed energy, summed GPU count) over all ranks; local values otherwise.

    The job's time is its slowest rank's, its energy is every GPU's together.
    """
    if initialized_dist() is None:
        return time, energy, gpus
    (slowest,) = all_reduce([float(time)], "max")
    total, count = all_reduce([float(energy), float(gpus)], "sum")
    return float(slowest), float(total), int(round(count))
