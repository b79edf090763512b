"""The batch-size optimizer's decisions: pruning order, Thompson sampling, early stopping."""

from __future__ import annotations

import math

import numpy as np
import pytest

from zeus_nb.optimizer.batch_size import BatchSizeOptimizer, PruningExplorer
from zeus_nb.optimizer.batch_size.store import JobSpec, MemoryStore, StoreError

SIZES = [8, 16, 32, 64, 128, 256, 512]


def make(b0=64, sizes=SIZES, **kw) -> BatchSizeOptimizer:
    kw.setdefault("max_power", 250.0)
    return BatchSizeOptimizer("job", MemoryStore(), batch_sizes=sizes, default_batch_size=b0, **kw)


def energy_only(cost: float) -> tuple[float, float]:
    """(time, energy) of a run that costs ``cost`` J with eta=1: the energy, at 200 W."""
    return cost / 200.0, cost


def drive(bso: BatchSizeOptimizer, outcome, limit: int = 100) -> list[int]:
    """Run the pruning phase with ``outcome(bs) -> (time, energy, reached)``; returns the order."""
    order = []
    while bso.phase == "pruning" and len(order) < limit:
        bs = bso.next_batch_size()
        order.append(bs)
        t, e, ok = outcome(bs)
        bso.report(bs, time=t, energy=e, reached=ok)
    return order


def test_pruning_goes_down_then_up_and_stops_a_direction_at_first_failure():
    # 16 and below fail; 512 fails. Cost falls with batch size until 128, so 128 is cheapest.
    cost = {8: 9, 16: 8, 32: 5, 64: 4, 128: 3, 256: 6, 512: 7}
    bso = make(b0=64)
    order = drive(bso, lambda b: (cost[b], cost[b] * 100.0, 32 <= b <= 256))
    round1 = [64, 32, 16, 128, 256, 512]  # 8 is never tried: 16 failed first
    # Round 2 runs over the survivors {32, 64, 128, 256}, re-centred on the cheapest (128):
    # down 128, 64, 32, then up 256.
    round2 = [128, 64, 32, 256]
    assert order == round1 + round2
    assert bso.survivors == [32, 64, 128, 256]
    assert bso.phase == "thompson"


def test_second_round_can_prune_further():
    calls = {"n": 0}

    def outcome(bs):
        calls["n"] += 1
        # round 1: everything from 16 to 256 reaches; round 2: 32 fails this time
        ok = 16 <= bs <= 256 and not (calls["n"] > 7 and bs == 32)
        return 10.0, 100000.0 / bs, ok

    bso = make(b0=64)
    order = drive(bso, outcome)
    # round 1: 64 32 16 8(fail) 128 256 512(fail); the cheapest is the largest survivor, 256
    assert order[:7] == [64, 32, 16, 8, 128, 256, 512]
    # round 2 centred on 256: down 256, 128, 64, 32 (fails: 16 is never retried); nothing above
    assert order[7:] == [256, 128, 64, 32]
    assert bso.survivors == [64, 128, 256]


def test_explorer_ignores_reports_it_did_not_ask_for():
    ex = PruningExplorer([1, 2, 4], center=2)
    assert ex.expected == 2
    assert not ex.observe(4, 1.0, True)  # e.g. a concurrent recurrence reporting late
    assert ex.expected == 2
    assert ex.observe(2, 1.0, True)
    assert ex.expected == 1


def test_a_round_without_survivors_keeps_the_previous_candidates():
    bso = make(b0=64)
    drive(bso, lambda b: (1.0, 1.0, False))
    assert bso.phase == "thompson"
    assert bso.survivors == SIZES  # round 1 pruned nothing it could trust
    assert bso.next_batch_size() in SIZES


def test_thompson_sampling_prefers_the_cheaper_arm_and_only_picks_survivors():
    cost = {32: 5.0, 64: 4.0, 128: 2.0, 256: 3.0}
    bso = make(b0=64, sizes=[16, 32, 64, 128, 256, 512], seed=3, eta=1.0)
    drive(bso, lambda b: (*energy_only(cost.get(b, 9.0) * 500), b in cost))
    picks = []
    for i in range(40):
        bs = bso.next_batch_size()
        picks.append(bs)
        jitter = 1 + 0.05 * ((i * 7) % 5 - 2)
        t, e = energy_only(cost[bs] * 500 * jitter)
        bso.report(bs, time=t, energy=e, reached=True)
    # pruning from 64: down to 32 (16 fails), up to 256 (512 fails); sampling stays among them
    assert bso.survivors == sorted(cost)
    assert set(picks) <= set(cost)
    assert picks.count(128) > len(picks) / 2
    assert picks[-10:].count(128) >= 8


