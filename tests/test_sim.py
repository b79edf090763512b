"""The simulated GPU reproduces the power trace and keeps a virtual clock."""

import math
import time

import numpy as np
import pytest

from zeus_nb import device
from zeus_nb.data.traces import WORKLOADS, load_power_trace, power_curves
from zeus_nb.device.sim import SimulatedSystem
from zeus_nb.errors import TraceFormatError
from zeus_nb.monitor import ZeusMonitor


@pytest.mark.parametrize("gpu", ["v100", "a40"])
def test_one_epoch_reproduces_every_trace_row_exactly(gpu):
    trace = load_power_trace(gpu)
    for dataset in WORKLOADS:
        rows = power_curves(trace, dataset)
        system = device.use_simulated(gpu=gpu, workload=dataset)
        mon = ZeusMonitor(gpu_indices=[0])
        for row in rows.itertuples():
            system.gpu(0).set_power_limit(row.power_limit)
            steps = system.steps_per_epoch(row.batch_size)
            mon.begin_window("epoch")
            system.step(steps, batch_size=row.batch_size)
            m = mon.end_window("epoch")
            assert m.time == pytest.approx(row.time_per_epoch, rel=1e-12)
            assert m.total_energy == pytest.approx(
                row.average_power * row.time_per_epoch, rel=1e-12
            )


def test_between_measured_limits_interpolates_without_overshoot():
    system = device.use_simulated(gpu="v100", workload="imagenet", batch_size=256)
    rows = power_curves(system.trace, "imagenet")
    rows = rows[rows.batch_size == 256]
    lo, hi = rows.iloc[2], rows.iloc[3]  # two neighbouring measured limits
    mid = (lo.power_limit + hi.power_limit) / 2
    t, p = system.step_cost(256, mid)
    steps = system.steps_per_epoch(256)
    assert (
        min(lo.time_per_epoch, hi.time_per_epoch)
        <= t * steps
        <= max(lo.time_per_epoch, hi.time_per_epoch)
    )
    assert min(lo.average_power, hi.average_power) <= p <= max(lo.average_power, hi.average_power)
    assert t * steps == pytest.approx((lo.time_per_epoch + hi.time_per_epoch) / 2)


def test_virtual_clock_ignores_cpu_time():
    system = device.use_simulated()
    mon = ZeusMonitor()
    mon.begin_window("idle")
    time.sleep(0.05)
    with pytest.warns(UserWarning, match=r"no zeus_nb.step\(\) ran"):  # zeros, but not silently
        m = mon.end_window("idle")
    assert m.time == 0.0 and m.total_energy == 0.0
    t0 = system.clock()
    device.step()
    assert system.clock() > t0


def test_constraints_and_default_come_from_the_gpu_model():
    assert device.use_simulated(gpu="v100").gpu(0).power_limit_constraints() == (100.0, 250.0)
    g = device.use_simulated(gpu="a40").gpu(0)
    assert g.power_limit_constraints() == (100.0, 300.0)
    assert g.default_power_limit() == 300.0 == g.get_power_limit()
    assert "A40" in g.name and "simulated" in g.name
    with pytest.raises(ValueError, match=r"outside GPU 0's range \[100, 300\] W"):
        g.set_power_limit(350)


def test_noise_is_seeded_and_off_by_default():
    def run(**kw):
        s = SimulatedSystem(gpu="a40", workload="cifar100", **kw)
        s.step(5)
        return s.clock(), s.gpu(0).energy()

    assert run() == run()
    assert run(noise=0.05, seed=1) == run(noise=0.05, seed=1)
    assert run(noise=0.05, seed=1) != run(noise=0.05, seed=2)
    exact_t, _ = run()
    noisy_t, _ = run(noise=0.05, seed=1)
    assert noisy_t != exact_t and abs(noisy_t / exact_t - 1) < 0.3


def test_several_gpus_step_in_lockstep_with_their_own_limits():
    system = device.use_simulated(gpu="a40", workload="imagenet", num_gpus=2)
    system.gpu(1).set_power_limit(150)
    mon = ZeusMonitor()
    mon.begin_window("w")
    device.step(10)
    m = mon.end_window("w")
    t0, p0 = system.step_cost(256, 300.0)
    t1, p1 = system.step_cost(256, 150.0)
    assert m.time == pytest.approx(10 * max(t0, t1))
    assert m.gpu_energy[0] == pytest.approx(10 * t0 * p0)
    assert m.gpu_energy[1] == pytest.approx(10 * t1 * p1)


def test_unknown_batch_size_names_the_available_ones():
    system = device.use_simulated(gpu="a40", workload="imagenet")
    with pytest.raises(ValueError, match=r"no batch size 100 .* use one of \[8, 16"):
        system.step(batch_size=100)


def test_user_trace_csv(tmp_path):
    path = tmp_path / "mygpu.csv"
    path.write_text(
        "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n"
        "toy,mlp,32,sgd,100,20.0,90.0\n"
        "toy,mlp,32,sgd,200,10.0,180.0\n"
    )
    system = device.use_simulated(gpu=path, workload="toy", num_samples=320)
    assert system.gpu(0).power_limit_constraints() == (100.0, 200.0)
    system.gpu(0).set_power_limit(150)
    system.step(system.steps_per_epoch())
    assert system.clock() == pytest.approx(15.0)
    assert system.gpu(0).energy() == pytest.approx(15.0 * 135.0)
    with pytest.raises(ValueError, match="num_samples"):
        device.use_simulated(gpu=path, workload="toy")


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ("dataset,network,batch_size\n", r"lacks column\(s\) optimizer, power_limit"),
        (
            "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n"
            "toy,mlp,32,sgd,100,20.0,90.0\ntoy,mlp,32,sgd,200,fast,180.0\n",
            r"line 3, column time_per_epoch: 'fast' is not a number",
        ),
        (
            "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n"
            "toy,mlp,32,sgd,100,20.0,90.0\ntoy,mlp,32,sgd,100,10.0,95.0\n",
            r"line 3: repeats line 2",
        ),
        (
            "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n"
            "toy,mlp,32,sgd,100,0,90.0\n",
            r"line 2, column time_per_epoch: '0' is out of range; expected time \(> 0 s",
        ),
    ],
)
def test_malformed_trace_names_row_or_column(tmp_path, body, match):
    path = tmp_path / "bad.csv"
    path.write_text(body)
    with pytest.raises(TraceFormatError, match=match):
        device.use_simulated(gpu=path, workload="toy", num_samples=10)


def test_power_timeline_follows_virtual_time():
    system = device.use_simulated(gpu="a40", workload="imagenet")
    mon = ZeusMonitor()
    t_step, watts = system.step_cost(256, 300.0)
    with mon.power_timeline(period=t_step / 4) as sampler:
        device.step(2)
        system.gpu(0).set_power_limit(100)
        device.step(1)
    df = sampler.timeline.to_frame()
    assert list(df.columns) == ["time", "gpu", "power"]
    assert np.all(np.diff(df["time"]) > 0)
    assert df["power"].iloc[0] == pytest.approx(watts)
    _, low = system.step_cost(256, 100.0)
    assert df["power"].iloc[-1] == pytest.approx(low)
    assert len(df) == 8 + math.ceil(system.step_cost(256, 100.0)[0] / (t_step / 4) - 1e-9)


def test_step_is_a_noop_on_real_gpus(fake_nvml):
    system = device.current("nvml")
    before = fake_nvml.state
    device.step(100)
    assert fake_nvml.state == before and system.backend == "nvml"
