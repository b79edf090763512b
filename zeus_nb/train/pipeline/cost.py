"""What a pipeline instruction is to a simulated GPU: a unit of work of the frequency model.

The simulated GPU knows measured training steps, not FLOPs, so an instruction is priced relative
to a step it has measured. The reference is the traced ImageNet/ResNet-50 workload at batch size
256: the calibrated frequency model (:mod:`zeus_nb.device.frequency`) gives the step's work at the
maximum clock (epoch time over steps per epoch), which
:func:`zeus_nb.optimizer.pipeline_frequency.split_step` splits into a forward and a backward (the
same split the planner's synthetic profiles use: backward does twice the forward's arithmetic and
is more compute-bound). ``torch.utils.flop_counter`` counts the FLOPs of that step's forward and
backward (ResNet-50, 224 px, meta tensors), so an instruction of ``F`` FLOPs is the reference
instruction scaled by ``F / F_ref``: same compute-bound share and dynamic power, proportional
time. Its time and power at each SM clock then follow the frequency model.
"""

from __future__ import annotations

import functools

from zeus_nb.data.traces import get_workload
from zeus_nb.device.frequency import Work, calibrate
from zeus_nb.errors import InputError
from zeus_nb.utils.diskcache import cached

REFERENCE_WORKLOAD = ("imagenet", 256)
INSTRUCTIONS = ("forward", "backward")


@functools.cache
def reference_flops(batch_size: int) -> dict[str, float]:
    """FLOPs of one ResNet-50 training step's forward and backward at 224 px.

    Counted once per torch/torchvision version and kept on disk (:mod:`zeus_nb.utils.diskcache`):
    every pipeline rank needs it at start-up.
    """
    from importlib.metadata import version

    import torch

    key = {"batch_size": batch_size, "torch": torch.__version__, "vision": version("torchvision")}
    return cached(
        "resnet50-flops",
        key,
        lambda: _count_reference_flops(batch_size),
        valid=lambda v: (
            isinstance(v, dict)
            and set(v) == set(INSTRUCTIONS)
            and all(isinstance(x, float) and x > 0 for x in v.values())
        ),
    )


def _count_reference_flops(batch_size: int) -> dict[str, float]:
    import torch
    import torchvision
    from torch.utils.flop_counter import FlopCounterMode

    with torch.device("meta"):
        model = torchvision.models.resnet50()
        x = torch.randn(batch_size, 3, 224, 224)
    with FlopCounterMode(display=False) as counter:
        out = model(x)
    forward = float(counter.get_total_flops())
    with FlopCounterMode(display=False) as counter:
        out.sum().backward()
    return {"forward": forward, "backward": float(counter.get_total_flops())}


class InstructionWork:
    """Turns an instruction's FLOPs into frequency-model work for a bundled simulated GPU."""

    def __init__(self, gpu: str = "a40"):
        from zeus_nb.optimizer.pipeline_frequency import split_step

        dataset, batch_size = REFERENCE_WORKLOAD
        curves = [w for key, w in calibrate(gpu).curves.items() if key[:2] == REFERENCE_WORKLOAD]
        if not curves:
            raise InputError(f"the {gpu} trace has no {dataset} curve at batch size {batch_size}")
        epoch = curves[0]
        steps = get_workload(dataset).steps_per_epoch(batch_size)
        step = Work(epoch.time_at_max / steps, epoch.compute_share, epoch.dynamic_power)
        self._work = Work
        self.reference = dict(zip(INSTRUCTIONS, split_step(step), strict=True))
        self.reference_flops = reference_flops(batch_size)

    def work(self, instruction: str, flops: float):
        """The :class:`~zeus_nb.device.frequency.Work` of ``instruction`` doing ``flops``."""
        ref = self.reference[instruction]
        # a stage of table lookups only (an embedding) counts no FLOPs; give it one
        scale = max(float(flops), 1.0) / self.reference_flops[instruction]
        return self._work(ref.time_at_max * scale, ref.compute_share, ref.dynamic_power)


def work_model_for(system) -> InstructionWork | None:
    """The instruction work model of a simulated system; None for real GPUs."""
    if getattr(system, "backend", None) != "sim":
        return None
    source = str(getattr(system, "source", "a40")).lower()
    if source not in ("a40", "v100"):
        raise InputError(
            f"pipeline simulation needs a bundled GPU's frequency model (a40 or v100), not "
            f"{source!r}; set ZEUS_NB_SIM_GPU=a40 or v100"
        )
    return InstructionWork(source)
