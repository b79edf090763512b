"""zeus_nb._legacy: Zeus's trace-driven simulator API (NSDI '23) over zeus-nb's simulator.

What is compared, and with what (the example script, the record of Zeus's API and the helpers
are in legacy_fixture.py; comparisons with Zeus's own code are in test_legacy_zeus.py):

* ``EXAMPLE``, a script written from Zeus's documented legacy API, runs with only its ``zeus.``
  imports changed, on the traces shipped in ``zeus_nb/resources/zeus_traces``.
* Its history is, run for run, what ``simulate(..., accounting="epoch",
  optimizer=PaperBatchSizeOptimizer)`` replays for the same workload, GPU, seed and beta: the two
  share the model, the run rule and the random draws, so a drift in either shows here. Another
  seed gives another history, so the comparison can fail.
* Signatures (parameter names and defaults), dataclass fields and ``name`` properties equal
  ``ZEUS_API``, the record of Zeus 0.16.0's.
* Bad input (a missing trace file, an unknown workload, knobs out of range) raises zeus-nb's
  one-line errors.
"""

from __future__ import annotations

import dataclasses
import math
import os
import subprocess
import sys

import pandas as pd
import pytest
from legacy_fixture import (
    EXAMPLE,
    REPO,
    TRACES,
    api,
    as_rows,
    example_args,
    group,
    load_example,
    paper_bso,
    ported,
    recorded,
    replayed,
    same_runs,
    traces,
)

from zeus_nb._legacy.job import Job
from zeus_nb._legacy.policy import JITPowerLimitOptimizer, PruningGTSBatchSizeOptimizer
from zeus_nb._legacy.simulate import HistoryEntry, Simulator
from zeus_nb.data.traces import Workload
from zeus_nb.errors import (
    CallbackOrderError,
    InputError,
    SimulationError,
    TraceNotFoundError,
    ZeusNbError,
)
from zeus_nb.optimizer.batch_size import PaperBatchSizeOptimizer
from zeus_nb.optimizer.batch_size.simulator import simulate, workload_model
from zeus_nb.utils.lr_scaler import LinearScaler, SquareRootScaler


def test_the_example_runs_with_only_its_imports_changed():
    script = ported(EXAMPLE)
    changed = [
        (a, b) for a, b in zip(EXAMPLE.splitlines(), script.splitlines(), strict=True) if a != b
    ]
    assert len(changed) == 3 and all(a.startswith("from zeus.") for a, _ in changed)
    history = load_example(script)["main"](example_args("librispeech", "v100", seed=1))
    assert history and all(isinstance(h, HistoryEntry) for h in history)
    h = history[0]
    assert [type(v) for v in (h.bs, h.pl, h.energy, h.reached, h.time)] == [
        int,
        int,
        float,
        bool,
        float,
    ]


@pytest.mark.parametrize(
    ("workload", "gpu", "seed", "beta"),
    [
        ("librispeech", "v100", 1, 2.0),
        ("imagenet", "a40", 2, 2.0),
        ("squad", "v100", 3, math.inf),
        ("cifar100", "v100", 4, 1.5),
        ("movielens-1m", "a40", 5, 2.0),
    ],
)
def test_the_example_replays_what_simulate_replays(workload, gpu, seed, beta):
    """Run for run the same batch size, limit, energy, time and outcome as simulate(paper)."""
    history = load_example(ported(EXAMPLE))["main"](example_args(workload, gpu, seed, beta))
    result, expected = replayed(workload, gpu, seed, beta)
    # the script's 2 x |B| x |P| is the simulator's default number of recurrences
    assert sum(h.reached for h in history) == result.recurrences
    assert len(history) == len(expected) > result.recurrences * 0.9
    assert same_runs(as_rows(history), expected)
    # a different seed draws other runs: the comparison can tell two histories apart
    assert not same_runs(as_rows(history), replayed(workload, gpu, seed + 100, beta)[1])