def test_decisions_are_deterministic_under_a_seed_and_differ_across_seeds():
    def run(seed):
        bso = make(b0=64, seed=seed)
        drive(bso, lambda b: (1.0, 100.0 + b, True))
        out = []
        for i in range(30):
            bs = bso.next_batch_size()
            out.append(bs)
            bso.report(bs, time=1.0, energy=100.0 + bs + 40 * ((i * 13) % 3), reached=True)
        return out

    assert run(1) == run(1)
    assert any(run(1) != run(s) for s in (2, 3, 4))


def test_a_fresh_optimizer_on_the_same_store_makes_the_same_decision():
    store = MemoryStore()
    a = BatchSizeOptimizer(
        "j", store, batch_sizes=[32, 64, 128], default_batch_size=64, max_power=300.0, seed=5
    )
    for bs, e in [(64, 10.0), (32, 12.0), (128, 9.0), (128, 8.0), (64, 11.0), (32, 14.0)]:
        assert a.next_batch_size() == bs
        a.report(bs, time=1.0, energy=e, reached=True)
    assert a.phase == "thompson"
    b = BatchSizeOptimizer("j", store)  # settings come from the store
    assert b.job == a.job
    assert [b.next_batch_size() for _ in range(3)] == [a.next_batch_size()] * 3


def test_cost_threshold_and_should_stop():
    bso = make(b0=64, eta=0.5, beta=2.0, max_power=200.0)
    assert bso.cost_threshold == math.inf
    assert not bso.should_stop(time=1e9, energy=1e12)
    cost = bso.report(64, time=10.0, energy=3000.0, reached=True)
    assert cost == pytest.approx(0.5 * 3000 + 0.5 * 200 * 10)
    assert bso.best_cost == pytest.approx(cost)
    assert bso.cost_threshold == pytest.approx(2 * cost)
    # a failed run, however cheap, does not lower the best cost
    bso.report(32, time=1.0, energy=1.0, reached=False)
    assert bso.best_cost == pytest.approx(cost)
    assert not bso.should_stop(time=10.0, energy=3000.0)
    assert bso.should_stop(time=25.0, energy=7000.0)
    # projecting one more epoch at the average epoch cost so far: 3 epochs of 1.5 x cost
    # would pass 2 x cost, so stop after the second
    per_epoch = (10.0 * 0.75, 3000.0 * 0.75)
    assert not bso.should_stop(time=per_epoch[0], energy=per_epoch[1], epochs=1)
    assert bso.should_stop(time=2 * per_epoch[0], energy=2 * per_epoch[1], epochs=2)


def test_beta_infinity_disables_early_stopping():
    bso = make(beta=math.inf)
    bso.report(64, time=1.0, energy=1.0, reached=True)
    assert bso.cost_threshold == math.inf
    assert not bso.should_stop(time=1e9, energy=1e12)


def test_power_limit_is_remembered_per_batch_size():
    bso = make()
    assert bso.power_limit(64) is None
    bso.set_power_limit(64, 175)
    assert bso.power_limit(64) == 175.0
    assert bso.power_limit(32) is None


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"batch_sizes": [], "default_batch_size": 1}, "not a non-empty list"),
        ({"batch_sizes": [8, 16], "default_batch_size": 32}, "must be one of"),
        ({"batch_sizes": [0, 16], "default_batch_size": 16}, r"batch_sizes, item 1: 0 is out"),
        ({"batch_sizes": [8], "default_batch_size": 8, "eta": 2}, "eta"),
        ({"batch_sizes": [8], "default_batch_size": 8, "beta": 1}, "beta"),
        ({"batch_sizes": [8], "default_batch_size": 8, "max_power": 0}, "max_power"),
    ],
)
def test_bad_settings_say_what_to_fix(kwargs, match):
    with pytest.raises(ValueError, match=match):
        BatchSizeOptimizer("j", MemoryStore(), **kwargs)


def test_report_rejects_unknown_batch_size_and_bad_numbers():
    bso = make()
    with pytest.raises(ValueError, match="not one of"):
        bso.report(3, time=1.0, energy=1.0, reached=True)
    with pytest.raises(ValueError, match="finite"):
        bso.report(64, time=float("nan"), energy=1.0, reached=True)


