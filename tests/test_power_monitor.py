"""PowerMonitor and TemperatureMonitor: Zeus's call shapes, Unix timestamps, thread sampling."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import zeus_nb
from zeus_nb import device
from zeus_nb.errors import UnsupportedError
from zeus_nb.monitor import PowerMonitor, TemperatureMonitor, ZeusMonitor

REPO = Path(__file__).resolve().parents[1]


def test_virtual_clock_timeline_is_in_unix_time():
    before = time.time()
    system = device.use_simulated(workload="cifar100")
    pm = PowerMonitor(update_period=0.5)
    watts = system.step_cost(system.batch_size, system.gpu(0).get_power_limit())[1]
    zeus_nb.step(40)
    timelines = pm.get_all_power_timelines()
    assert sorted(timelines) == ["device_average", "device_instant"]
    pts = timelines["device_instant"][0]
    t_end = system.wall_time()
    expected = int(np.ceil(system.clock() / 0.5))
    assert len(pts) == expected
    assert before <= pts[0][0] <= pts[-1][0] <= t_end
    assert all(w == pytest.approx(watts) for _, w in pts)
    assert pts[1][0] - pts[0][0] == pytest.approx(0.5)
    # start_time filters as Zeus code does (start_time=time.time() - 5 style)
    later = pm.get_power_timeline("device_instant", start_time=pts[3][0])[0]
    assert later == pts[3:]
    assert pm.get_power() == {0: pytest.approx(watts)}
    # Integrated samples approach the counter's energy (they miss the last partial period).
    e = pm.get_energy(pts[0][0], t_end)[0]
    assert e == pytest.approx(watts * (pts[-1][0] - pts[0][0]))
    pm.stop()


def test_wall_clock_sampling_thread_and_zeus_monitor_agree():
    system = device.use_simulated(workload="cifar100", clock="wall")
    pm = PowerMonitor(gpu_indices=[0], update_period=0.02)
    mon = ZeusMonitor(gpu_indices=[0])
    t0 = time.time()
    mon.begin_window("w")
    time.sleep(0.4)
    m = mon.end_window("w")
    t1 = time.time()
    watts = system.step_cost(system.batch_size, system.gpu(0).get_power_limit())[1]
    assert m.gpu_energy[0] == pytest.approx(watts * m.time)
    assert m.time == pytest.approx(t1 - t0, abs=0.05)
    pts = pm.get_power_timeline("device_instant", 0, start_time=t0, end_time=t1)[0]
    assert len(pts) >= 10 and all(t0 <= t <= t1 for t, _ in pts)
    # samples before t0 and up to t1: the window is integrated from t0 on, to its last sample
    last = pm.get_power_timeline("device_instant", 0)[0][-1][0]
    e = pm.get_energy(t0, t1)[0]
    assert e == pytest.approx(watts * (min(t1, last) - t0))
    assert pm.get_power(time=pts[2][0] + 1e-4) == {0: pytest.approx(watts)}
    thread = pm._thread
    pm.stop()
    assert not thread.is_alive()
    n = len(pm.get_power_timeline()[0])
    time.sleep(0.1)
    assert len(pm.get_power_timeline()[0]) == n  # no sampling after stop


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _stalled_window() -> tuple[PowerMonitor, float, float]:
    """A window whose edges a sampling thread cannot reach: 0.3 s of Python holding the GIL at
    each edge (as a long garbage collection or a C call that keeps it does), 0.2 s asleep
    between. The switch interval is raised before the window opens, and the first 50 ms are
    spent outside it: a thread that began waiting for the GIL under the old interval (5 ms)
    takes it once then, not inside the window. Samples every 20 ms."""
    pm = PowerMonitor(gpu_indices=[0], update_period=0.02)
    time.sleep(0.1)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(10.0)
    try:
        _spin(0.05)
        t0 = time.time()
        _spin(0.3)
        time.sleep(0.2)
        _spin(0.3)
        t1 = time.time()
    finally:
        sys.setswitchinterval(interval)
    pm.stop()  # takes a last sample, after the window
    return pm, t0, t1


def test_a_sampler_stalled_at_both_edges_of_a_window_still_covers_the_whole_window():
    """The energy of a window is the timeline's area between its edges: where the sampling
    thread was held off at an edge, the samples beside it are interpolated, so no time is lost
    (the samples inside alone would cover 0.2 of the 0.8 s here). On a busy machine the
    sampler may still slip in at an edge (its wake-up seen late by the OS): such a window
    proves nothing, and the test takes another, up to three."""
    system = device.use_simulated(workload="cifar100", clock="wall")
    watts = system.step_cost(system.batch_size, system.gpu(0).get_power_limit())[1]
    for _ in range(3):
        pm, t0, t1 = _stalled_window()
        pts = pm.get_power_timeline("device_instant", 0)[0]
        inside = [t for t, _ in pts if t0 <= t <= t1]
        if inside and inside[0] - t0 >= 0.25 and t1 - inside[-1] >= 0.25:
            break
    else:
        pytest.fail(f"in three windows the stalls took no effect: {inside and inside[0] - t0}")
    assert pts[0][0] < t0 and pts[-1][0] > t1
    assert pm.get_energy(t0, t1)[0] == pytest.approx(watts * (t1 - t0), rel=1e-3)
    # a window beyond the samples: None; a window of no length at a sample: 0 J
    assert pm.get_energy(t1 + 10, t1 + 20) is None
    assert pm.get_energy(pts[0][0], pts[0][0]) == {0: 0.0}


def test_max_samples_and_domain_errors():
    device.use_simulated(workload="cifar100", num_gpus=2)
    pm = PowerMonitor(max_samples_per_gpu=3, power_domains=["device_instant"])
    zeus_nb.step(100)
    assert {i: len(v) for i, v in pm.get_power_timeline().items()} == {0: 3, 1: 3}
    with pytest.raises(ValueError, match="not being sampled"):
        pm.get_power_timeline("device_average")
    with pytest.raises(ValueError, match="unknown power domain"):
        pm.get_power_timeline("gpu_total")
    with pytest.raises(ValueError, match="'memory_average' is not reported"):
        PowerMonitor(power_domains=["memory_average"])
    with pytest.raises(ValueError, match="update_period"):
        PowerMonitor(update_period=0)


def test_fake_nvml_domains_from_field_values(fake_nvml):
    fake_nvml.set_device(
        0, power_instant_mw=210_000, power_average_mw=190_000, memory_power_mw=30_000
    )
    fake_nvml.set_device(
        1, power_instant_mw=210_000, power_average_mw=190_000, memory_power_mw=30_000
    )
    pm = PowerMonitor(update_period=0.05)
    assert pm.power_domains == ["device_instant", "device_average", "memory_average"]
    time.sleep(0.15)
    assert pm.get_power(power_domain="memory_average") == {0: 30.0, 1: 30.0}
    assert pm.get_power(power_domain="device_average") == {0: 190.0, 1: 190.0}
    assert pm.get_power() == {0: 210.0, 1: 210.0}
    pm.stop()


def test_fake_nvml_without_fields_uses_power_usage(fake_nvml):
    pm = PowerMonitor(gpu_indices=[1], update_period=0.05)
    assert pm.power_domains == ["device_instant"]
    t = time.time()
    assert abs(pm.get_power_timeline()[1][0][0] - t) < 1.0
    assert pm.get_power() == {1: 200.0}
    pm.stop()


def test_temperature_monitor(fake_nvml):
    fake_nvml.set_device(0, temperature_c=61)
    tm = TemperatureMonitor(gpu_indices=[0], update_period=0.05)
    time.sleep(0.12)
    assert tm.get_temperature() == {0: 61.0}
    timeline = tm.get_temperature_timeline(0, start_time=time.time() - 5)[0]
    assert len(timeline) >= 2 and all(v == 61.0 for _, v in timeline)
    tm.stop()
    device.use_simulated()
    with pytest.raises(UnsupportedError, match="reports no temperature"):
        TemperatureMonitor()


SCRIPT = """
import os, sys
with open(sys.argv[1], "a") as f:
    f.write("imported\\n")