def test_the_example_as_a_program_saves_its_history(tmp_path):
    script = tmp_path / "example.py"
    script.write_text(ported(EXAMPLE))
    out = tmp_path / "history.csv"
    args = example_args("sentiment140", "a40", seed=7, save=out)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, str(script), *args], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "HistoryEntry(bs=" in done.stdout
    saved = pd.read_csv(out)
    assert list(saved.columns) == ["bs", "pl", "energy", "reached", "time"]
    expected = replayed("sentiment140", "a40", 7)[1]
    rows = [(int(b), float(p), e, bool(r), t) for b, p, e, r, t in saved.itertuples(index=False)]
    assert same_runs(rows, expected, rel=1e-9)


def test_a_recurrence_that_never_reaches_stops_the_simulation_as_zeus_does():
    """At beta 1.02 some seeds exhaust 20 runs in a recurrence; simulate() goes on, Zeus's
    simulator (and so this one) raises. Whether it raises must follow simulate's history."""
    job = Job("librispeech", "deepspeech2", "adamw", 40.0, 16, 192)
    raised = []
    for seed in (1, 2):
        result, _ = replayed("librispeech", "v100", seed, 1.02, recurrences=60)
        exhausted = not result.per_recurrence()["reached"].all()
        sim = Simulator(*traces("v100"), paper_bso(seed), JITPowerLimitOptimizer(False), seed=seed)
        try:
            sim.simulate_one_job(job, 60, 1.02, 0.5)
            raised.append(False)
        except SimulationError as e:
            assert "did not reach the target in 20 runs" in str(e)
            raised.append(True)
        assert raised[-1] == exhausted
    assert raised == [True, False]  # both outcomes occur, so the check above can fail


def test_runs_never_started_leave_no_entry_and_cost_the_policy_100_beta_min_cost():
    """CIFAR-100 to 5 % accuracy takes one epoch, so at beta 1.05 a batch size whose epoch costs
    more than 1.05 x the cheapest recurrence cannot start."""
    job = Job("cifar100", "shufflenetv2", "adadelta", 0.05, 100, 1024)
    seen: list[tuple[int, float, bool | None]] = []

    class Recording(PruningGTSBatchSizeOptimizer):
        def observe(self, job, batch_size, cost, converged=None):
            seen.append((batch_size, cost, converged))
            super().observe(job, batch_size, cost, converged)

    bso = Recording(seed=1, verbose=False)
    sim = Simulator(*traces("v100"), bso, JITPowerLimitOptimizer(False), seed=1, verbose=False)
    history = sim.simulate_one_job(job, 40, 1.05, 0.5)
    max_power = workload_model("cifar100", "v100").max_power
    entries, cheapest, spent, skipped = iter(history), math.inf, 0.0, 0
    for bs, cost, converged in seen:
        if converged is False and cost == pytest.approx(100 * 1.05 * cheapest):
            skipped += 1
            continue
        h = next(entries)
        assert h.bs == bs and cost == pytest.approx(0.5 * h.energy + 0.5 * max_power * h.time)
        spent += cost
        if h.reached:
            cheapest, spent = min(cheapest, spent), 0.0
    assert skipped > 0 and next(entries, None) is None
    # zeus-nb's simulator skips the same runs and replays the others alike
    wl = Workload("cifar100", "shufflenetv2", "adadelta", 0.05, 100, 1024, 50_000)
    r = simulate(
        wl,
        "v100",
        beta=1.05,
        seed=1,
        recurrences=40,
        accounting="epoch",
        optimizer=PaperBatchSizeOptimizer,
    )
    assert (r.history["epochs"] == 0).sum() == skipped
    h = r.history[r.history["epochs"] > 0]
    expected = [
        (int(b), float(p), e, bool(x), t)
        for b, p, e, x, t in h[
            ["batch_size", "power_limit", "energy", "reached", "time"]
        ].itertuples(index=False)
    ]
    assert same_runs(as_rows(history), expected)


