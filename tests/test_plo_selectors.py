"""Optimum selectors: criteria, ties to the higher limit, argument checks."""

import math

import pytest

from zeus_nb.optimizer import (
    Energy,
    MaxSlowdownConstraint,
    OptimumSelector,
    PowerLimitMeasurement,
    Time,
    ZeusCost,
)
from zeus_nb.optimizer.power_limit import registry
from zeus_nb.tradeoff import zeus_cost

M = PowerLimitMeasurement
# (limit W, energy J, time s): energy is lowest at 200 W, time lowest at 300 W.
DATA = [M(300, 1000.0, 10.0), M(250, 900.0, 10.5), M(200, 800.0, 12.0), M(150, 850.0, 16.0)]


def test_energy_and_time_pick_their_minimum():
    least_energy = min(DATA, key=lambda m: m.energy).power_limit
    least_time = min(DATA, key=lambda m: m.time).power_limit
    assert Energy().select(DATA) == least_energy
    assert Time().select(DATA) == least_time
    assert least_energy != least_time  # the data tells the two apart
    assert Energy().select(list(reversed(DATA))) == least_energy  # list order does not matter


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


@pytest.mark.parametrize("factor", [1.0, 1.05, 1.2, 2.0, 3.0])
def test_max_slowdown_picks_lowest_limit_within_factor(factor):
    fastest_at_top = DATA[0].time  # 300 W, the highest limit
    within = [m.power_limit for m in DATA if m.time <= factor * fastest_at_top]
    assert MaxSlowdownConstraint(factor).select(DATA) == min(within)


def test_max_slowdown_choices_differ_across_factors():
    assert len({MaxSlowdownConstraint(f).select(DATA) for f in (1.0, 1.05, 1.2, 2.0)}) == 4


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


# --- the selector registry (CLI and widgets) ------------------------------------------------------
@pytest.mark.parametrize("name", list(registry.SELECTORS))
def test_registry_ranges_match_what_the_selectors_accept(name):
    spec = registry.SELECTORS[name]
    if spec.knob is None:
        assert type(registry.make_selector(spec.cli_name)) is spec.factory
        return
    k = spec.knob
    # the ends of the range (and a finite stand-in for an unbounded one) are accepted...
    top = k.maximum if math.isfinite(k.maximum) else 1e6
    for value in (k.minimum, k.default, top):
        sel = registry.make_selector(name, value)
        assert getattr(sel, k.name) == value
        assert registry.selector_kwargs(name, value) == {k.name: value}
    # ...and just outside them both the registry and the selector itself refuse
    outside = [k.minimum - 0.01] + ([k.maximum + 0.01] if math.isfinite(k.maximum) else [])
    for value in outside:
        with pytest.raises(ValueError):
            registry.selector_kwargs(name, value)
        with pytest.raises(ValueError):
            spec.factory(**{k.name: value})
    assert k.minimum <= k.default <= k.slider_maximum <= k.maximum


def test_slowdown_factor_has_no_cap_of_two():
    assert registry.selector_kwargs("MaxSlowdownConstraint", 3.0) == {"factor": 3.0}
    assert registry.make_selector("max-slowdown", 5.0).factor == 5.0


def test_cli_and_class_names_name_the_same_selectors():
    from zeus_nb.commands.plo import CLI_SELECTORS, make_selector

    assert CLI_SELECTORS == ("energy", "time", "zeus-cost", "max-slowdown")
    assert repr(make_selector("zeus-cost", 0.3, 9.0)) == repr(ZeusCost(0.3))
    assert repr(make_selector("max-slowdown", 0.3, 1.7)) == repr(MaxSlowdownConstraint(1.7))
    with pytest.raises(ValueError, match="unknown selector 'fastest'"):
        registry.make_selector("fastest")
