"""Optimum selectors: criteria, ties to the higher limit, argument checks."""

import pytest

from zeus_nb.optimizer import (
    Energy,
    MaxSlowdownConstraint,
    OptimumSelector,
    PowerLimitMeasurement,
    Time,
    ZeusCost,
)
from zeus_nb.tradeoff import zeus_cost

M = PowerLimitMeasurement
# (limit W, energy J, time s): energy is lowest at 200 W, time lowest at 300 W.
DATA = [M(300, 1000.0, 10.0), M(250, 900.0, 10.5), M(200, 800.0, 12.0), M(150, 850.0, 16.0)]


def test_energy_and_time_pick_their_minimum():
    assert Energy().select(DATA) == 200
    assert Time().select(DATA) == 300
    assert Energy().select(list(reversed(DATA))) == 200  # order of the list does not matter


def test_ties_go_to_the_higher_limit():
    tied = [M(150, 500.0, 5.0), M(250, 500.0, 5.0), M(200, 500.0, 5.0)]
    assert Energy().select(tied) == 250
    assert Time().select(tied) == 250
    assert ZeusCost(0.5).select(tied) == 250
    assert MaxSlowdownConstraint(1.0).select([M(300, 1, 5.0), M(100, 1, 5.0)]) == 100


@pytest.mark.parametrize("eta", [0.0, 0.3, 0.5, 0.8, 1.0])
def test_zeus_cost_minimizes_the_cost_with_max_power_of_the_highest_limit(eta):
    costs = {m.power_limit: zeus_cost(m.energy, m.time, eta, 300.0) for m in DATA}
    best = min(costs.values())
    expected = max(pl for pl, c in costs.items() if c == best)
    assert ZeusCost(eta).select(DATA) == expected


def test_zeus_cost_counts_every_gpu_in_max_power():
    # Energy summed over 4 GPUs; MaxPower must be 4 x 300 W, whether given or read from the data.
    data4 = [M(m.power_limit, 4 * m.energy, m.time, num_gpus=4) for m in DATA]
    explicit = ZeusCost(0.5, world_size=4)
    implicit = ZeusCost(0.5)
    assert explicit.max_power(data4) == implicit.max_power(data4) == 1200.0
    costs = {m.power_limit: zeus_cost(m.energy, m.time, 0.5, 1200.0) for m in data4}
    assert implicit.select(data4) == min(costs, key=costs.get)
    # With MaxPower of one GPU, time would weigh 4x less and the choice differs.
    assert ZeusCost(0.5, world_size=1).select(data4) != implicit.select(data4)


@pytest.mark.parametrize(("factor", "expected"), [(1.0, 300), (1.05, 250), (1.2, 200), (2.0, 150)])
def test_max_slowdown_picks_lowest_limit_within_factor(factor, expected):
    assert MaxSlowdownConstraint(factor).select(DATA) == expected


@pytest.mark.parametrize(
    "make",
    [
        lambda: ZeusCost(-0.1),
        lambda: ZeusCost(1.5),
        lambda: ZeusCost(0.5, world_size=0),
        lambda: ZeusCost(0.5, world_size=1.5),
        lambda: MaxSlowdownConstraint(0.9),
    ],
)
def test_bad_arguments_raise_value_error(make):
    with pytest.raises(ValueError):
        make()


def test_empty_measurements_raise():
    with pytest.raises(ValueError, match="no power-limit measurements"):
        Energy().select([])


def test_users_can_write_their_own_selector():
    class Middle(OptimumSelector):
        def select(self, measurements):
            limits = sorted(m.power_limit for m in measurements)
            return limits[len(limits) // 2]

    assert Middle().select(DATA) == 250
    assert not Middle().rules_out(DATA, 1e9, 1e9, 0.0)  # never pruned in adaptive mode


def test_rules_out_uses_the_margin():
    assert Energy().rules_out(DATA, 800 * 1.06, 1.0, 0.05)
    assert not Energy().rules_out(DATA, 800 * 1.04, 1.0, 0.05)
    assert Time().rules_out(DATA, 0.0, 10.0 * 1.06, 0.05)
    assert MaxSlowdownConstraint(1.2).rules_out(DATA, 0.0, 12.0 * 1.06, 0.05)
    assert not MaxSlowdownConstraint(1.2).rules_out(DATA, 0.0, 12.0 * 1.04, 0.05)