def test_simulations_leave_the_policies_alone_and_repeat():
    bso, plo = paper_bso(3), JITPowerLimitOptimizer(verbose=False)
    sim = Simulator(*traces("v100"), bso, plo, seed=3, verbose=False)
    job = Job("imagenet", "resnet50", "adadelta", 0.65, 100, 256)
    first = sim.simulate_one_job(job, 20, 2.0, 0.5)
    assert bso.bandits == {} and dict(plo.best_pl) == {}
    assert sim.simulate_one_job(job, 20, 2.0, 0.5) == first
    other = Simulator(*traces("v100"), bso, plo, seed=4, verbose=False)
    assert other.simulate_one_job(job, 20, 2.0, 0.5) != first
    # the merged trace, the batch sizes and the profile are the traces' own
    assert {"TTA", "ETA", "energy_per_epoch"} <= set(sim.df.columns)
    assert sim._profile_batch_size_range(job) == workload_model("imagenet", "v100").batch_sizes
    profile = sim._profile_power_limit(job, 256, 0.5)
    assert list(profile) == sorted(profile, reverse=True)
    model = workload_model("imagenet", "v100", 0.5)
    assert min(profile, key=profile.get) == model.jit_power_limit(256)


def test_alibaba_group_without_overlap_is_the_sequential_job():
    """Submissions that never overlap ask the policy every time: with no early stopping, the
    same runs as simulate_one_job; overlapping ones reuse the best known batch size."""
    job = Job("imagenet", "resnet50", "adadelta", 0.65, 100, 256)
    bso = paper_bso(5, concurrency=True)  # overlapping runs report out of pruning's order
    sim = Simulator(*traces("v100"), bso, JITPowerLimitOptimizer(False), seed=5)
    sequential = sim.simulate_one_job(job, 30, math.inf, 0.5)
    spaced = sim.simulate_one_alibaba_group(job, group(range(0, 30_000, 1000), 10), math.inf, 0.5)
    assert spaced == sequential
    doubled = sim.simulate_one_alibaba_group(
        job, group(range(0, 30_000, 1000), 10, 2.0), math.inf, 0.5
    )
    assert [h.energy for h in doubled] == pytest.approx([2 * h.energy for h in sequential])
    # all submitted before the first ends: only the first asks the policy (b0, pruning)
    crowded = sim.simulate_one_alibaba_group(job, group(range(12), 100), math.inf, 0.5)
    assert {h.bs for h in crowded} == {256} and len(crowded) >= 12
    with pytest.raises(InputError, match="runtime_ratio"):
        sim.simulate_one_alibaba_group(
            job, group(range(3), 5).drop(columns="runtime_ratio"), 2, 0.5
        )


def test_bad_input_gives_one_line_errors(tmp_path):
    bso, plo = paper_bso(1), JITPowerLimitOptimizer(verbose=False)
    missing = tmp_path / "summary_train.csv"
    with pytest.raises(TraceNotFoundError) as e:
        Simulator(str(missing), str(TRACES / "summary_power_v100.csv"), bso, plo)
    assert str(missing) in str(e.value) and isinstance(e.value, FileNotFoundError)
    sim = Simulator(*traces("v100"), bso, plo, verbose=False)
    cases = [
        (Job("mnist", "lenet", "sgd", 0.9, 10, 64), "no dataset 'mnist'"),
        (Job("imagenet", "resnet50", "adadelta", 0.77, 100, 256), "no target metric 0.77"),
        (Job("imagenet", "resnet50", "adadelta", 0.65, 100, 100), "default batch size 100"),
        (Job("imagenet", "resnet50", "adadelta", 0.65, 100), "no default batch size"),
    ]
    for job, message in cases:
        with pytest.raises(ZeusNbError, match=message) as e:
            sim.simulate_one_job(job, 5, 2.0, 0.5)
        assert "\n" not in str(e.value)
    job = Job("imagenet", "resnet50", "adadelta", 0.65, 100, 256)
    for beta, eta, message in [(2.0, 1.5, "eta_knob"), (0.0, 0.5, "beta_knob")]:
        with pytest.raises(InputError, match=message):
            sim.simulate_one_job(job, 5, beta, eta)
    with pytest.raises(InputError, match="CSV path or a DataFrame"):
        Simulator(42, str(TRACES / "summary_power_v100.csv"), bso, plo)


def test_pruning_gts_observes_in_order_unless_concurrent():
    job = Job("imagenet", "resnet50", "adadelta", 0.65, 100, 256)
    strict, relaxed = paper_bso(1), paper_bso(1, concurrency=True)
    for bso in (strict, relaxed):
        bso.register_job(job, [64, 128, 256, 360])
        assert bso.predict(job) == 256
    with pytest.raises(CallbackOrderError, match="waits for batch size 256"):
        strict.observe(job, 128, 1e6, True)
    relaxed.observe(job, 128, 1e6, True)  # learned, pruning still waits for 256
    assert relaxed.predict(job) == 256 and relaxed.history[job] == [(128, -1e6)]
    with pytest.raises(InputError, match="register_job"):
        strict.predict(Job("squad", "bert_base_uncased", "adamw", 84.0, 6, 32))


