"""Perseus with Zeus's shapes: plain-CSV instruction profiles, Zeus's planner flow, Zeus's client.

``PLANNER`` is a script shaped like Zeus's ``examples/pipeline_frequency_optimizer/
run_optimization.py``, written from the documented ``lowtime`` API: it reads the instruction
profile with a plain ``pandas.read_csv``, builds the 1F1B DAG, runs the Phillips-Dessouky solver
and writes one ``freqs_pipeline_NNNNN.py`` schedule per iteration. The schedule then drives
Zeus's ``PipelineFrequencyOptimizer`` call shape (``server_url`` = that file) on simulated GPUs.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pandas as pd
import pytest

from zeus_nb import device
from zeus_nb.optimizer.pipeline_frequency import (
    PipelineFrequencyOptimizer,
    load_profile,
    stage_order,
    synthetic_profile,
)
from zeus_nb.optimizer.pipeline_frequency.common import (
    FrequencySchedule,
    InstructionProfilingResult,
    JobInfo,
    OfflineProfilingResult,
    PFORecordError,
    PFOServerSettings,
    RankInfo,
    load_ranks,
    load_sched,
    save_ranks,
    save_sched,
)
from zeus_nb.optimizer.pipeline_frequency.frequency_controller import FrequencyController
from zeus_nb.optimizer.pipeline_frequency.profile import ProfileFormatError, sidecar_path
from zeus_nb.optimizer.pipeline_frequency.schedule_file import ScheduleSourceError
from zeus_nb.train.pipeline.profile import append_rows, existing_keys

# Profiles in the format before metadata moved beside the file (leading "#" lines), written by
# that version's InstructionProfile.to_csv (synthetic, v100) and its profiling trainer's writer.
OLD = Path(__file__).parent / "data" / "instruction_profile_v1.csv"
OLD_TRAINER = Path(__file__).parent / "data" / "instruction_profile_v1_trainer.csv"

PLANNER = """
import itertools
from collections import defaultdict

import networkx as nx
import pandas as pd
from lowtime.cost_model import ExponentialModel
from lowtime.graph_utils import DependencyResolver, add_sink_node, add_source_node
from lowtime.operation import CandidateExecutionOptions, ExecutionOption, OperationSpec
from lowtime.perseus.instruction import Backward, Forward, Instruction, backward_dep, forward_dep
from lowtime.perseus.schedule import Synchronous1F1B
from lowtime.solver import PhillipsDessouky


def main(inst_profile, output_dir, num_mbs, num_stages, p2p_power=70.0, unit_time=0.001):
    inst_df = pd.read_csv(inst_profile)
    specs = defaultdict(dict)
    for instruction in (Forward, Backward):
        for stage in range(num_stages):
            rows = inst_df.query(
                f"stage == {stage} and instruction == '{instruction.__name__.lower()}'"
            )
            options = [
                ExecutionOption[int](
                    real_time=row["time"], unit_time=unit_time, cost=row["energy"],
                    knob=int(row["frequency"]),
                )
                for _, row in rows.iterrows()
            ]
            for option in options:  # effective energy: what is spent beyond blocking
                option.cost -= p2p_power * option.quant_time * option.unit_time
            candidates = CandidateExecutionOptions[int](options=options)
            model = ExponentialModel(candidates, search_strategy="best")
            specs[stage][instruction] = OperationSpec[int](options=candidates, cost_model=model)

    dag = nx.DiGraph()
    node_id, stages = 2, []
    for stage in range(num_stages):
        ids, insts = [], []
        for inst in Synchronous1F1B(
            num_stages=num_stages, num_micro_batches=num_mbs, stage_id=stage,
            operation_spec_map=specs[stage],
        ):
            dag.add_node(node_id, op=inst)
            ids.append(node_id)
            insts.append(inst)
            node_id += 1
        stages.append(insts)
        for a, b in zip(ids, ids[1:]):
            dag.add_edge(a, b)
    resolver = DependencyResolver([forward_dep, backward_dep], node_type=Instruction)
    nodes = dag.nodes(data=True)
    for (i, d1), (j, d2) in itertools.product(nodes, nodes):
        if resolver.is_dependent(d1["op"], d2["op"]):
            dag.add_edge(i, j)
    add_source_node(dag, 0)
    add_sink_node(dag, 1)
    dag.graph["source_node"], dag.graph["sink_node"] = 0, 1

    written = []
    for iteration, result in enumerate(PhillipsDessouky(dag).run()):
        path = f"{output_dir}/freqs_pipeline_{iteration:05d}.py"
        with open(path, "w") as f:
            f.write("[\\n")
            for insts in stages:
                pairs = [(type(inst).__name__.lower(), inst.assigned_knob) for inst in insts]
                f.write(f"{pairs},\\n")
            f.write("]\\n")
            f.write(f"# Iteration {iteration} total cost: {result.cost}\\n")
        written.append(path)
    return written