def test_store_refuses_a_job_with_other_settings_and_unknown_names():
    store = MemoryStore()
    BatchSizeOptimizer("j", store, batch_sizes=[8, 16], default_batch_size=8, max_power=100.0)
    with pytest.raises(StoreError, match="other settings"):
        BatchSizeOptimizer("j", store, batch_sizes=[8, 32], default_batch_size=8, max_power=100.0)
    with pytest.raises(StoreError, match="batch_sizes="):
        BatchSizeOptimizer("unknown", store)


def test_jobspec_round_trips_through_json_with_infinite_beta():
    spec = JobSpec("x", (8, 16), 8, beta=math.inf, max_power=None)
    from zeus_nb.optimizer.batch_size.checks import spec_from_json

    assert spec_from_json(spec.to_json()) == spec


def test_max_power_defaults_to_the_current_gpu():
    from zeus_nb import device

    system = device.use_simulated(gpu="v100", workload="imagenet")
    top = system.gpu(0).power_limit_constraints()[1]
    bso = BatchSizeOptimizer("j", MemoryStore(), batch_sizes=[8], default_batch_size=8)
    assert bso.cost(time=2.0, energy=10.0) == pytest.approx(0.5 * 10 + 0.5 * top * 2)


def test_a_recurring_job_measured_by_zeus_monitor(tmp_path):
    """Three recurrences, each a fresh optimizer on the same file, measured on a simulated V100."""
    from zeus_nb import device
    from zeus_nb.monitor import ZeusMonitor

    db = tmp_path / "jobs.sqlite3"
    seen = []
    device.use_simulated(gpu="v100", workload="cifar100")  # the GPU the job is created on
    for _ in range(3):
        bso = BatchSizeOptimizer(
            "cifar", db, batch_sizes=[512, 1024, 2048], default_batch_size=1024, beta=math.inf
        )
        bs = bso.next_batch_size()
        seen.append(bs)
        system = device.use_simulated(
            gpu="v100", workload="cifar100", batch_size=bs, num_samples=4 * bs
        )
        monitor = ZeusMonitor(gpu_indices=[0])
        total_t = total_e = 0.0
        for epoch in range(2):
            monitor.begin_window("epoch")
            for _ in range(system.steps_per_epoch()):
                device.step()
            m = monitor.end_window("epoch")
            total_t += m.time
            total_e += m.total_energy
            assert not bso.should_stop(time=total_t, energy=total_e, epochs=epoch + 1)
        bso.report(bs, time=total_t, energy=total_e, reached=True)
    assert seen == [1024, 512, 2048]  # the pruning order, across "processes"
    hist = BatchSizeOptimizer("cifar", db).history()
    assert list(hist["batch_size"]) == seen
    assert (hist["energy"] > 0).all() and (hist["time"] > 0).all()
    # max_power came from the simulated GPU the job was created on (the V100's top limit),
    # stored with the job: every later process's reports cost the same
    top = system.gpu(0).power_limit_constraints()[1]
    assert BatchSizeOptimizer("cifar", db).job.max_power == top
    row = hist.iloc[0]
    assert row["cost"] == pytest.approx(0.5 * row["energy"] + 0.5 * top * row["time"])


def test_an_arm_whose_runs_happened_to_agree_still_gets_explored():
    # 64's two runs cost the same, so its own variance is 0; 128's two happen to be close too.
    # Without the pooled variance prior (32 shows how much runs can vary) 64's draw would be
    # frozen at its mean and, being 3% dearer than 128's, would practically never win again.
    bso = make(b0=64, sizes=[32, 64, 128], exploration=1.0, eta=1.0)
    costs = {32: [700.0, 900.0], 64: [515.0, 515.0], 128: [495.0, 505.0]}
    drive(bso, lambda b: (*energy_only(costs[b].pop(0)), True))
    assert bso.phase == "thompson"
    post = bso.posterior().set_index("batch_size")
    assert post.loc[64, "std"] > 0
    assert post.loc[64, "std"] < post.loc[32, "std"]  # its own evidence still counts
    draws = [bso._sample_means(np.random.default_rng(i)) for i in range(200)]
    wins = sum(d[64] < d[128] for d in draws)
    assert 10 < wins < 100  # about a fifth


