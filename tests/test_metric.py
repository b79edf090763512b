"""zeus_nb.metric against a real Pushgateway: what is pushed is what the monitors measured.

Each test pushes under its own job to the module's gateway (``pushgateway_fixture``) and reads
the series back from the gateway's ``/metrics`` page. Expected values come from a ZeusMonitor
window or a PowerMonitor running beside the metric on the same simulated GPU.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pushgateway_fixture
import pytest
from pushgateway_fixture import Pushgateway, series, skip_reason

import zeus_nb
from zeus_nb import device
from zeus_nb.callback import Callback, CallbackSet
from zeus_nb.errors import InputError, WindowError, ZeusNbError
from zeus_nb.metric import (
    EnergyCumulativeCounter,
    EnergyHistogram,
    Metric,
    PowerGauge,
    PushgatewayError,
)
from zeus_nb.metric import push as metric_push
from zeus_nb.monitor import PowerMonitor, ZeusMonitor

REPO = Path(__file__).resolve().parents[1]
WAIT = 20.0  # seconds to wait for a background push before the test fails
ENERGY = "energy_monitor_{}_energy_joules"


@pytest.fixture(scope="module")
def gateway():
    yield from pushgateway_fixture.running()


@pytest.fixture
def job(request) -> str:
    return request.node.name.replace("[", "_").replace("]", "")


def labels(window: str, index: int, **more: str) -> tuple:
    return tuple(sorted({"window": window, "index": str(index), **more}.items()))


def wait_for(check, what: str):
    """Poll ``check()`` until it returns a true value, at most ``WAIT`` seconds."""
    deadline = time.monotonic() + WAIT
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {WAIT} s")
        time.sleep(0.05)


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


# --- EnergyHistogram ----------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore:.*bucket:UserWarning")
def test_histogram_pushes_each_window_as_the_monitor_measured_it(gateway, job):
    device.use_simulated(workload="cifar100")
    hist = EnergyHistogram([0], [0], gateway.url, job, gpu_bucket_range=[1, 10, 100, 1000])
    assert isinstance(hist, Metric)
    ref = ZeusMonitor(gpu_indices=[0], cpu_indices=[0])
    measured = []
    for n in (3, 5):
        ref.begin_window("ref")
        hist.begin_window("epoch")
        zeus_nb.step(n)
        hist.end_window("epoch")
        measured.append(ref.end_window("ref"))
    got = series(gateway.url, job)
    bounds = {"gpu": [1, 10, 100, 1000], "cpu": hist.cpu_bucket_range}
    bounds["dram"] = hist.dram_bucket_range
    for kind, energies in (
        ("gpu", [m.gpu_energy[0] for m in measured]),
        ("cpu", [m.cpu_energy[0] for m in measured]),
        ("dram", [m.dram_energy[0] for m in measured]),
    ):
        name = ENERGY.format(kind)
        assert got[(f"{name}_count", labels("epoch", 0))] == 2
        assert got[(f"{name}_sum", labels("epoch", 0))] == pytest.approx(sum(energies))
        buckets = {
            float(dict(lab)["le"]): value
            for (sample, lab), value in got.items()
            if sample == f"{name}_bucket" and dict(lab)["window"] == "epoch"
        }
        want = {float(le): sum(e <= le for e in energies) for le in bounds[kind]}
        assert buckets == {**want, float("inf"): 2}
    assert all(e > 0 for m in measured for e in (m.gpu_energy[0], m.cpu_energy[0]))


def test_histogram_warns_outside_its_buckets_and_checks_windows(gateway, job):
    device.use_simulated(workload="cifar100")
    hist = EnergyHistogram([], [0], gateway.url, job, gpu_bucket_range=[1e9, 2e9])
    assert hist.cpu_histograms is None and hist.dram_histograms is None
    hist.begin_window("w")
    with pytest.raises(WindowError, match="'w' is already open; end it first"):
        hist.begin_window("w")
    zeus_nb.step()
    with pytest.warns(UserWarning, match=r"GPU 0 energy .* J is below the smallest bucket"):
        hist.end_window("w")
    with pytest.raises(WindowError, match="'w' was never begun"):
        hist.end_window("w")
    assert all(not name.startswith(ENERGY.format("cpu")) for name, _ in series(gateway.url, job))


# --- EnergyCumulativeCounter --------------------------------------------------------------------
def test_counter_starts_at_zero_and_ends_at_the_windows_energy(gateway, job):
    device.use_simulated(workload="cifar100")
    counter = EnergyCumulativeCounter([0], [0], 3600, gateway.url, job)  # no periodic push
    ref = ZeusMonitor(gpu_indices=[0], cpu_indices=[0])
    ref.begin_window("ref")
    counter.begin_window("train")
    got = series(gateway.url, job)  # pushed by begin_window itself
    for kind in ("gpu", "cpu", "dram"):
        assert got[(ENERGY.format(kind) + "_total", labels("train", 0))] == 0
    zeus_nb.step(7)
    counter.end_window("train")
    m = ref.end_window("ref")
    assert counter.window_state == {}
    got = series(gateway.url, job)
    for kind, joules in (("gpu", m.gpu_energy), ("cpu", m.cpu_energy), ("dram", m.dram_energy)):
        assert got[(ENERGY.format(kind) + "_total", labels("train", 0))] == pytest.approx(joules[0])
    # the same window name again keeps counting up
    counter.begin_window("train")
    zeus_nb.step(2)
    counter.end_window("train")
    again = series(gateway.url, job)[(ENERGY.format("gpu") + "_total", labels("train", 0))]
    assert again > m.gpu_energy[0]


def test_counter_pushes_every_period_while_the_window_is_open(gateway, job):
    device.use_simulated(workload="cifar100", num_gpus=2)
    counter = EnergyCumulativeCounter([], [0, 1], 0.05, gateway.url, job)
    ref = ZeusMonitor(gpu_indices=[0, 1], cpu_indices=[])
    ref.begin_window("ref")
    counter.begin_window("train")
    zeus_nb.step(4)
    m = ref.end_window("ref")
    key = (ENERGY.format("gpu") + "_total", labels("train", 1))

    def pushed():
        value = series(gateway.url, job).get(key)
        return value is not None and value == pytest.approx(m.gpu_energy[1])

    wait_for(pushed, "a periodic push of the counted energy")  # before end_window
    assert counter.window_state["train"].proc.is_alive()
    counter.end_window("train")
    assert not any(k[0].startswith(ENERGY.format("cpu")) for k in series(gateway.url, job))


def test_counter_on_the_wall_clock_lies_between_inner_and_outer_windows(gateway, job):
    device.use_simulated(workload="cifar100", clock="wall")
    counter = EnergyCumulativeCounter([0], [0], 0.03, gateway.url, job)
    ref = ZeusMonitor(gpu_indices=[0], cpu_indices=[0])
    ref.begin_window("outer")
    counter.begin_window("train")
    ref.begin_window("inner")
    time.sleep(0.25)
    inner = ref.end_window("inner")
    counter.end_window("train")
    outer = ref.end_window("outer")
    got = series(gateway.url, job)
    for kind in ("gpu", "cpu"):
        value = got[(ENERGY.format(kind) + "_total", labels("train", 0))]
        lo = getattr(inner, f"{kind}_energy")[0]
        hi = getattr(outer, f"{kind}_energy")[0]
        assert 0 < lo * (1 - 1e-9) <= value <= hi * (1 + 1e-9)


def test_counter_without_steps_says_why_it_counted_nothing(gateway, job, caplog):
    device.use_simulated(workload="cifar100")
    counter = EnergyCumulativeCounter([], [0], 3600, gateway.url, job)
    counter.begin_window("idle")
    with caplog.at_level(logging.WARNING, logger="zeus_nb.metric"):
        counter.end_window("idle")
    assert "counted 0 J" in caplog.text and "zeus_nb.step()" in caplog.text


# --- PowerGauge ---------------------------------------------------------------------------------
def test_gauge_pushes_the_power_monitors_reading(gateway, job):
    system = device.use_simulated(workload="cifar100")
    gauge = PowerGauge([0], 3600, gateway.url, job)
    with PowerMonitor(gpu_indices=[0]) as ref:
        readings = []
        for limit in (system.max_limit, system.min_limit):
            system.gpu(0).set_power_limit(limit)
            gauge.begin_window(f"at{limit:g}")
            zeus_nb.step(3)
            gauge.end_window(f"at{limit:g}")
            readings.append(ref.get_power()[0])
    got = series(gateway.url, job)
    for limit, watts in zip((system.max_limit, system.min_limit), readings, strict=True):
        assert got[("power_monitor_gpu_power_watts", labels(f"at{limit:g}", 0))] == watts
    assert readings[0] != readings[1]
    assert gauge.window_state == {}


def test_gauge_on_the_wall_clock_pushes_while_open(gateway, job):
    device.use_simulated(workload="cifar100", clock="wall")
    gauge = PowerGauge([0], 0.05, gateway.url, job)
    with PowerMonitor(gpu_indices=[0]) as ref:
        want = wait_for(ref.get_power, "a power sample")[0]
        gauge.begin_window("live")
        key = ("power_monitor_gpu_power_watts", labels("live", 0))
        value = wait_for(lambda: series(gateway.url, job).get(key), "a gauge push")
        gauge.end_window("live")
    assert value == pytest.approx(want) and value > 0


def test_gauge_without_steps_says_why_nothing_was_pushed(gateway, job, caplog):
    device.use_simulated(workload="cifar100")
    gauge = PowerGauge([0], 3600, gateway.url, job)
    gauge.begin_window("idle")
    with pytest.raises(WindowError, match="PowerGauge window 'idle' is already open"):
        gauge.begin_window("idle")
    with caplog.at_level(logging.WARNING, logger="zeus_nb.metric"):
        gauge.end_window("idle")
    assert "pushed no power" in caplog.text and "zeus_nb.step()" in caplog.text
    with pytest.raises(WindowError, match="PowerGauge window 'idle' was never begun"):
        gauge.end_window("idle")


# --- callbacks drive metric windows ------------------------------------------------------------
class EpochEnergy(Callback):
    def __init__(self, hist: EnergyHistogram):
        self.hist = hist

    def on_epoch_begin(self) -> None:
        self.hist.begin_window("epoch")

    def on_epoch_end(self) -> None:
        self.hist.end_window("epoch")


def test_callback_set_drives_a_histogram_per_epoch(gateway, job):
    device.use_simulated(workload="cifar100")
    hist = EnergyHistogram([], [0], gateway.url, job)
    steps = []

    class Steps(Callback):
        def on_step_end(self) -> None:
            steps.append(1)

    hooks = CallbackSet([EpochEnergy(hist), Steps()])
    for _epoch in range(3):
        hooks.on_epoch_begin()
        for _ in range(2):
            hooks.on_step_begin()
            zeus_nb.step()
            hooks.on_step_end()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # bucket range warnings are not the point here
            hooks.on_epoch_end()
    assert len(steps) == 6
    assert series(gateway.url, job)[(ENERGY.format("gpu") + "_count", labels("epoch", 0))] == 3


# --- errors -------------------------------------------------------------------------------------
def test_unreachable_gateway_is_one_line_naming_url_and_fix():
    device.use_simulated(workload="cifar100")
    url = closed_port_url()
    counter = EnergyCumulativeCounter([], [0], 1, url, "j")
    with pytest.raises(PushgatewayError) as err:
        counter.begin_window("w")
    msg = str(err.value)
    assert url in msg and "prometheus-pushgateway" in msg and "pushgateway_url" in msg
    assert "\n" not in msg and isinstance(err.value, ZeusNbError)
    assert counter.window_state == {}  # nothing left running
    gauge = PowerGauge([0], 1, url, "j")
    with pytest.raises(PushgatewayError, match="could not push metrics"):
        gauge.begin_window("w")
    assert gauge.window_state == {}
    hist = EnergyHistogram([], [0], url, "j")
    hist.begin_window("w")
    zeus_nb.step()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(PushgatewayError, match=url):
            hist.end_window("w")
    assert (
        hist.registry.get_sample_value(
            ENERGY.format("gpu") + "_count", {"window": "w", "index": "0"}
        )
        == 1
    )  # kept for the next push


def test_a_silent_gateway_times_out_quickly(monkeypatch):
    device.use_simulated(workload="cifar100")
    monkeypatch.setattr(metric_push, "PUSH_TIMEOUT", 0.2)
    with socket.socket() as s:  # accepts connections, never answers
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
        counter = EnergyCumulativeCounter([], [0], 1, url, "j")
        with pytest.raises(PushgatewayError, match=r"no answer in 0.2 s"):
            counter.begin_window("w")


def test_gateway_lost_mid_window_logs_one_warning(job, caplog):
    why = skip_reason()
    if why:
        pytest.skip(why)
    device.use_simulated(workload="cifar100")
    gateway = Pushgateway().start()
    try:
        counter = EnergyCumulativeCounter([], [0], 0.03, gateway.url, job)
        counter.begin_window("w")
    finally:
        gateway.stop()
    with caplog.at_level(logging.WARNING, logger="zeus_nb.metric"):
        wait_for(lambda: "could not push" in caplog.text, "a warning about failed pushes")
        time.sleep(0.2)  # several more failed pushes
        counter.end_window("w")  # does not raise
    failures = [r for r in caplog.records if "could not push" in r.getMessage()]
    assert len(failures) == 1 and gateway.url in failures[0].getMessage()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"gpu_bucket_range": []}, "gpu_bucket_range is empty"),
        ({"cpu_bucket_range": [10, 5]}, r"cpu_bucket_range \[10, 5\] must be strictly increasing"),
        ({"dram_bucket_range": ["a"]}, "dram_bucket_range .* must be a list of numbers"),
        ({"pushgateway_url": "ftp://x:1"}, "is not a Pushgateway URL"),
        ({"pushgateway_url": "http://host:port"}, "is not a Pushgateway URL"),
        ({"job": ""}, "job '' must be a non-empty name"),
        ({"pushgateway_url": None}, "needs pushgateway_url"),
        ({"prometheus_url": "http://b:1"}, "give only one"),
    ],
)
def test_bad_histogram_arguments_are_one_line_errors(kwargs, match):
    device.use_simulated(workload="cifar100")
    args = {"pushgateway_url": "http://a:1", "job": "j", **kwargs}
    with pytest.raises(InputError, match=match) as err:
        EnergyHistogram([], [0], **args)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("period", [0, -1, "x", float("nan"), True])
def test_bad_update_period_is_a_one_line_error(period):
    for make in (
        lambda: EnergyCumulativeCounter([], [0], period, "http://a:1", "j"),
        lambda: PowerGauge([0], period, "http://a:1", "j"),
    ):
        with pytest.raises(InputError, match="update_period .* must be a number of seconds > 0"):
            make()


def test_prometheus_url_from_zeus_documentation_is_accepted():
    device.use_simulated(workload="cifar100")
    hist = EnergyHistogram(cpu_indices=[], gpu_indices=[0], prometheus_url="h:9", job="j")
    gauge = PowerGauge(gpu_indices=[0], update_period=2, prometheus_url="h:9", job="j")
    assert hist.pushgateway_url == gauge.pushgateway_url == "h:9"


def test_missing_prometheus_client_says_which_extra_to_install():
    code = "import sys; sys.modules['prometheus_client'] = None; import zeus_nb.metric"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert out.returncode != 0
    hint = "zeus_nb.metric needs prometheus-client: pip install 'zeus-nb[prometheus]'"
    assert f"ImportError: {hint}" in out.stderr


# --- an example-shaped script ------------------------------------------------------------------
def test_documented_example_script_runs_with_imports_changed(gateway, tmp_path):
    """tests/metric_example.py follows Zeus's metric documentation; only imports say zeus_nb."""
    script = REPO / "tests" / "metric_example.py"
    assert "from zeus." not in script.read_text() and "import zeus\n" not in script.read_text()
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "ZEUS_NB_BACKEND": "sim",
        "ZEUS_NB_SIM_CLOCK": "wall",  # Zeus code never calls zeus_nb.step()
        "PUSHGATEWAY_URL": gateway.url,
    }
    out = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("completed. Validation Accuracy: 50.0%") == 3
    found = re.search(r"Training consumed (\S+) s and (\S+) J\.", out.stdout)
    assert found, out.stdout
    seconds, joules = float(found[1]), float(found[2])

    hist = series(gateway.url, "training_energy_histogram")
    gpu = ENERGY.format("gpu")
    assert hist[(gpu + "_count", labels("epoch_energy", 0))] == 3
    epochs = hist[(gpu + "_sum", labels("epoch_energy", 0))]
    for kind in ("cpu", "dram"):
        assert hist[(ENERGY.format(kind) + "_count", labels("epoch_energy", 0))] == 3
    counter = series(gateway.url, "energy_counter_job")
    counted = counter[(gpu + "_total", labels("training_energy", 0))]
    # the counter's window lies inside the monitor's and holds the three epochs
    assert 0 < epochs * (1 - 1e-9) <= counted <= joules * (1 + 1e-9)
    watts = series(gateway.url, "power_gauge_job")[
        ("power_monitor_gpu_power_watts", labels("training_power", 0))
    ]
    assert watts == pytest.approx(joules / seconds, rel=1e-6)  # constant power on the wall clock
