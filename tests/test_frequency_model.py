"""The simulated GPU's frequency model: calibration against the traces and the clock API."""

import numpy as np
import pytest

from zeus_nb import device
from zeus_nb.data.traces import load_power_trace
from zeus_nb.device.frequency import (
    CLOCKS,
    FIT_ERROR_BOUND,
    FrequencyModel,
    Work,
    calibrate,
    fit_table,
)
from zeus_nb.errors import ClockPermissionError, UnsupportedError


@pytest.mark.parametrize("gpu", ["a40", "v100"])
def test_model_reproduces_trace_time_and_power_within_stated_error(gpu):
    df = fit_table(gpu)
    trace = load_power_trace(gpu)
    assert len(df) == len(trace)  # every measured row is compared
    # recompute the errors from the columns rather than trusting the table's own
    t_err = np.abs(df["time_model"] / df["time_measured"] - 1)
    p_err = np.abs(df["power_model"] / df["power_measured"] - 1)
    assert np.median(t_err) <= FIT_ERROR_BOUND["median_time"]
    assert np.median(p_err) <= FIT_ERROR_BOUND["median_power"]
    assert t_err.max() <= FIT_ERROR_BOUND["max_time"]
    assert p_err.max() <= FIT_ERROR_BOUND["max_power"]


@pytest.mark.parametrize("gpu", ["a40", "v100"])
def test_lower_caps_mean_lower_clocks_and_clocks_stay_supported(gpu):
    df = fit_table(gpu)
    spec = CLOCKS[gpu]
    assert df["clock"].between(spec.min_mhz, spec.max_mhz).all()
    for _, g in df.groupby(["dataset", "batch_size", "optimizer"]):
        clocks = g.sort_values("power_limit")["clock"].to_numpy()
        assert np.all(np.diff(clocks) >= -1e-9)


def test_time_and_power_formulas():
    model = FrequencyModel("x", (2000, 1000), static_power=50.0, alpha=2.0)
    w = Work(time_at_max=1.0, compute_share=0.6, dynamic_power=200.0)
    assert model.time(w, 2000) == pytest.approx(1.0)
    assert model.time(w, 1000) == pytest.approx(0.6 * 2 + 0.4)
    assert model.power(w, 1000) == pytest.approx(50 + 200 * 0.25)
    assert model.energy(w, 1000) == pytest.approx(1.6 * 100)
    # cap 100 W: 50 + 200 r^2 = 100 -> r = 0.5 -> 1000 MHz
    assert model.clock_under_cap(w, 100.0, continuous=True) == pytest.approx(1000.0)
    assert model.clock_under_cap(w, 1000.0) == 2000
    with pytest.raises(ValueError, match="compute_share"):
        Work(1.0, 1.5, 1.0)


def test_clock_lists_come_from_the_spec():
    clocks = CLOCKS["a40"].clocks()
    assert clocks[0] == 1740 and clocks[-1] == 210 and clocks == sorted(clocks, reverse=True)
    assert calibrate("a40").model.clocks == tuple(clocks)


def test_simulated_gpu_clocks_lock_and_reset():
    system = device.use_simulated("a40", num_gpus=2)
    g = system.gpu(0)
    assert g.supported_clocks()[0] == 1740
    work = Work(0.1, 0.8, 150.0)
    t_fast = system.run_work(work, [0])
    g.set_locked_clocks(210, 900)
    assert g.locked_clocks() == (210, 900)
    e0 = g.energy()
    t_slow = system.run_work(work, [0])
    model = system.frequency_model
    assert t_slow == pytest.approx(model.time(work, 900)) and t_slow > t_fast
    assert g.energy() - e0 == pytest.approx(model.energy(work, 900))
    g.reset_locked_clocks()
    assert g.locked_clocks() is None
    with pytest.raises(ValueError, match="not a supported SM clock"):
        g.set_locked_clocks(211, 900)
    with pytest.raises(ValueError, match="empty"):
        g.set_locked_clocks(900, 210)


def test_blocking_charges_static_power():
    system = device.use_simulated("v100")
    e0, t0 = system.gpu(0).energy(), system.clock()
    system.block(2.0)
    assert system.clock() - t0 == 2.0
    assert system.gpu(0).energy() - e0 == pytest.approx(2.0 * calibrate("v100").model.static_power)


def test_custom_trace_has_no_frequency_model(tmp_path):
    path = tmp_path / "t.csv"
    load_power_trace("a40").to_csv(path, index=False)
    system = device.use_simulated(path)
    with pytest.raises(UnsupportedError, match="bundled GPUs"):
        system.gpu(0).supported_clocks()


def test_nvml_clocks_through_fake_pynvml(fake_nvml):
    g = device.current("nvml").gpu(1)
    clocks = g.supported_clocks()
    assert clocks == fake_nvml.state["devices"][1]["graphics_clocks_mhz"]
    g.set_locked_clocks(1410, 1410)
    assert fake_nvml.state["devices"][1]["locked_clocks"] == [1410, 1410]
    g.reset_locked_clocks()
    assert fake_nvml.state["devices"][1]["locked_clocks"] is None
    assert fake_nvml.state["clock_calls"] == [[1, 1410, 1410], [1, "reset"]]
    with pytest.raises(ValueError, match="nearest: 1410"):
        g.set_locked_clocks(1411, 1411)


def test_nvml_clock_errors_are_mapped(fake_nvml):
    # NOT_SUPPORTED first: a refused setter marks the GPU read-only for the rest of the process
    # (found once), so later calls on the same GPU no longer reach NVML.
    fake_nvml.set_device(0, clock_error="NotSupported")
    g = device.current("nvml").gpu(0)
    with pytest.raises(UnsupportedError, match="not supported"):
        g.set_locked_clocks(1410, 1740)
    fake_nvml.set_device(0, clock_error="NoPermission")
    with pytest.raises(ClockPermissionError, match="SYS_ADMIN"):
        g.set_locked_clocks(1410, 1740)
    with pytest.raises(ClockPermissionError):
        g.reset_locked_clocks()
    fake_nvml.set_device(0, clock_error=None, memory_clocks_mhz=[])
    with pytest.raises(UnsupportedError, match="no memory clock"):
        g.supported_clocks()
