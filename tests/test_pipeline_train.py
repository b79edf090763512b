"""Pipeline training pieces in one process: models, partitioning, FLOPs, profile files, clock."""

from __future__ import annotations

import itertools
import json

import pytest

from zeus_nb.train.pipeline import models as pm
from zeus_nb.train.pipeline.profile import (
    ProfileFileError,
    append_rows,
    clocks_to_profile,
    existing_keys,
    parse_clocks,
)
from zeus_nb.train.pipeline.stages import PartitionError, partition, stage_work


# --- the model table ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(pm.TABLE_PARAMETERS_M))
def test_named_models_have_the_table_parameter_counts(name):
    """GPT and wide ResNets match the table to its printed precision; BERT within 0.1 %."""
    count = pm.table_parameters(pm.get_config(name)) / 1e6
    expected = pm.TABLE_PARAMETERS_M[name]
    tolerance = 1e-3 * expected if name.startswith("bert") else 0.005 + 1e-9
    assert abs(count - expected) <= tolerance, (count, expected)


def test_built_transformer_counts_the_untied_head_once_more():
    config = pm.get_config("tiny-gpt")
    built = sum(pm.layer_parameters(config))
    assert built == pm.table_parameters(config) + config.vocab * config.hidden


def test_wide_resnet_width_is_free_and_unknown_names_say_what_exists():
    assert pm.get_config("wide-resnet50_3").width == 3
    with pytest.raises(pm.UnknownModelError, match="tiny-gpt"):
        pm.get_config("gpt5")


# --- partitioning -------------------------------------------------------------------------------
def _brute_force_best(weights, stages):
    n = len(weights)
    best = None
    for cuts in itertools.combinations(range(1, n), stages - 1):
        bounds = (0, *cuts, n)
        heaviest = max(sum(weights[a:b]) for a, b in itertools.pairwise(bounds))
        best = heaviest if best is None else min(best, heaviest)
    return best


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("stages", [2, 3, 4])
def test_partition_by_parameters_minimizes_the_heaviest_stage(seed, stages):
    import random

    rng = random.Random(seed)
    weights = [rng.randint(1, 100) for _ in range(9)]
    ranges = partition(weights, stages, "parameters")
    assert [r.start for r in ranges] == [0] + [r.stop for r in ranges[:-1]]
    assert ranges[-1].stop == len(weights) and all(len(r) >= 1 for r in ranges)
    heaviest = max(sum(weights[i] for i in r) for r in ranges)
    assert heaviest == _brute_force_best(weights, stages)


def test_uniform_and_explicit_partitions():
    assert [len(r) for r in partition([1] * 10, 4, "uniform")] == [3, 3, 2, 2]
    assert [len(r) for r in partition([1] * 10, 4, "layers:1,2,3,4")] == [1, 2, 3, 4]
    with pytest.raises(PartitionError, match="summing to 10"):
        partition([1] * 10, 4, "layers:1,2,3,3")
    with pytest.raises(PartitionError, match="at most 3 stages"):
        partition([1, 2, 3], 4)
    with pytest.raises(PartitionError, match="unknown partition method"):
        partition([1, 2, 3], 2, "type:Block")


def test_stage_flops_follow_the_transformer_formula():
    """Linear layers cost 2 x tokens x weights, attention 4 x batch x T^2 x d per block."""
    config = pm.get_config("tiny-gpt")
    b, t, d, v = 4, config.seq_len, config.hidden, config.vocab
    block = 24 * b * t * d * d + 4 * b * t * t * d
    head = 2 * b * t * d * v
    first = stage_work(config, range(0, 5), b)  # embedding (no FLOPs) + 4 blocks
    last = stage_work(config, range(5, 10), b)  # 4 blocks + head
    assert first.forward == 4 * block
    assert last.forward == 4 * block + head
    # the first stage computes no gradient for its integer input, the others do: 2x forward
    assert last.backward == 2 * last.forward


# --- the instruction profile file ----------------------------------------------------------------
def _rows(stage, clock, t=1e-3):
    return [
        {"stage": stage, "instruction": k, "frequency": clock, "time": t, "energy": 0.2}
        for k in ("forward", "backward", "blocking")
    ]


