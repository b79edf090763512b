"""The plan is solved on rank 0 and broadcast: torchrun, 2 ranks on CPU (gloo)."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from zeus_nb.optimizer.pipeline_frequency import (
    FrequencyPlan,
    plan_on_rank0,
    solve_frontier,
    synthetic_profile,
)

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    import torch.distributed as dist
    from zeus_nb import device
    from zeus_nb.optimizer.pipeline_frequency import (
        PipelineFrequencyOptimizer, plan_on_rank0, synthetic_profile,
    )

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    profile = synthetic_profile("v100", 2, [1, 1.5]) if rank == 0 else None
    plan = plan_on_rank0(profile, microbatches=3)
    system = device.create("sim")
    opt = PipelineFrequencyOptimizer(plan, rank, system.gpu(0), backend="sim")
    opt.on_step_begin()
    for inst, _, _ in plan.stages[rank]:
        opt.on_instruction_begin(inst)
        opt.on_instruction_end(inst)
    opt.on_step_end()
    applied = [f for _, f in opt.applied]
    opt.close()
    with open(os.path.join(sys.argv[1], f"rank{rank}.json"), "w") as f:
        json.dump({"plan": plan.to_json(), "applied": applied,
                   "after": system.gpu(0).locked_clocks()}, f)
    dist.barrier()
    dist.destroy_process_group()
    """
)


def test_every_rank_gets_rank0s_plan(tmp_path):
    script = tmp_path / "plan.py"
    script.write_text(SCRIPT)
    env = dict(os.environ)
    env.update(
        ZEUS_NB_BACKEND="sim",
        ZEUS_NB_SIM_GPU="v100",
        ZEUS_NB_STATE_DIR=str(tmp_path / "state"),
        PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]),
        OMP_NUM_THREADS="1",
    )
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
         str(script), str(tmp_path)],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    expected = solve_frontier(synthetic_profile("v100", 2, [1, 1.5]), 2, 3).fastest().plan
    for rank, o in enumerate(out):
        assert FrequencyPlan.from_json(o["plan"]) == expected
        assert o["applied"] == expected.frequencies(rank)
        assert o["after"] is None


def test_single_process_plans_locally():
    profile = synthetic_profile("v100", 2, [1, 1.5])
    plan = plan_on_rank0(profile, microbatches=3, deadline=1e9)
    frontier = solve_frontier(profile, 2, 3)
    assert plan == frontier.points[-1].plan  # the least-energy point meets an easy deadline
    with pytest.raises(ValueError, match="rank 0 needs"):
        plan_on_rank0(None, 3)
