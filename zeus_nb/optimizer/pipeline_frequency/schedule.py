"""The 1F1B schedule of one training iteration, frequency plans, and their timelines.

Under 1F1B (non-interleaved, as in PipeDream-flush and ``torch.distributed.pipelining``'s
``Schedule1F1B``) stage ``s`` of ``S`` first runs ``min(S - s - 1, M)`` warm-up forwards, then
alternates one forward and one backward, then drains the remaining backwards. An instruction waits
for the previous instruction of its stage and for its data: forward ``j`` on stage ``s`` needs
forward ``j`` of stage ``s - 1``; backward ``j`` on stage ``s`` needs backward ``j`` of ``s + 1``.
Communication time is not modelled (it is part of the blocking time).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass

from zeus_nb.errors import InputError
from zeus_nb.optimizer.pipeline_frequency.profile import InstructionProfile

Op = tuple[int, str, int]  # (stage, instruction, microbatch)


def stage_order(stage: int, stages: int, microbatches: int) -> list[tuple[str, int]]:
    """(instruction, microbatch) in the order stage ``stage`` runs them under 1F1B."""
    if not 0 <= stage < stages:
        raise InputError(f"stage {stage} is outside 0..{stages - 1}")
    if microbatches < 1:
        raise InputError(f"need at least one microbatch, got {microbatches}")
    warmup = min(stages - stage - 1, microbatches)
    order = [("forward", j) for j in range(warmup)]
    fwd, bwd = warmup, 0
    while bwd < microbatches:
        if fwd < microbatches:
            order.append(("forward", fwd))
            fwd += 1
        order.append(("backward", bwd))
        bwd += 1
    return order


@functools.lru_cache(maxsize=32)
def dependencies(stages: int, microbatches: int) -> dict[Op, tuple[Op, ...]]:
    """Each instruction's predecessors in the iteration's DAG, in a topological order.

    Cached: treat the returned mapping as read-only.
    """
    orders = {s: stage_order(s, stages, microbatches) for s in range(stages)}
    preds: dict[Op, tuple[Op, ...]] = {}
    for s, order in orders.items():
        prev = None
        for inst, j in order:
            op = (s, inst, j)
            p = [] if prev is None else [prev]
            if inst == "forward" and s > 0:
                p.append((s - 1, "forward", j))
            if inst == "backward" and s < stages - 1:
                p.append((s + 1, "backward", j))
            preds[op] = tuple(p)
            prev = op
    # Kahn's algorithm, so one pass over the result computes earliest starts
    waiting = {op: len(p) for op, p in preds.items()}
    succs: dict[Op, list[Op]] = {op: [] for op in preds}
    for op, p in preds.items():
        for q in p:
            succs[q].append(op)
    ready = [op for op, n in waiting.items() if n == 0]
    done: dict[Op, tuple[Op, ...]] = {}
    while ready:
        op = ready.pop()
        done[op] = preds[op]
        for nxt in succs[op]:
            waiting[nxt] -= 1
            if waiting[nxt] == 0:
                ready.append(nxt)
    if len(done) != len(preds):
        raise AssertionError("1F1B dependencies have a cycle")
    return done


@dataclass(frozen=True)
class FrequencyPlan:
    """The SM clock of every instruction: ``stages[s]`` lists (instruction, microbatch, MHz)
    in stage ``s``'s execution order."""

    stages: tuple[tuple[tuple[str, int, int], ...], ...]

    @property
    def num_stages(self) -> int:
        return len(self.stages)

    @property
    def num_microbatches(self) -> int:
        return sum(1 for inst, _, _ in self.stages[0] if inst == "forward")

    def frequencies(self, stage: int) -> list[int]:
        return [f for _, _, f in self.stages[stage]]

    def frequency(self, stage: int, instruction: str, microbatch: int) -> int:
        for inst, j, f in self.stages[stage]:
            if inst == instruction and j == microbatch:
                return f
        raise KeyError((stage, instruction, microbatch))

    def to_json(self) -> list[list[dict]]:
        return [
            [{"instruction": i, "microbatch": j, "frequency": f} for i, j, f in stage]
            for stage in self.stages
        ]

    @classmethod
    def from_json(cls, data: list[list[dict]] | str) -> FrequencyPlan:
        if isinstance(data, str):
            data = json.loads(data)
        return cls(
            tuple(
                tuple((str(d["instruction"]), int(d["microbatch"]), int(d["frequency"])) for d in s)
                for s in data
            )
        )

    @classmethod
    def from_choice(cls, stages: int, microbatches: int, choose) -> FrequencyPlan:
        """A plan whose clock for (stage, instruction, microbatch) is ``choose(op)``."""
        return cls(
            tuple(
                tuple(
                    (i, j, int(choose((s, i, j)))) for i, j in stage_order(s, stages, microbatches)
                )
                for s in range(stages)
            )
        )

    @classmethod
    def max_clock(cls, profile: InstructionProfile, microbatches: int) -> FrequencyPlan:
        """Every instruction at its fastest profiled clock."""
        return cls.from_choice(
            profile.num_stages, microbatches, lambda op: profile.fastest(op[0], op[1]).frequency
        )


@dataclass(frozen=True)
class Timeline:
    """Predicted execution of a plan: per instruction (start, end, MHz), and totals."""

    spans: dict[Op, tuple[float, float, int]]
    iteration_time: float
    energy: float
    critical_path: list[Op]

    def to_frame(self):
        import pandas as pd

        crit = set(self.critical_path)
        rows = [
            (s, i, j, a, b, f, op in crit)
            for op, (a, b, f) in self.spans.items()
            for s, i, j in [op]
        ]
        cols = ["stage", "instruction", "microbatch", "start", "end", "frequency", "critical"]
        return pd.DataFrame(rows, columns=cols).sort_values(["stage", "start"], ignore_index=True)


def evaluate(plan: FrequencyPlan, profile: InstructionProfile) -> Timeline:
    """Run ``plan`` on paper: earliest-start schedule, iteration time, energy, critical path.

    Energy is every instruction's profiled energy plus, for each stage, its blocking power times
    the time it is not computing during the iteration.
    """
    stages, mbs = plan.num_stages, plan.num_microbatches
    profile.check_stages(stages)
    deps = dependencies(stages, mbs)
    clocks = {(s, i, j): f for s, stage in enumerate(plan.stages) for i, j, f in stage}
    spans: dict[Op, tuple[float, float, int]] = {}
    busy = [0.0] * stages
    energy = 0.0
    for op, preds in deps.items():
        s, inst, j = op
        f = clocks[op]
        m = profile.at(s, inst, f)
        start = max((spans[p][1] for p in preds), default=0.0)
        spans[op] = (start, start + m.time, f)
        busy[s] += m.time
        energy += m.energy
    total = max(end for _, end, _ in spans.values())
    energy += sum(profile.blocking_power[s] * (total - busy[s]) for s in range(stages))
    # walk back from the last instruction along predecessors that finish exactly at its start
    op = max(spans, key=lambda o: spans[o][1])
    path = [op]
    while deps[op]:
        start = spans[op][0]
        op = max(deps[op], key=lambda p: spans[p][1])
        if spans[op][1] < start - 1e-12 * max(1.0, total):
            break
        path.append(op)
    return Timeline(spans, total, energy, path[::-1])