def test_the_paper_policy_needs_no_gpu_to_learn_given_costs(monkeypatch):
    """Costs given by the caller (the paper's simulator) never use a job's max_power, so no GPU
    is asked when the job is registered: a machine without one, or a device a test's mocked
    NVML left behind, must not stop a trace-driven simulation. A report that needs max_power
    still asks then, and its error names the GPU."""
    from zeus_nb import device
    from zeus_nb.errors import NoGPUError

    def no_gpu():
        raise NoGPUError("no GPU here")

    monkeypatch.setattr(device, "current", no_gpu)
    job = Job("imagenet", "resnet50", "adadelta", 0.65, 100, 256)
    bso = paper_bso(1)
    bso.register_job(job, [64, 128, 256, 360])
    assert bso.predict(job) == 256
    bso.observe(job, 256, 5e5, True)
    bandit = bso.bandits[job]
    assert bandit.job.max_power is None
    with pytest.raises(NoGPUError, match="no GPU here"):
        bandit.cost(10.0, 1000.0)


def test_job_and_lr_scalers():
    adam = Job("squad", "bert_base_uncased", "AdamW", 84.0, 6, 32, 3e-5, command=["{bs}", "x"])
    assert adam.scale_lr(128) == pytest.approx(3e-5 * 2)  # sqrt(128 / 32)
    sgd = Job("cifar100", "shufflenetv2", "sgd", 0.6, 100, 1024, 0.1)
    assert sgd.scale_lr(256) == pytest.approx(0.1 / 4)
    assert SquareRootScaler(bs=64, lr=1.0).compute_lr(256) == 2.0
    assert LinearScaler(bs=64, lr=1.0).compute_lr(16) == 0.25
    with pytest.raises(InputError, match="bs="):
        LinearScaler(bs=0, lr=0.1)
    with pytest.raises(InputError, match="no learning-rate scaling rule"):
        Job("x", "y", "lamb", 1.0, 1, 8, 0.1).scale_lr(16)
    assert adam.gen_command(64, 0.1, 3, 2) == ["64", "x"]
    assert hash(adam) == hash(dataclasses.replace(adam, command=None))  # command not hashed
    train = pd.read_csv(TRACES / "summary_train.csv")
    rows = adam.filter_df(train)
    assert len(rows) > 0 and set(rows["target_metric"]) == {84.0}


def test_the_optimizer_package_does_not_depend_on_the_legacy_layer():
    for path in (REPO / "zeus_nb" / "optimizer").rglob("*.py"):
        assert "_legacy" not in path.read_text(), path


def test_signatures_and_fields_match_zeus():
    assert api("zeus_nb") == recorded()


def test_benchmark_prints_the_saving_of_the_legacy_script(capsys):
    import importlib.util
    import json

    path = REPO / "benchmarks" / "bench_legacy.py"
    spec = importlib.util.spec_from_file_location("bench_legacy", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--json", "--seeds", "2", "--workloads", "sentiment140"]) == 0
    rows = {r["implementation"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
    ours = rows["zeus_nb"]
    job = Job("sentiment140", "bert_base_uncased", "adamw", 0.84, 10, 128)
    model = workload_model("sentiment140", "v100")
    savings = []
    for seed in (1, 2):
        sim = Simulator(*traces("v100"), paper_bso(seed), JITPowerLimitOptimizer(False), seed)
        history = sim.simulate_one_job(job, model.num_recurrences(), 2.0, 0.5)
        energy = sum(h.energy for h in history)
        savings.append(1 - energy / (model.num_recurrences() * model.baseline_energy()))
    assert ours["cumulative_saving"] == pytest.approx(sum(savings) / 2)
    assert ours["seeds"] == 2 and ours["recurrences"] == model.num_recurrences()
    with pytest.raises(SystemExit):
        bench.main(["--workloads", "mnist"])