"""


def test_new_profiles_are_plain_csv_with_metadata_beside(tmp_path):
    profile = synthetic_profile("v100", 2, [1, 1.3], clock_every=12, max_slowdown=1.3)
    path = profile.to_csv(tmp_path / "prof.csv")
    df = pd.read_csv(path)  # as Zeus's planner reads it
    assert list(df.columns) == ["stage", "instruction", "frequency", "time", "energy"]
    fwd = df.query("stage == 1 and instruction == 'forward'")
    assert [int(f) for f in fwd["frequency"]] == [
        m.frequency for m in profile.options(1, "forward")
    ]
    assert sidecar_path(path).name == "prof.csv.json" and sidecar_path(path).is_file()
    back = load_profile(path)
    assert back.metadata == profile.metadata and "synthetic" in back.metadata[0]
    assert back.measurements == profile.measurements


def test_old_profiles_with_comment_lines_still_load(tmp_path):
    assert OLD.read_text().startswith("# zeus-nb instruction profile v1\n")
    with pytest.raises(pd.errors.ParserError):
        pd.read_csv(OLD)  # why the format changed
    old = load_profile(OLD)
    assert old.num_stages == 2 and old.metadata[0].startswith("synthetic: gpu=v100")
    # Resuming profiling into an old file moves its comments beside it: plain CSV from then on.
    trainer = load_profile(OLD_TRAINER)
    assert trainer.metadata == [
        "model=synthetic-v100-squad microbatch_size=default stages=2 gpu=Tesla_V100 steps=1"
    ]
    path = tmp_path / "prof.csv"
    shutil.copy(OLD_TRAINER, path)
    before = existing_keys(path)
    row = {"stage": 0, "instruction": "forward", "frequency": 840, "time": 0.15, "energy": 21.0}
    assert append_rows(path, [row], {"model": "ignored"}) == 1
    assert existing_keys(path) == before | {(0, "forward", 840)}
    assert len(pd.read_csv(path)) == len(before) + 1
    resumed = load_profile(path)
    assert resumed.metadata == trainer.metadata  # the old comments, now in prof.csv.json
    assert resumed.at(0, "forward", 840).energy == 21.0


def test_zeus_profiles_load_with_a_p2p_power(tmp_path):
    res = OfflineProfilingResult(
        rank=0, dp_rank=0, pp_rank=0, tp_rank=0,
        forward_time={1380: 0.1, 1200: 0.12}, forward_energy={1380: 20.0, 1200: 19.0},
        backward_time={1380: 0.2}, backward_energy={1380: 40.0},
    )  # fmt: skip
    path = str(tmp_path / "zeus.csv")
    InstructionProfilingResult(__root__=[res]).to_csv(path)
    assert list(pd.read_csv(path).columns)[:5] == ["rank", "dp_rank", "pp_rank", "tp_rank", "stage"]
    with pytest.raises(ProfileFormatError, match="p2p_power"):
        load_profile(path)
    prof = load_profile(path, p2p_power=70.0)
    assert prof.blocking_power == {0: 70.0} and prof.at(0, "forward", 1200).time == 0.12
    with pytest.raises(PFORecordError, match=".csv"):
        InstructionProfilingResult(__root__=[res]).to_csv(str(tmp_path / "zeus.txt"))


@pytest.mark.filterwarnings("ignore:Covariance of the parameters", "ignore:overflow encountered")
def test_zeus_planner_flow_drives_zeus_call_shape(tmp_path):
    stages, mbs = 2, 3
    profile = synthetic_profile("v100", stages, [1, 1.3], clock_every=12, max_slowdown=1.3)
    prof_path = profile.to_csv(tmp_path / "prof.csv")
    df = pd.read_csv(prof_path)
    blocking = df[df.instruction == "blocking"]
    p2p = float((blocking.energy / blocking.time).mean())
    namespace: dict = {}
    exec(compile(PLANNER, "run_optimization.py", "exec"), namespace)
    files = namespace["main"](str(prof_path), str(tmp_path), mbs, stages, p2p, 0.005)
    assert len(files) > 1
    fastest = files[-1]  # the solver shortens the iteration step by step
    system = device.use_simulated("v100", num_gpus=stages)
    for stage in range(stages):
        opt = PipelineFrequencyOptimizer(
            stage, 0, stage, 0, stage, 1, stages, 1, stages, f"file://{fastest}", "planner-test"
        )
        assert opt.job_id.endswith("+dp1+pp2+tp1+PointSolution+planner-test")
        gpu = system.gpu(stage)
        assert gpu.locked_clocks() == (max(gpu.supported_clocks()),) * 2  # Zeus: start at max
        order = [inst for inst, _ in stage_order(stage, stages, mbs)]
        assert [name for name, _ in opt.freq_schedule] == order
        for _ in range(2):  # two iterations, Zeus's way: no on_step_begin needed
            for name in order:
                opt.on_instruction_begin(name)
                assert gpu.locked_clocks() == (opt.applied[-1][1],) * 2
                opt.on_instruction_end(name)
            opt.on_step_end()
        assert opt.applied == opt.freq_schedule
        opt.close()
        assert gpu.locked_clocks() is None


def test_zeus_call_shape_errors(tmp_path):
    device.use_simulated("v100", num_gpus=2)
    sched = tmp_path / "freqs_pipeline_00000.py"
    sched.write_text("[\n[('forward', 1380), ('backward', 1290)],\n]\n")
    args = (0, 0, 0, 0, 0, 1, 1, 1, 1)
    with pytest.raises(ScheduleSourceError, match="no server"):
        PipelineFrequencyOptimizer(*args, "http://localhost:7787")
    with pytest.raises(PFORecordError, match="world_size"):
        PipelineFrequencyOptimizer(0, 0, 0, 0, 0, 1, 2, 1, 3, str(sched))
    with pytest.raises(ScheduleSourceError, match="1 schedules"):
        PipelineFrequencyOptimizer(0, 0, 0, 0, 0, 1, 2, 1, 2, str(sched))
    with pytest.raises(TypeError, match="server_url"):
        PipelineFrequencyOptimizer(*args)
    opt = PipelineFrequencyOptimizer(*args, str(sched))
    with pytest.raises(RuntimeError, match="began 'backward'"):
        opt.on_instruction_begin("backward")
    opt.on_instruction_begin("forward")
    opt.on_instruction_end("forward")
    with pytest.raises(RuntimeError, match="ran 1 of the schedule's 2"):
        opt.on_step_end()
    opt.close()


def test_plan_json_and_zeus_shape_agree(tmp_path):
    """zeus-nb's plan JSON (what `zeus-nb perseus plan --json` writes) is a schedule file too."""
    import json

    from zeus_nb.optimizer.pipeline_frequency import FrequencyPlan

    plan = FrequencyPlan.from_choice(2, 2, lambda op: 1290 if op[1] == "forward" else 1380)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"iteration_time": 1.0, "energy": 2.0, "plan": plan.to_json()}))
    system = device.use_simulated("v100", num_gpus=2)
    zeus = PipelineFrequencyOptimizer(1, 0, 1, 0, 1, 1, 2, 1, 2, str(path))
    ours = PipelineFrequencyOptimizer(plan, 1, system.gpu(1))  # zeus-nb's shape, unchanged
    same = PipelineFrequencyOptimizer.from_plan(plan, 1, system.gpu(1))
    assert zeus.freq_schedule == ours.freq_schedule == same.freq_schedule
    assert ours.plan is plan and ours.stage == 1
    for o in (zeus, ours, same):
        o.close()


