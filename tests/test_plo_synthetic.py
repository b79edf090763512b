"""Synthetic power-limit profiles: the documented model, common noise, the V100 trace's curves."""

import math

import pytest

from zeus_nb.data.traces import load_power_trace
from zeus_nb.errors import TraceFormatError
from zeus_nb.optimizer.power_limit import Energy
from zeus_nb.optimizer.power_limit.synthetic import (
    CURVES,
    OPTIMA,
    SyntheticMonitor,
    SyntheticProfile,
    trace_profiles,
)


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


def _windows(monitor, order, steps=3):
    """Per limit in ``order``: (s, J) of ``steps`` steps there."""
    out = {}
    for limit in order:
        monitor.gpus[0].set_power_limit(limit)
        monitor.begin_window("w")
        for _ in range(steps):
            monitor.step()
        m = monitor.end_window("w")
        out[limit] = (m.time, m.total_energy)
    return out


def test_one_seed_gives_the_same_steps_at_a_limit_whatever_ran_before():
    """Common random numbers: adaptive and exhaustive runs with one seed read the same steps."""
    p = SyntheticProfile(5, "middle", "steep", noise=0.05)
    forward = _windows(SyntheticMonitor(p, seed=3), [300.0, 250.0, 200.0])
    backward = _windows(SyntheticMonitor(p, seed=3), [200.0, 300.0])
    for w, (t, e) in backward.items():  # equal up to the clock's rounding
        assert (t, e) == pytest.approx(forward[w], rel=1e-12)
    other = _windows(SyntheticMonitor(p, seed=4), [200.0, 300.0])
    assert all(other[w][0] != pytest.approx(backward[w][0], rel=1e-6) for w in other)


def test_v100_trace_profiles_are_the_shipped_trace_per_workload_and_batch_size():
    trace = load_power_trace("v100")
    profiles = dict(trace_profiles("v100", noise=0.03))
    keys = trace.groupby(["dataset", "network", "optimizer", "batch_size"]).ngroups
    assert len(profiles) == keys
    rows = trace[(trace.network == "ncf") & (trace.batch_size == 128)]
    profile = profiles["movielens-1m/ncf/adam/128"]
    assert profile.limits == [250.0 - 25 * i for i in range(7)] and profile.noise == 0.03
    top = float(rows[rows.power_limit == 250].time_per_epoch.iloc[0])
    for r in rows.itertuples():  # one step at 250 W takes 1 s; the trace's ratios stay
        t, e = profile.step_cost(r.power_limit)
        assert (t, e) == pytest.approx(
            (r.time_per_epoch / top, r.time_per_epoch * r.average_power / top)
        )


def test_a_trace_with_unevenly_spaced_limits_is_refused(tmp_path):
    trace = load_power_trace("v100")
    rows = trace[(trace.network == "ncf") & (trace.batch_size == 128)]
    path = tmp_path / "uneven.csv"
    rows[rows.power_limit != 200].to_csv(path, index=False)  # 225 -> 175 W: a 50 W gap
    with pytest.raises(TraceFormatError, match="not evenly spaced"):
        trace_profiles(str(path))