def test_profile_rows_append_and_resume(tmp_path):
    path = tmp_path / "prof.csv"
    assert clocks_to_profile(path, [1740, 1500], 2) == [1740, 1500]
    meta = {"model": "tiny-gpt"}
    assert append_rows(path, _rows(0, 1740) + _rows(1, 1740), meta) == 6
    assert clocks_to_profile(path, [1740, 1500], 2) == [1500]
    # a rerun that measured a clock again keeps the first rows
    assert append_rows(path, _rows(0, 1740, t=9.0) + _rows(0, 1500), meta) == 3
    assert clocks_to_profile(path, [1740, 1500], 2) == [1500]  # stage 1 still lacks 1500
    assert (1, "blocking", 1500) not in existing_keys(path)
    text = path.read_text()
    assert text.startswith("stage,instruction,frequency,time,energy\n")  # plain CSV
    assert text.count("stage,instruction,frequency,time,energy") == 1 and "#" not in text
    from zeus_nb.optimizer.pipeline_frequency import load_profile

    profile = load_profile(path)
    assert profile.at(0, "forward", 1740).time == pytest.approx(1e-3)
    assert profile.metadata == ["model=tiny-gpt"]  # from prof.csv.json beside it


def test_profile_file_loads_with_the_planner(tmp_path):
    from zeus_nb.optimizer.pipeline_frequency import load_profile

    path = tmp_path / "prof.csv"
    append_rows(path, _rows(0, 1740) + _rows(1, 1740) + _rows(0, 1500, 2e-3), {"m": 1})
    profile = load_profile(path)
    assert profile.num_stages == 2
    assert profile.at(0, "forward", 1500).time == pytest.approx(2e-3)


def test_profile_rows_keep_every_digit_a_plan_predicts_from(tmp_path):
    """A plan's prediction is summed from the file's numbers and notebook 06 checks a live run
    against it to 1e-9: values rounded on the way (they were once written to 9 digits, off by up
    to 5e-9 each) would make that check fail for some models and not others."""
    from zeus_nb.optimizer.pipeline_frequency import load_profile

    path = tmp_path / "prof.csv"
    t, e = 1.2329363611711353e-04 / 3, 0.07252594398015155 / 7  # ~250 W; no short decimals
    rows = [dict(r, energy=e) for r in _rows(0, 1740, t=t) + _rows(1, 1740, t=t)]
    append_rows(path, rows, {"m": 1})
    profile = load_profile(path)
    for key in ((0, "forward"), (1, "backward")):
        assert [(m.time, m.energy) for m in profile.measurements[key]] == [(t, e)]


def test_a_foreign_file_is_not_resumed(tmp_path):
    path = tmp_path / "prof.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(ProfileFileError, match="move the file away"):
        existing_keys(path)


def test_profile_clock_choices():
    clocks = [1740, 1725, 1710, 1695, 1680]
    assert parse_clocks(None, clocks) == clocks
    assert parse_clocks("every:2", clocks) == [1740, 1710, 1680]
    assert parse_clocks("every:3", clocks) == [1740, 1695, 1680]
    assert parse_clocks("1680,1740", clocks) == [1740, 1680]
    with pytest.raises(ValueError, match="not supported"):
        parse_clocks("1700", clocks)


# --- what the schedule hands each stage -----------------------------------------------------------
@pytest.mark.parametrize("name", ["tiny-gpt", "tiny-bert", "tiny-wide-resnet"])
def test_microbatches_have_the_strides_the_schedule_records(name):
    """torch's pipeline schedule records each stage's input as metadata (``.to("meta")`` in
    torch 2.11, which lays a tensor out afresh) and checks every microbatch against it: a batch
    sliced out of a longer one (tokens[:, :-1] of a (B, 33) tensor keeps stride 33) failed that
    check with "stride mismatch: expected (32, 1) actual (33, 1)". Every tensor a stage receives,
    the batch's microbatches and each layer's output, is laid out as its metadata says."""
    import torch

    from zeus_nb.train.pipeline.models import build_layers, get_config, sample_batch

    config = get_config(name)
    x, y = sample_batch(config, 8, generator=torch.Generator().manual_seed(0))
    for batch in (x, y):
        for micro in torch.tensor_split(batch, 4):  # how the schedule splits a batch
            assert micro.stride() == micro.to("meta").stride(), (name, micro.stride())
    h = x
    with torch.no_grad():
        for layer in build_layers(config):
            h = layer(h)
            assert h.stride() == h.to("meta").stride(), (name, type(layer).__name__)