def test_variance_prior_weight_zero_recovers_the_sample_variance(monkeypatch):
    from zeus_nb.optimizer.batch_size import optimizer as batch_size

    monkeypatch.setattr(batch_size, "VARIANCE_PRIOR_WEIGHT", 0.0)
    bso = make(b0=64, sizes=[64, 128], eta=1.0)
    costs = {64: [515.0, 515.0], 128: [450.0, 550.0]}
    drive(bso, lambda b: (*energy_only(costs[b].pop(0)), True))
    post = bso.posterior().set_index("batch_size")
    assert post.loc[64, "std"] == 0
    # cost = energy (eta 1): the runs cost 450 and 550
    assert post.loc[128, "std"] == pytest.approx(50.0 / math.sqrt(2))


def test_the_paper_policy_samples_full_width_from_each_arms_own_variance():
    from zeus_nb.optimizer.batch_size import PaperBatchSizeOptimizer

    bso = PaperBatchSizeOptimizer(
        "job",
        MemoryStore(),
        batch_sizes=[32, 64, 128],
        default_batch_size=64,
        max_power=250.0,
        eta=1.0,
    )
    assert bso.job.exploration == 1.0  # full-width draws, whatever was asked
    # cost = energy (eta 1): 64's runs cost 515 twice, 128's 450 and 550
    costs = {32: [700.0, 900.0], 64: [515.0, 515.0], 128: [450.0, 550.0]}
    drive(bso, lambda b: (*energy_only(costs[b].pop(0)), True))
    post = bso.posterior().set_index("batch_size")
    assert post.loc[64, "std"] == 0  # runs that agreed freeze the arm (no variance prior)
    assert post.loc[128, "std"] == pytest.approx(50.0 / math.sqrt(2))
    # the same runs under this package's optimizer: 64 keeps some width
    ours = make(b0=64, sizes=[32, 64, 128], exploration=1.0, eta=1.0)
    costs = {32: [700.0, 900.0], 64: [515.0, 515.0], 128: [450.0, 550.0]}
    drive(ours, lambda b: (*energy_only(costs[b].pop(0)), True))
    assert ours.posterior().set_index("batch_size").loc[64, "std"] > 0


def test_the_paper_policy_learns_failures_at_their_own_cost():
    from zeus_nb.optimizer.batch_size import PaperBatchSizeOptimizer

    spec = JobSpec("job", (32, 64), 64, eta=1.0, beta=2.0, max_power=250.0, exploration=0.3)
    paper = PaperBatchSizeOptimizer(spec, MemoryStore())
    ours = BatchSizeOptimizer(spec, MemoryStore())
    for bso in (paper, ours):
        bso.report(64, time=0.5, energy=100.0, reached=True)  # cost 100: the best so far
        bso.report(32, time=0.15, energy=30.0, reached=False)  # cost 30, failed
    assert paper.posterior().set_index("batch_size").loc[32, "mean_cost"] == pytest.approx(30.0)
    # this package adds the successful run the failure forces
    assert ours.posterior().set_index("batch_size").loc[32, "mean_cost"] == pytest.approx(130.0)
    # a run that never started (no time, no energy) counts 100 x beta x the best cost
    paper.report(32, time=0.0, energy=0.0, reached=False)
    post = paper.posterior().set_index("batch_size")
    assert post.loc[32, "mean_cost"] == pytest.approx((30.0 + 100 * 2.0 * 100.0) / 2)


@pytest.mark.parametrize("window", [0, 3])
def test_arm_statistics_kept_as_runs_arrive_match_the_costs_recomputed(window):
    """Without a window the statistics are updated in place per run (so a recurrence's cost does
    not grow with the runs so far); they must agree with the costs summed afresh."""
    bso = make(b0=64, sizes=[64, 128], eta=1.0, window=window)
    rng = np.random.default_rng(7)
    for _ in range(500):
        bs = bso.next_batch_size()
        t, e = energy_only(float(rng.uniform(400.0, 600.0) * (bs / 64)))
        bso.report(bs, time=t, energy=e, reached=True)
    for bs in (64, 128):
        costs = bso._costs[bs][-window:] if window else bso._costs[bs]
        mean = math.fsum(costs) / len(costs)
        sd = math.sqrt(math.fsum((c - mean) ** 2 for c in costs) / len(costs))
        n, got_mean, got_sd = bso._arm_stats(bs)
        assert n == len(costs) and n > 1
        assert got_mean == pytest.approx(mean, rel=1e-12)
        assert got_sd == pytest.approx(sd, rel=1e-9)
