"""AdaptivePolicy on its own (no GPU), and the synthetic profiles it is benchmarked on."""

import math

import pytest

from zeus_nb.optimizer.power_limit import (
    AdaptivePolicy,
    Energy,
    MaxSlowdownConstraint,
    PowerLimitMeasurement,
    Time,
    ZeusCost,
)
from zeus_nb.optimizer.power_limit.policy import CANNOT_WIN, SETTLED
from zeus_nb.optimizer.power_limit.synthetic import (
    CURVES,
    OPTIMA,
    SyntheticMonitor,
    SyntheticProfile,
)

M = PowerLimitMeasurement
BEST = [M(300, 1000.0, 10.0)]  # one measured limit: 1000 J, 10 s


def test_a_partial_window_already_over_the_margin_is_abandoned_at_once():
    policy = AdaptivePolicy(Energy(), noise_margin=0.05)
    verdict = policy.abandon_partial(
        BEST, time=3.0, energy=1000 * 1.06, steps_done=1, steps_total=40
    )
    assert verdict is not None and "already lost" in verdict.why
    assert verdict.time == 3.0
    # within the margin: kept
    assert policy.abandon_partial(BEST, 3.0, 1000 * 1.04, 1, 40) is None


def test_extrapolation_waits_for_a_quarter_of_the_window_and_discounts_the_margin():
    policy = AdaptivePolicy(Energy(), noise_margin=0.05)
    energy = 300.0  # after k of 40 steps: extrapolates to 300 * 40 / k * 0.95
    # 9 steps (< 10, a quarter of 40): no extrapolation yet, though it would lose
    assert policy.abandon_partial(BEST, 1.0, energy, 9, 40) is None
    verdict = policy.abandon_partial(BEST, 1.0, energy, 10, 40)
    scale = 40 / 10 * 0.95
    assert energy * scale > 1000 * 1.05  # the rule: it loses after extrapolation
    assert verdict.why.endswith("extrapolated, lost")
    assert verdict.time == pytest.approx(1.0 * scale)
    # an extrapolation that stays within the margin keeps the window
    just_under = 1000 * 1.05 / scale * 0.999
    assert policy.abandon_partial(BEST, 1.0, just_under, 10, 40) is None


def test_no_measurement_yet_means_nothing_to_compare_with():
    assert AdaptivePolicy(Energy()).abandon_partial([], 1.0, 1e9, 40, 40) is None


def test_patience_counts_losses_in_a_row_and_a_win_resets_it():
    policy = AdaptivePolicy(Energy(), noise_margin=0.05, patience=3)
    remaining = [150.0, 125.0]
    assert policy.after_limit(BEST, 275, 10.0, lost=True, remaining=remaining) is None
    assert policy.after_limit(BEST, 250, 10.0, lost=False, remaining=remaining) is None
    assert policy.losses == 0
    assert policy.after_limit(BEST, 225, 10.0, lost=True, remaining=remaining) is None
    assert policy.after_limit(BEST, 200, 10.0, lost=True, remaining=remaining) is None
    assert policy.after_limit(BEST, 175, 10.0, lost=True, remaining=remaining) == CANNOT_WIN


def test_a_jump_back_up_starts_a_new_descent():
    policy = AdaptivePolicy(Energy(), patience=2)
    assert policy.after_limit(BEST, 100, 10.0, lost=True, remaining=[275.0]) is None
    # 275 > 100: a new descent, so this loss is the first of its run, not the second
    assert policy.after_limit(BEST, 275, 10.0, lost=True, remaining=[250.0]) is None
    assert policy.losses == 1


def test_time_alone_stops_the_descent_for_time():
    policy = AdaptivePolicy(Time(), noise_margin=0.05)
    # two limits in a row at least 20% slower than the best: lower ones can only be slower
    assert policy.after_limit(BEST, 275, 12.0, lost=True, remaining=[250.0]) is None
    assert policy.after_limit(BEST, 250, 12.5, lost=True, remaining=[225.0]) == CANNOT_WIN
    # Energy gives no bound from time alone
    energy = AdaptivePolicy(Energy(), noise_margin=0.05)
    energy.after_limit(BEST, 275, 12.0, lost=False, remaining=[250.0])
    assert energy.after_limit(BEST, 250, 12.5, lost=False, remaining=[225.0]) is None


def test_max_slowdown_probes_the_bottom_then_settles():
    policy = AdaptivePolicy(MaxSlowdownConstraint(1.5))
    limits = [300.0, 250.0, 200.0, 150.0, 100.0]
    assert policy.order(limits) == [300.0, 100.0, 250.0, 200.0, 150.0]
    ms = [M(300, 1000.0, 10.0), M(100, 700.0, 14.0)]  # 14 s <= 1.5 x 10 s: the lowest fits
    assert policy.after_limit(ms, 100, 14.0, lost=False, remaining=[250.0, 200.0]) == SETTLED


def test_lost_uses_the_margin():
    policy = AdaptivePolicy(ZeusCost(1.0), noise_margin=0.1)  # eta 1: energy only
    assert policy.lost(BEST, 10.0, 1000 * 1.11)
    assert not policy.lost(BEST, 10.0, 1000 * 1.09)


@pytest.mark.parametrize("optimum", list(OPTIMA))
@pytest.mark.parametrize("curve", list(CURVES))
@pytest.mark.parametrize("n", [5, 9])
def test_synthetic_profiles_follow_their_documented_model(optimum, curve, n):
    p = SyntheticProfile(n, optimum, curve, noise=0.0)
    assert p.limits == [300.0 - 25 * i for i in range(n)]
    slope, curvature = CURVES[curve]
    x_opt = {"top": 0.0, "middle": 0.5, "bottom": 1.0}[optimum]
    exact = p.exact(steps=2)
    for i, m in enumerate(exact):
        x = i / (n - 1)
        assert m.time == pytest.approx(2 * 1.0 * (1 + slope * x * x))
        assert m.energy == pytest.approx(2 * 200.0 * (1 + curvature * (x - x_opt) ** 2))
    # the energy optimum sits where the shape says (middle: the limit nearest x = 0.5)
    want = p.limits[round(x_opt * (n - 1))]
    assert Energy().select(exact) == want


def test_synthetic_monitor_windows_add_up_the_noisy_steps():
    p = SyntheticProfile(5, "middle", "steep", noise=0.05)
    mon = SyntheticMonitor(p, seed=7)
    mon.gpus[0].set_power_limit(200.0)
    mon.begin_window("w")
    for _ in range(400):
        mon.step()
    m = mon.end_window("w")
    t, e = p.step_cost(200.0)
    # 400 steps at 5% noise: the mean is within 4 standard errors (5% / 20 = 0.25%) of the model
    assert m.time == pytest.approx(400 * t, rel=4 * 0.05 / math.sqrt(400))
    assert m.total_energy == pytest.approx(400 * e, rel=4 * 0.056 / math.sqrt(400))
    assert m.time != pytest.approx(400 * t, rel=1e-9)  # and it is noisy
    with pytest.raises(ValueError):
        mon.gpus[0].set_power_limit(50.0)