# --- simulated instructions ----------------------------------------------------------------------
def test_instruction_work_scales_the_reference_step():
    from zeus_nb.device.frequency import frequency_model
    from zeus_nb.train.pipeline.cost import InstructionWork

    w = InstructionWork("a40")
    f1, f2 = w.work("forward", 1e9), w.work("forward", 3e9)
    assert f2.time_at_max == pytest.approx(3 * f1.time_at_max)
    assert f1.compute_share == f2.compute_share
    # backward is more compute-bound, so lowering the clock stretches it more than forward
    b = w.work("backward", 1e9)
    assert b.compute_share > f1.compute_share
    model = frequency_model("a40")
    stretch = {k: model.time(x, 900) / model.time(x, 1740) for k, x in (("f", f1), ("b", b))}
    assert stretch["b"] > stretch["f"] > 1


def test_instruction_clock_advances_by_the_modelled_time_at_the_locked_clock():
    from zeus_nb import device
    from zeus_nb.train.pipeline.clock import InstructionClock
    from zeus_nb.train.pipeline.cost import InstructionWork

    system = device.use_simulated("a40", num_gpus=2)
    model = system.frequency_model
    iw = InstructionWork("a40")
    works = {"forward": iw.work("forward", 2e12), "backward": iw.work("backward", 4e12)}
    clock = InstructionClock(system, 1, works)
    clock.lock_clock(1200)
    clock.on_instruction_begin("forward")
    clock.on_instruction_end("forward")
    clock.wait_until(system.clock() + 0.5)  # a neighbour is late: blocked half a second
    clock.lock_clock(None)
    clock.on_instruction_begin("backward")
    clock.on_instruction_end("backward")
    rec = clock.record
    assert rec.time["forward"] == pytest.approx(model.time(works["forward"], 1200))
    assert rec.energy["forward"] == pytest.approx(model.energy(works["forward"], 1200))
    assert rec.time["backward"] == pytest.approx(model.time(works["backward"], model.f_max))
    assert rec.blocking_time == pytest.approx(0.5)
    assert rec.blocking_energy == pytest.approx(0.5 * model.blocking_power())
    assert system.gpu(0).energy() == 0  # the other GPU did nothing
    assert clock.trace == []  # tracing is off by default
    with pytest.raises(RuntimeError, match="not begun"):
        clock.on_instruction_end("forward")
    with pytest.raises(ValueError, match="unknown instruction"):
        clock.on_instruction_begin("optimizer")


def test_plan_files_must_be_one_point(tmp_path):
    from zeus_nb.train.pipeline.plan import PlanError, load_plan

    many = tmp_path / "frontier.json"
    many.write_text(json.dumps([{"plan": []}, {"plan": []}]))
    with pytest.raises(PlanError, match="whole frontier"):
        load_plan(many)
    with pytest.raises(PlanError, match="no such plan file"):
        load_plan(tmp_path / "missing.json")


def test_config_errors_say_what_to_pass():
    from zeus_nb.train.pipeline import PipelineConfig, config_from_args

    with pytest.raises(ValueError, match="--num-microbatches 1"):
        PipelineConfig(profile=True, num_microbatches=4)
    with pytest.raises(ValueError, match="exclude each other"):
        PipelineConfig(profile=True, num_microbatches=1, plan="p.json")
    with pytest.raises(ValueError, match="either --plan"):
        PipelineConfig(plan="p.json", plan_profile="prof.csv")
    with pytest.raises(ValueError, match="needs --plan-profile"):
        PipelineConfig(plan_deadline=1.0)
    # Merak's underscore spelling works too
    c = config_from_args(
        ["--partition_method", "uniform", "--max_steps", "3", "--profile", "false"]
    )
    assert (c.partition_method, c.max_steps, c.profile) == ("uniform", 3, False)
