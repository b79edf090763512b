"""Data-parallel profiling: torchrun, 2 ranks on CPU (gloo), one noisy simulated GPU each."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from zeus_nb.optimizer import MaxSlowdownConstraint, PowerLimitMeasurement, ZeusCost

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    import torch.distributed as dist
    from zeus_nb import device
    from zeus_nb.monitor import ZeusMonitor
    from zeus_nb.optimizer import GlobalPowerLimitOptimizer, MaxSlowdownConstraint, ZeusCost

    dist.init_process_group("gloo")
    rank, local_rank = dist.get_rank(), int(os.environ["LOCAL_RANK"])
    out = {}
    for name, selector, adaptive in (
        ("zeus", ZeusCost(0.5), False),
        ("zeus_adaptive", ZeusCost(0.5), True),
        ("slowdown_adaptive", MaxSlowdownConstraint(1.1), True),
    ):
        system = device.create("sim", seed_offset=rank)  # different noise on each rank
        monitor = ZeusMonitor(gpu_indices=[local_rank], system=system)
        plo = GlobalPowerLimitOptimizer(
            monitor, selector, wait_steps=1, warmup_steps=1, profile_steps=4,
            adaptive=adaptive, resume_across_epochs=True, verbose=False,
        )
        while not plo.done:  # 5-step epochs: windows pause and resume across epochs
            plo.on_epoch_begin()
            for _ in range(5):
                plo.on_step_begin()
                system.step()
                plo.on_step_end()
            plo.on_epoch_end()
        out[name] = {
            "optimal": plo.optimal_power_limit,
            "world": [m.__dict__ for m in plo.measurements],
            "local": [m.__dict__ for m in plo.local_measurements],
            "abandoned": sorted(plo.abandoned),
            "limit_now": monitor.gpus[0].get_power_limit(),
        }
        plo.close()
    with open(os.path.join(sys.argv[1], f"rank{rank}.json"), "w") as f:
        json.dump(out, f)
    dist.barrier()  # a gloo group destroyed while a peer still uses it aborts at exit
    dist.destroy_process_group()
    """
)


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dp")
    script = tmp / "train_dp.py"
    script.write_text(SCRIPT)
    env = dict(os.environ)
    env.update(
        ZEUS_NB_BACKEND="sim",
        ZEUS_NB_SIM_NOISE="0.1",
        ZEUS_NB_STATE_DIR=str(tmp / "state"),
        PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]),
        OMP_NUM_THREADS="1",
    )
    env.pop("ZEUS_NB_SIM_GPUS", None)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "2",
            str(script),
            str(tmp),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [json.loads((tmp / f"rank{r}.json").read_text()) for r in (0, 1)]


def measurements(rows):
    return [PowerLimitMeasurement(**r) for r in rows]


def test_time_is_max_reduced_and_energy_sum_reduced(ranks):
    r0, r1 = ranks[0]["zeus"], ranks[1]["zeus"]
    assert r0["world"] == r1["world"]
    loc0, loc1 = measurements(r0["local"]), measurements(r1["local"])
    assert [m.time for m in loc0] != [m.time for m in loc1]  # the ranks really measured apart
    for w, a, b in zip(measurements(r0["world"]), loc0, loc1, strict=True):
        assert w.power_limit == a.power_limit == b.power_limit
        assert w.time == pytest.approx(max(a.time, b.time))
        assert w.energy == pytest.approx(a.energy + b.energy)
        assert w.num_gpus == 2


@pytest.mark.parametrize(
    ("case", "selector"),
    [
        ("zeus", ZeusCost(0.5, world_size=2)),
        ("zeus_adaptive", ZeusCost(0.5, world_size=2)),
        ("slowdown_adaptive", MaxSlowdownConstraint(1.1)),
    ],
)
def test_both_ranks_choose_what_one_process_would_choose_over_the_aggregate(ranks, case, selector):
    r0, r1 = ranks[0][case], ranks[1][case]
    assert r0["optimal"] == r1["optimal"] == r0["limit_now"] == r1["limit_now"]
    assert r0["abandoned"] == r1["abandoned"]
    if "adaptive" in case:
        assert r0["abandoned"], "adaptive profiling skipped nothing: the test checks too little"
    world = measurements(r0["world"])
    assert r0["optimal"] == selector.select(world)  # MaxPower counted 2 GPUs without being told
