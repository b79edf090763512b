"""What a pipeline instruction costs on a simulated GPU: seconds and watts at an SM clock.

The simulated GPU knows measured training steps, not FLOPs, so instructions are priced relative to
a step it has measured. The reference is the trace's ImageNet/ResNet-50 workload at batch size 256:
the calibrated frequency model (:mod:`zeus_nb.device.frequency`) gives its time per step at the
maximum clock, and ``torch.utils.flop_counter`` counts the FLOPs of that step (ResNet-50, 224 px,
forward and backward, counted on meta tensors). Their ratio is the GPU's effective FLOP rate for
training, and an instruction of ``F`` FLOPs takes ``F / rate`` seconds at the maximum clock. Its
compute-bound share and dynamic power are the reference workload's, so the instruction's time and
power at every other clock follow the frequency model. Blocking (waiting for a neighbour) costs
the model's blocking power.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod

REFERENCE_WORKLOAD = ("imagenet", 256)


class InstructionCostModel(ABC):
    """Time and power of an instruction of some FLOPs at an SM clock."""

    clocks: list[int]  # supported SM clocks in MHz, highest first

    @abstractmethod
    def cost(self, instruction: str, flops: float, clock: float) -> tuple[float, float]:
        """(seconds, watts) of ``instruction`` doing ``flops`` at ``clock`` MHz."""

    @abstractmethod
    def blocking_power(self) -> float:
        """Watts of the GPU while it waits for a neighbour stage."""


@functools.cache
def reference_step_flops(batch_size: int) -> float:
    """FLOPs of one ResNet-50 training step (forward and backward) at 224 px."""
    import torch
    import torchvision
    from torch.utils.flop_counter import FlopCounterMode

    with torch.device("meta"):
        model = torchvision.models.resnet50()
        x = torch.randn(1, 3, 224, 224)
    with FlopCounterMode(display=False) as counter:
        model(x).sum().backward()
    return float(counter.get_total_flops()) * batch_size


class FrequencyCost(InstructionCostModel):
    """Instruction costs from the calibrated frequency model of a bundled GPU (a40, v100)."""

    def __init__(self, gpu: str = "a40"):
        from zeus_nb.device.frequency import Work, calibrate
        from zeus_nb.traces import get_workload

        self._work_cls = Work
        cal = calibrate(gpu)
        self.model = cal.model
        self.clocks = list(self.model.clocks)
        dataset, batch_size = REFERENCE_WORKLOAD
        matches = [w for key, w in cal.curves.items() if key[:2] == (dataset, batch_size)]
        if not matches:
            raise ValueError(f"the {gpu} trace has no {dataset} curve at batch size {batch_size}")
        self.reference = matches[0]  # per epoch
        steps = get_workload(dataset).steps_per_epoch(batch_size)
        step_time = self.reference.time_at_max / steps
        self.flops_per_second = reference_step_flops(batch_size) / step_time

    def work(self, instruction: str, flops: float):
        """The frequency model's :class:`Work` for one instruction."""
        # a stage of table lookups only (an embedding) counts no FLOPs; give it one
        seconds = max(float(flops), 1.0) / self.flops_per_second
        return self._work_cls(seconds, self.reference.compute_share, self.reference.dynamic_power)

    def cost(self, instruction: str, flops: float, clock: float) -> tuple[float, float]:
        w = self.work(instruction, flops)
        return self.model.time(w, clock), self.model.power(w, clock)

    def blocking_power(self) -> float:
        return self.model.blocking_power()


def cost_model_for(system) -> InstructionCostModel | None:
    """The instruction cost model of a simulated system; None for real GPUs."""
    if getattr(system, "backend", None) != "sim":
        return None
    source = str(getattr(system, "source", "a40")).lower()
    if source not in ("a40", "v100"):
        raise ValueError(
            f"pipeline simulation needs a bundled GPU's frequency model (a40 or v100), not "
            f"{source!r}; set ZEUS_NB_SIM_GPU=a40 or v100"
        )
    return FrequencyCost(source)
