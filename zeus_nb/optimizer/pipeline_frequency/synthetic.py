"""A synthetic but fully derived instruction profile, from the simulated GPU's frequency model.

Lets the planner, tests, benchmark and notebook run without a live pipeline. Every number comes
from the calibrated model (:mod:`zeus_nb.device.frequency`) of one traced workload plus two stated
assumptions:

1. One microbatch's forward and backward on the whole model take one traced training step of the
   workload at its batch size (epoch time at max clock / steps per epoch).
2. Backward does twice the forward's arithmetic (the usual 2N vs 4N FLOPs per parameter of
   Kaplan et al., "Scaling Laws for Neural Language Models", 2020) and touches as much memory, so
   of the step's compute-bound time one third is forward, and its memory-bound time is split
   evenly. Backward therefore comes out more compute-bound than forward.

A stage's share of the model is ``weights[s] / sum(weights)`` (equal by default; unequal weights
make an unbalanced pipeline). Each instruction is profiled from the maximum clock down to the
clock at which it takes ``max_slowdown`` times as long (a planning range, not a measurement: an
instruction off the critical path never needs to stretch further than the slowest stage is
longer than it, so 1.5 covers stages down to two thirds of the slowest one), every
``clock_every``-th supported clock. Blocking power is the model's static power.
"""

from __future__ import annotations

from collections.abc import Sequence

from zeus_nb.data.traces import get_workload
from zeus_nb.device.frequency import Work, calibrate
from zeus_nb.errors import InputError
from zeus_nb.optimizer.pipeline_frequency.profile import InstructionProfile, Measurement


def split_step(step: Work) -> tuple[Work, Work]:
    """Forward and backward work of one step under the module's assumption 2."""
    compute = step.compute_share * step.time_at_max  # seconds scaling with 1/clock
    memory = step.time_at_max - compute
    f_c, b_c, f_m, b_m = compute / 3, 2 * compute / 3, memory / 2, memory / 2
    forward = Work(f_c + f_m, f_c / (f_c + f_m), step.dynamic_power)
    backward = Work(b_c + b_m, b_c / (b_c + b_m), step.dynamic_power)
    return forward, backward


def _profiled_clocks(model, work: Work, every: int, max_slowdown: float) -> list[int]:
    """Every ``every``-th clock from max down to where ``work`` takes ``max_slowdown`` x longer."""
    limit = model.time(work, model.f_max) * max_slowdown
    return [f for f in model.clocks[::every] if model.time(work, f) <= limit * (1 + 1e-12)]


def stage_works(
    gpu: str = "a40",
    stages: int = 4,
    weights: Sequence[float] | None = None,
    workload: str = "squad",
    batch_size: int | None = None,
) -> list[dict[str, Work]]:
    """Per stage, the ``{"forward": Work, "backward": Work}`` of one microbatch.

    What a simulated pipeline stage runs per instruction (``SimulatedSystem.run_work``), and what
    :func:`synthetic_profile` profiles; see the module docstring for the assumptions.
    """
    if stages < 1:
        raise InputError(f"stages must be >= 1, got {stages}")
    weights = [1.0] * stages if weights is None else [float(w) for w in weights]
    if len(weights) != stages or min(weights) <= 0:
        raise InputError(f"need {stages} positive stage weights, got {weights}")
    cal = calibrate(gpu)
    wl = get_workload(workload)
    curves = {bs: w for (ds, bs, _opt), w in cal.curves.items() if ds == wl.dataset}
    if not curves:
        raise InputError(f"the {gpu} trace has no {workload!r} measurements")
    bs = batch_size or max((b for b in curves if b <= wl.default_batch_size), default=min(curves))
    if bs not in curves:
        raise InputError(f"the {gpu} trace has no batch size {bs} for {workload}: {sorted(curves)}")
    epoch = curves[bs]
    step = Work(
        epoch.time_at_max / wl.steps_per_epoch(bs), epoch.compute_share, epoch.dynamic_power
    )
    halves = split_step(step)
    total = sum(weights)
    # Each stage has its own GPU: a smaller stage is shorter, not lower-powered.
    return [
        {
            name: Work(half.time_at_max * w / total, half.compute_share, half.dynamic_power)
            for name, half in zip(("forward", "backward"), halves, strict=True)
        }
        for w in weights
    ]


def synthetic_profile(
    gpu: str = "a40",
    stages: int = 4,
    weights: Sequence[float] | None = None,
    workload: str = "squad",
    batch_size: int | None = None,
    clock_every: int = 4,
    max_slowdown: float = 1.5,
) -> InstructionProfile:
    """Instruction profile of a ``stages``-stage pipeline on the simulated ``gpu``.

    Args:
        weights: relative size of each stage (default: equal).
        workload: traced workload whose calibrated model stands for the whole network.
        batch_size: microbatch size (a traced batch size; default: the workload's default,
            clipped to the trace).
        clock_every: profile every n-th supported clock (1: all of them).
        max_slowdown: lowest clock profiled: where an instruction takes this many times longer.
    """
    if max_slowdown < 1:
        raise InputError(f"max_slowdown must be >= 1, got {max_slowdown}")
    if clock_every < 1:
        raise InputError(f"clock_every must be >= 1, got {clock_every}")
    works = stage_works(gpu, stages, weights, workload, batch_size)
    model = calibrate(gpu).model
    measurements = {
        (s, name): [
            Measurement(f, model.time(work, f), model.energy(work, f))
            for f in _profiled_clocks(model, work, clock_every, max_slowdown)
        ]
        for s, per in enumerate(works)
        for name, work in per.items()
    }
    # A waiting GPU draws static power.
    blocking = {s: model.blocking_power() for s in range(stages)}
    wl = get_workload(workload)
    shown = ",".join(f"{w:g}" for w in (weights or [1.0] * stages))
    meta = [
        f"synthetic: gpu={gpu} workload={wl.dataset}/{wl.network} "
        f"microbatch_size={batch_size or 'default'} stage_weights={shown}"
    ]
    return InstructionProfile(measurements, blocking, meta)