def test_frequency_controller_and_records(tmp_path):
    system = device.use_simulated("v100", num_gpus=1)
    gpu = system.gpu(0)
    gpu.set_power_limit(150.0)
    ctl = FrequencyController(0)
    assert gpu.get_power_limit() == gpu.default_power_limit()
    assert gpu.locked_clocks() == (max(gpu.supported_clocks()),) * 2
    ctl.set_frequency(0)  # no change
    ctl.set_frequency(1200)
    assert gpu.locked_clocks() == (1200, 1200)
    ctl.end()
    assert gpu.locked_clocks() is None and gpu.get_power_limit() == 150.0

    ranks = [
        RankInfo(rank=r, dp_rank=0, pp_rank=r, tp_rank=0, available_frequencies=[1380])
        for r in (0, 1)
    ]
    asyncio.run(save_ranks(ranks, str(tmp_path)))
    assert load_ranks(str(tmp_path)) == ranks
    scheds = [FrequencySchedule(rank=0, frequencies=[("forward", 1380)])]
    asyncio.run(save_sched(scheds, str(tmp_path / "dump"), 3))
    assert load_sched(str(tmp_path / "dump"), 3) == scheds
    with pytest.raises(PFORecordError, match="job_id"):
        JobInfo(job_id="x", pp_degree=1, dp_degree=1, tp_degree=1, world_size=1)
    assert PFOServerSettings(log_level="info").log_level == "INFO"
