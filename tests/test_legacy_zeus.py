"""zeus_nb._legacy against Zeus 0.16.0's own code, where Zeus's source is importable.

The ``zeus`` fixture (legacy_fixture.py) imports Zeus from ``$ZEUS_SRC`` (default
/tmp/zeus/src) and skips these tests when it cannot. Compared exactly: the record of Zeus's API
that test_legacy_sim.py checks zeus-nb against; the example script run unchanged on Zeus; the
simulator's histories and the costs it reports to the policy, for both run methods (a scripted
policy on a train trace with one recorded run per batch size, so neither simulator draws
anything); ``GaussianTS`` and ``GTSBatchSizeOptimizer`` draw for draw under one seed; the pruning
order from every default batch size and the posterior of ``PruningGTSBatchSizeOptimizer`` after
the same observations (its Thompson draws come from zeus-nb's seeding, so they are not compared);
``Job``'s methods and the lr scalers.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from legacy_fixture import (
    EXAMPLE,
    TRACES,
    api,
    example_args,
    group,
    load_example,
    recorded,
    same_calls,
    same_runs,
    traces,
    zeus_modules,
)

import zeus_nb._legacy.policy as nb_policy
from zeus_nb._legacy.job import Job
from zeus_nb._legacy.policy import PruningGTSBatchSizeOptimizer
from zeus_nb._legacy.policy.mab import GaussianTS
from zeus_nb._legacy.policy.optimizer import GTSBatchSizeOptimizer, PruningExploreManager
from zeus_nb._legacy.simulate import Simulator
from zeus_nb.data.traces import WORKLOADS, tta_eta
from zeus_nb.utils.lr_scaler import LinearScaler, SquareRootScaler


@pytest.fixture(scope="module")
def zeus():
    yield from zeus_modules()


def test_the_record_is_zeus_api(zeus):
    assert api("zeus") == recorded()


def test_the_example_runs_on_zeus_too(zeus, capsys):
    """The example is a Zeus script: unchanged, it runs against Zeus itself."""
    history = load_example(EXAMPLE)["main"](
        example_args("imagenet", "v100", seed=1, num_recurrence=12)
    )
    assert len(history) >= 12 and type(history[0]).__module__ == "zeus._legacy.simulate"


def _scripted(base, script: list[int], calls: list):
    """A policy that plays ``script`` (batch sizes) in a loop and records what it observes."""

    class Scripted(base):
        name = "scripted"

        def register_job(self, job, batch_sizes):
            self.sizes, self.i = [int(b) for b in batch_sizes], 0

        def predict(self, job):
            bs = script[self.i % len(script)]
            self.i += 1
            return bs if bs in self.sizes else self.sizes[0]

        def observe(self, job, batch_size, cost, converged=None):
            calls.append((int(batch_size), float(cost), converged))

    return Scripted()


def _run_both(zeus, method, args, script, gpu, *rest):
    """Histories and observed costs of Zeus's simulator and ours on one recorded run per batch
    size (so neither simulator draws anything)."""
    train, power = traces(gpu)
    one = train[train["run"] == train.groupby(["dataset", "batch_size"])["run"].transform("min")]
    out = []
    for J, policy, Sim in ((zeus.Job, zeus.policy, zeus.Simulator), (Job, nb_policy, Simulator)):
        calls: list = []
        bso = _scripted(policy.BatchSizeOptimizer, script, calls)
        sim = Sim(one, power, bso, policy.JITPowerLimitOptimizer(verbose=False), 3, False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            history = getattr(sim, method)(J(*args), *rest)
        rows = [
            (int(h.bs), float(h.pl), float(h.energy), bool(h.reached), float(h.time))
            for h in history
        ]
        out.append((rows, calls))
    return out


@pytest.mark.parametrize("beta", [1.05, 2.0, math.inf])
@pytest.mark.parametrize(
    ("args", "script"),
    [
        # one epoch reaches 5 %: at beta 1.05 many batch sizes cannot start
        (("cifar100", "shufflenetv2", "adadelta", 0.05, 100, 1024), [1024, 8, 64, 128, 256, 4096]),
        # batch size 64 never reaches 65 %: stopped at beta x the cheapest recurrence
        (("imagenet", "resnet50", "adadelta", 0.65, 100, 256), [256, 64, 128, 360, 192]),
    ],
)
def test_runs_and_reported_costs_match_zeus_simulator(zeus, capsys, args, script, beta):
    for gpu in ("v100", "a40"):
        (theirs, their_calls), (ours, our_calls) = _run_both(
            zeus, "simulate_one_job", args, script, gpu, 25, beta, 0.5
        )
        assert len(ours) >= 25
        assert same_runs(ours, theirs, rel=1e-9) and same_calls(our_calls, their_calls)
        for starts, length in (([10 * i for i in range(12)], 5), ([10 * i for i in range(12)], 10)):
            schedule = group(starts, length, [1.0, 1.1, 1.2] * 4)
            (theirs, their_calls), (ours, our_calls) = _run_both(
                zeus, "simulate_one_alibaba_group", args, script, gpu, schedule, beta, 0.5
            )
            assert same_runs(ours, theirs, rel=1e-9) and same_calls(our_calls, their_calls)


def _observed_costs(workload: str) -> dict[int, list[float]]:
    """Energy to accuracy of every recorded run at the workload's 175 W rows (never: inf)."""
    runs = tta_eta(workload, "v100", per_run=True)
    runs = runs[runs["power_limit"] == 175]
    return {int(b): list(g["eta"].fillna(math.inf)) for b, g in runs.groupby("batch_size")}


