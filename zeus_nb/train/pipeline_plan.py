"""Applying a frequency plan to a live pipeline: each instruction at its planned SM clock.

A plan file is one frontier point of ``zeus-nb perseus plan PROFILE.csv --json``: an object
with the predicted ``iteration_time`` and ``energy`` and, under ``plan``, the clock of every
stage's every instruction. Both schedules run a stage's forwards in microbatch order and its
backwards in microbatch order, so the k-th forward (backward) of an iteration runs microbatch k.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from zeus_nb.errors import ZeusNbError


class PlanError(ZeusNbError, ValueError):
    """A plan file that does not fit this pipeline."""


def load_plan(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except FileNotFoundError:
        raise PlanError(f"{p}: no such plan file; write one with `zeus-nb perseus plan`") from None
    except json.JSONDecodeError as e:
        raise PlanError(f"{p}: not JSON ({e})") from None
    if isinstance(data, list):
        raise PlanError(
            f"{p} holds a whole frontier ({len(data)} points); save one point, e.g. "
            "`zeus-nb perseus plan ... --deadline SECONDS --json > plan.json`"
        )
    if not isinstance(data, dict) or "plan" not in data:
        raise PlanError(f"{p}: expected an object with 'plan', 'iteration_time' and 'energy'")
    return data


def stage_clocks(plan: dict[str, Any], stage: int, stages: int, microbatches: int):
    """{(instruction, microbatch): MHz} of one stage."""
    per_stage = plan["plan"]
    if isinstance(per_stage, dict):
        per_stage = [per_stage[str(s)] for s in range(len(per_stage))]
    if len(per_stage) != stages:
        raise PlanError(f"the plan has {len(per_stage)} stages, the pipeline {stages}")
    clocks: dict[tuple[str, int], int] = {}
    counters = {"forward": 0, "backward": 0}
    for entry in per_stage[stage]:
        if isinstance(entry, dict):
            name, freq = entry["instruction"], entry["frequency"]
            mb = entry.get("microbatch", counters[name])
        else:
            name, freq = entry[0], entry[-1]
            mb = entry[1] if len(entry) == 3 else counters[name]
        counters[name] = mb + 1
        clocks[(name, int(mb))] = int(freq)
    for name in ("forward", "backward"):
        have = sorted(mb for n, mb in clocks if n == name)
        if have != list(range(microbatches)):
            raise PlanError(
                f"stage {stage}: the plan gives {len(have)} {name} clocks, the pipeline runs "
                f"{microbatches} microbatches"
            )
    return clocks


class PlanFollower:
    """Locks the planned clock at each instruction's begin (Zeus's optimizer hooks)."""

    def __init__(self, clock, clocks: dict[tuple[str, int], int]):
        self.clock = clock
        self.clocks = clocks
        self.microbatches = len({mb for _, mb in clocks})
        self._count = {"forward": 0, "backward": 0}

    def on_instruction_begin(self, name: str) -> None:
        mb = self._count[name] % self.microbatches
        self.clock.lock_clock(self.clocks[(name, mb)])

    def on_instruction_end(self, name: str) -> None:
        self._count[name] += 1


def apply_plan(trainer, path: str) -> dict[str, Any]:
    """Attach the plan to the trainer's clock; return the plan's prediction for the results."""
    plan = load_plan(path)
    clocks = stage_clocks(
        plan, trainer.layout.stage, trainer.layout.pp, trainer.config.num_microbatches
    )
    trainer.clock.optimizer = PlanFollower(trainer.clock, clocks)
    return {
        "path": str(path),
        "predicted_iteration_time_s": plan.get("iteration_time"),
        "predicted_energy_j": plan.get("energy"),
    }