import time
from zeus_nb.monitor import PowerMonitor
monitor = PowerMonitor(update_period=0.05)   # at module level, no __main__ guard
time.sleep(0.3)
print("samples", len(monitor.get_power_timeline()[0]))
"""


def test_sampling_never_reimports_main_and_exits_cleanly(tmp_path):
    script = tmp_path / "user_script.py"
    script.write_text(textwrap.dedent(SCRIPT))
    marks = tmp_path / "marks.txt"
    env = dict(os.environ, PYTHONPATH=str(REPO), ZEUS_NB_BACKEND="sim", ZEUS_NB_SIM_CLOCK="wall")
    out = subprocess.run(
        [sys.executable, str(script), str(marks)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert marks.read_text() == "imported\n"  # the module body ran once
    assert int(out.stdout.split()[-1]) >= 3


def test_module_cli_prints_power_and_energy():
    env = dict(os.environ, PYTHONPATH=str(REPO), ZEUS_NB_BACKEND="sim")
    env.pop("ZEUS_NB_SIM_CLOCK", None)
    cmd = [sys.executable, "-m", "zeus_nb.monitor"]
    power = subprocess.run(
        [*cmd, "power", "--duration", "0.6", "--update-period", "0.2"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert power.returncode == 0, power.stderr
    assert "GPU0:" in power.stdout and "W" in power.stdout
    joules = float(power.stdout.split("Total energy (J): GPU0: ")[1].split()[0])
    assert joules > 0
    # the default printing period as long as the run: still energy from many samples
    one_second = subprocess.run(
        [*cmd, "power", "--duration", "1"], env=env, capture_output=True, text=True, timeout=60
    )
    assert one_second.returncode == 0, one_second.stderr
    watts = float(one_second.stdout.split("GPU0: ")[1].split()[0])
    joules = float(one_second.stdout.split("Total energy (J): GPU0: ")[1].split()[0])
    assert 0.8 * watts <= joules <= 1.1 * watts  # about one second at the printed power
    energy = subprocess.run(
        [*cmd, "energy", "--duration", "0.3", "--gpu-indices", "0", "1"],
        env=dict(env, ZEUS_NB_SIM_GPUS="2"),  # the CLI measures only GPUs the system has
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert energy.returncode == 0, energy.stderr
    lines = dict(line.split(": ") for line in energy.stdout.strip().splitlines())
    assert float(lines["Time (s)"]) >= 0.3
    assert float(lines["GPU0 energy (J)"]) > 0 and float(lines["GPU1 energy (J)"]) > 0
    assert float(lines["CPU0 energy (J)"]) > 0


def test_the_background_readers_power_is_the_instant_field_where_the_gpu_answers_it(fake_nvml):
    """nvmlDeviceGetPowerUsage is a 1 s average on Ampere and newer (an H200's lagged its load
    by a second); the counter reader shares steps out by the instant field, and instant power x
    time is instant power, as Zeus reads them."""
    from zeus_nb.device.gpu.nvidia import NVIDIAGPUs

    fake_nvml.set_device(0, power_instant_mw=210_000)
    gpus = NVIDIAGPUs().gpus
    assert gpus[0].power_reader()() == gpus[0].power() == 210.0
    assert gpus[0].get_power_usage() != 210_000  # the average, which differs here
    assert gpus[1].power_reader()() == gpus[1].power() == gpus[1].get_power_usage() / 1000


def test_a_gpu_without_the_instant_field_is_asked_for_it_once(fake_nvml, monkeypatch):
    """power() samples many times a second: a driver's "not supported" is remembered."""
    from zeus_nb.device.gpu.nvidia import NVIDIAGPUs

    gpu = NVIDIAGPUs().gpus[1]  # the fake's GPU 1 answers no power field
    asked = []
    instant = gpu._instant
    monkeypatch.setattr(gpu, "_instant", lambda: asked.append(1) or instant())
    readings = [gpu.power() for _ in range(3)]
    assert readings == [gpu.get_power_usage() / 1000] * 3 and len(asked) == 1
