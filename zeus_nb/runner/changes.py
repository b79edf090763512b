"""The GPUs a notebook's cells that change power limits or clocks run on.

What reads a GPU (time, energy, power, the counter's behaviour) always runs on the GPU the
notebook measures. A cell that must *change* a limit or a clock needs a GPU this process may
change: the real one when NVML accepts its setters or zeusd changes them for it
(:mod:`zeus_nb.device.gpu.access`), and otherwise a simulated GPU of the measured model nearest
to the real one, with one line that says so and why. Each value a notebook records names the GPU
that produced it (:func:`zeus_nb.record`'s ``gpu``): ``real: ...``, ``zeusd: ...`` or
``simulated: ...``.
"""

from __future__ import annotations

from zeus_nb import device
from zeus_nb.data.traces import GPU_NAMES, load_power_trace
from zeus_nb.device.base import GPUSystem
from zeus_nb.device.gpu import access
from zeus_nb.runner.setup import show_notice

__all__ = ["gpu_source", "nearest_simulated", "settings_system"]


def gpu_source(system: GPUSystem) -> str:
    """How records name what ``system`` measured: ``real: <name>`` or ``simulated: <name>``
    (as :func:`zeus_nb.notebook_setup` names the notebook's GPU)."""
    return f"{'simulated' if system.backend == 'sim' else 'real'}: {system.gpus[0].name}"


def nearest_simulated(system: GPUSystem) -> str:
    """The simulated model (a bundled trace) whose highest power limit is nearest ``system``'s:
    the measured model whose limits and power come closest to the real GPU's."""
    high = max(g.power_limit_constraints()[1] for g in system.gpus)
    return min(GPU_NAMES, key=lambda k: abs(float(load_power_trace(k).power_limit.max()) - high))


def settings_system(
    system: GPUSystem,
    part: str,
    *,
    sim_workload: str = "imagenet",
    sim_noise: float = 0.0,
    seed: int = 0,
) -> tuple[GPUSystem, str]:
    """(the GPUs ``part`` runs on, how records name them), for cells that change settings.

    ``system`` itself where every GPU may be changed (by this process, or through zeusd: one
    line says so); otherwise a simulated system of :func:`nearest_simulated`, made current, with
    one line that says which part runs there and why. Asking costs one write of the limit each GPU
    already has (no change).
    """
    if system.backend == "sim":
        return system, gpu_source(system)
    found = [g.settings_access() for g in system.gpus]
    name = ", ".join(sorted({g.name for g in system.gpus}))
    if all(a.mode != access.READ_ONLY for a in found):
        zeusd = next((a for a in found if a.mode == access.ZEUSD), None)
        if zeusd is None:
            return system, gpu_source(system)
        show_notice(
            f"{part}: the {name}'s settings change {zeusd.why} (this process may not change them)"
        )
        source = f"zeusd: {name} ({zeusd.why})"
        return system, source
    model = nearest_simulated(system)
    sim = device.use_simulated(
        gpu=model, workload=sim_workload, num_gpus=len(system.gpus), noise=sim_noise, seed=seed
    )
    why = next(a.why for a in found if a.mode == access.READ_ONLY)
    show_notice(
        f"{part} runs on a simulated {GPU_NAMES[model]}, the measured model nearest to the {name}: "
        f"{why} (ZEUSD_SOCK_PATH or ZEUSD_HOST_PORT); what was measured before it ran on the "
        "real GPU"
    )
    source = f"simulated: {sim.gpus[0].name} (nearest measured model to the {name}, which this "
    source += "process may not change)"
    return sim, source