def test_bandit_draws_match_zeus_under_one_seed(zeus):
    costs = _observed_costs("imagenet")
    arms = sorted(costs)
    finite = {b: [c if math.isfinite(c) else 1e9 for c in v] for b, v in costs.items()}
    options = [
        dict(reward_precision=1e-12),
        dict(reward_precision=[1e-12 * (i + 1) for i in range(len(arms))], num_exploration=2),
        dict(reward_precision=1e-12, prior_mean=-1e6, prior_precision=1e-14),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for kw in options:
            theirs, ours = (
                zeus.mab.GaussianTS(arms, seed=7, verbose=False, **kw),
                GaussianTS(arms, seed=7, verbose=False, **kw),
            )
            for step in range(40):
                arm = theirs.predict()
                assert ours.predict() == arm
                reward = -finite[int(arm)][step % len(finite[int(arm)])]
                theirs.fit([arm], [reward], reset=False)
                ours.fit([arm], [reward], reset=False)
            assert ours.arm_param_mean == pytest.approx(theirs.arm_param_mean)
        for learn in (True, False):
            job = Job(*WORKLOADS["imagenet"].key, 0.65, 100, 256)
            theirs = zeus.optimizer.GTSBatchSizeOptimizer(learn, 1e-12, seed=5, verbose=False)
            ours = GTSBatchSizeOptimizer(learn, 1e-12, seed=5, verbose=False)
            theirs.register_job(job, arms)
            ours.register_job(job, arms)
            picks = []
            for step in range(40):
                bs = theirs.predict(job)
                assert ours.predict(job) == bs
                picks.append(bs)
                cost = finite[int(bs)][step % len(finite[int(bs)])]
                theirs.observe(job, bs, cost)
                ours.observe(job, bs, cost)
            assert len(set(picks)) > 1


def test_pruning_and_posterior_match_zeus(zeus):
    """The pruning order from every default, then each survivor's posterior after the same
    observations (the draws themselves come from zeus-nb's seeding, not Zeus's)."""
    costs = _observed_costs("imagenet")
    arms = sorted(costs)
    for default in arms:
        theirs, ours = (
            zeus.optimizer.PruningExploreManager(arms, default),
            PruningExploreManager(arms, default),
        )
        for step in range(100):
            try:
                bs = theirs.next_batch_size()
            except StopIteration as stop:
                with pytest.raises(StopIteration) as e:
                    ours.next_batch_size()
                assert e.value.value == stop.value
                break
            assert ours.next_batch_size() == bs
            cost = costs[bs][step % len(costs[bs])]
            theirs.report_batch_size_result(bs, cost, math.isfinite(cost))
            ours.report_batch_size_result(bs, cost, math.isfinite(cost))
    job = Job(*WORKLOADS["imagenet"].key, 0.65, 100, 256)
    for prior in ({}, {"prior_mean": -2e6, "prior_precision": 1e-13}):
        z = zeus.optimizer.PruningGTSBatchSizeOptimizer(seed=1, verbose=False, **prior)
        n = PruningGTSBatchSizeOptimizer(seed=1, verbose=False, **prior)
        z.register_job(job, arms)
        n.register_job(job, arms)
        step = 0
        while job not in z.mabs:
            bs = z.predict(job)
            if job in z.mabs:
                break
            assert n.predict(job) == bs
            cost = costs[bs][step % len(costs[bs])]
            cost, reached = (cost, True) if math.isfinite(cost) else (3e7, False)
            z.observe(job, bs, cost, reached)
            n.observe(job, bs, cost, reached)
            step += 1
        survivors = z.mabs[job].arms
        assert n.bandits[job].survivors == survivors and n.bandits[job].phase == "thompson"
        for step in range(12):  # learn in an order of our choosing, not the draws'
            bs = survivors[step % len(survivors)]
            cost = costs[bs][step % len(costs[bs])]
            z.observe(job, bs, cost, True)
            n.observe(job, bs, cost, True)
        post = n.bandits[job].posterior().set_index("batch_size")
        for bs in survivors:
            mean, std = n.bandits[job]._arm_posterior(bs, 0.0)
            assert mean == pytest.approx(-z.mabs[job].arm_param_mean[bs], rel=1e-9)
            assert std == pytest.approx(1 / np.sqrt(z.mabs[job].arm_param_prec[bs]), rel=1e-9)
            assert post.loc[bs, "observations"] == z.mabs[job].arm_num_observations[bs]


def test_job_and_scalers_match_zeus(zeus):
    for args in [
        ("squad", "bert_base_uncased", "adamw", 84.0, 6, 32, 3e-5, "/w", ["a", "{bs}", "{lr}"]),
        ("cifar100", "shufflenetv2", "sgd", 0.6, 100, 1024, 0.1, None, ["{epochs}", "{seed}"]),
    ]:
        theirs, ours = zeus.Job(*args), Job(*args)
        assert (str(ours), ours.to_logdir()) == (str(theirs), theirs.to_logdir())
        assert ours.gen_command(64, 0.5, 3, 2) == theirs.gen_command(64, 0.5, 3, 2)
        assert ours.scale_lr(256) == pytest.approx(theirs.scale_lr(256))
        train = pd.read_csv(TRACES / "summary_train.csv")
        assert ours.filter_df(train).index.equals(theirs.filter_df(train).index)
    for name in ("SquareRootScaler", "LinearScaler"):
        theirs = getattr(zeus.lr_scaler, name)(bs=32, lr=0.01)
        ours = SquareRootScaler(32, 0.01) if name[0] == "S" else LinearScaler(32, 0.01)
        assert ours.compute_lr(96) == pytest.approx(theirs.compute_lr(96))
