"""The fake NVML's GPU rows behave like the hardware they stand for, and say where they come from.

The rows (``tests/fake_nvml/nvml_rows.py``) are checked against their sources: the shipped Zeus
power traces for the A40 and V100, the measured table of ``docs/real_gpus.md`` for the H100.
"""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from zeus_nb import device
from zeus_nb.data.traces import resource_path

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def rows(nvml_gpus):
    nvml_gpus("h100", 1)  # puts tests/fake_nvml on the path
    import nvml_rows

    return nvml_rows


# --- where the numbers come from -----------------------------------------------------------------
@pytest.mark.parametrize("gpu", ["a40", "v100"])
def test_trace_rows_hold_the_traced_limits_and_power(rows, gpu):
    trace = pd.read_csv(resource_path("zeus_traces", f"summary_power_{gpu}.csv"))
    dataset, network, batch_size = rows.TRACE_WORKLOAD
    curve = trace[
        (trace.dataset == dataset) & (trace.network == network) & (trace.batch_size == batch_size)
    ]
    row = rows.row(gpu)
    assert row["min_w"] == trace.power_limit.min() and row["max_w"] == trace.power_limit.max()
    busy = dict(zip(curve.power_limit.astype(int), curve.average_power, strict=True))
    assert set(row["busy_w"]) == set(busy)
    for limit, watts in row["busy_w"].items():
        assert watts == pytest.approx(busy[limit], abs=1e-6)
    assert row["idle_w"] == pytest.approx(trace.average_power.min(), abs=1e-6)
    assert "idle_w" in row["assumptions"] and "counter_period_s" in row["assumptions"]


def test_the_a40_row_keeps_the_traced_power_above_a_low_limit(rows):
    """At its 100 W limit the traced A40 drew 120.7 W on average; the fake does too."""
    over = rows.row("a40")["busy_w"][100] - 100
    assert over == pytest.approx(20.74, abs=0.01)


def test_the_h100_row_is_the_measured_table(rows):
    """Each number of the H100 row appears in the measured table of docs/real_gpus.md."""
    text = (REPO / "docs" / "real_gpus.md").read_text()
    h100 = rows.row("h100")
    for fact in (
        h100["name"],
        h100["driver"],
        "200-700 W, 700 W",
        f"{h100['idle_w']:g} W",
        f"{h100['busy_w'][700]:g} W",
        f"{h100['memory_busy_w']:g} W",
        f"every {h100['counter_period_s'] * 1000:g} ms",
        "2.8 ms a read",
        "min 2.6 ms, max 16.8 ms",
        "0.9 us a read",
        "2.4 us a read",
        "140 us a read",
    ):
        assert fact in text, fact
    assert h100["costs_s"]["energy"] == [2.8e-3, 2.6e-3, 16.8e-3]
    assert "busy_w" in h100["assumptions"]  # only the 700 W limit was loaded


def test_every_row_names_its_source_and_its_assumptions(rows):
    for name, row in rows.ROWS.items():
        assert row["source"], name
        assert set(row["assumptions"]) and all(row["assumptions"].values()), name


# --- behaviour -----------------------------------------------------------------------------------
@pytest.mark.parametrize("count", [1, 2, 4, 8])
def test_rows_come_in_1_2_4_and_8_gpus(nvml_gpus, count):
    nvml_gpus("a40", count)
    system = device.current("nvml")
    assert len(system.gpus) == count
    assert {g.name for g in system.gpus} == {"NVIDIA A40"}
    assert system.gpus[-1].power_limit_constraints() == (100.0, 300.0)


def test_the_counter_moves_every_100_ms_with_wall_time(nvml_gpus):
    fake = nvml_gpus("h100", 1)
    gpu = device.current("nvml").gpu(0)
    assert gpu.get_power_limit() == 700.0
    period, watts = 0.1, 693.0
    # two reads inside one period see the same value, however many reads
    t = time.time()
    time.sleep(period - (t % period) + 0.005)  # just after an update
    a, b = gpu.energy(), gpu.energy()
    assert a == b
    # across updates it rises by whole updates of the drawn power
    time.sleep(0.35)
    updates = (gpu.energy() - b) / (watts * period)
    assert math.isclose(updates, round(updates), abs_tol=1e-3)  # whole updates only
    assert 3 <= round(updates) <= 5  # 0.35 s of sleep (and a little more under load)
    assert fake.state["devices"][0]["counter"] == "periodic"


def test_reads_cost_what_they_cost_on_the_h100(nvml_gpus):
    nvml_gpus("h100", 1)
    gpu = device.current("nvml").gpu(0)
    gpu.energy()
    costs = []
    for _ in range(5):
        start = time.perf_counter()
        gpu.energy()
        costs.append(time.perf_counter() - start)
    assert min(costs) >= 2.6e-3  # the measured minimum
    start = time.perf_counter()
    gpu.get_power_limit()
    assert time.perf_counter() - start >= 140e-6


def test_a_limit_change_banks_the_energy_drawn_at_the_old_limit(nvml_gpus):
    """The counter keeps what was drawn before a change, at the power drawn then."""
    fake = nvml_gpus("a40", 1)
    gpu = device.current("nvml").gpu(0)
    import nvml_rows as rows

    high = rows.row("a40")["busy_w"][300]
    low = rows.row("a40")["busy_w"][100]
    assert gpu.power() == pytest.approx(high, abs=1e-3)
    e0, t0 = gpu.energy(), time.time()
    time.sleep(0.3)
    gpu.set_power_limit(100)
    t1 = time.time()
    assert gpu.power() == pytest.approx(low, abs=1e-3)  # above the 100 W limit, as traced
    time.sleep(0.3)
    e1, t2 = gpu.energy(), time.time()
    expected = high * (t1 - t0) + low * (t2 - t1)
    assert abs((e1 - e0) - expected) <= 2 * high * 0.1  # within the counter's updates
    assert fake.state["set_calls"] == [[0, 100_000]]


def test_load_sets_the_power_the_row_measured(nvml_gpus):
    fake = nvml_gpus("h100", 1)
    gpu = device.current("nvml").gpu(0)
    assert gpu.power() == 693.0
    fake.set_device(0, load="memory")
    assert gpu.power() == 386.0
    fake.set_device(0, load="idle")
    assert gpu.power() == 127.0
    assert gpu.read_power("device_instant") == 127.0  # the H100 answers the power fields
    assert "device_average" in gpu.power_domains()


def test_limits_set_at_once_by_several_writers_are_all_kept(nvml_gpus):
    """Ranks change their own GPUs at the same moment; the shared state loses no change."""
    fake = nvml_gpus("a40", 4)
    nv = fake.module

    def writer(index: int) -> None:
        handle = nv.nvmlDeviceGetHandleByIndex(index)
        for w in range(150, 300, 10):
            nv.nvmlDeviceSetPowerManagementLimit(handle, w * 1000)

    nv.nvmlInit()
    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    calls = fake.state["set_calls"]
    assert len(calls) == 4 * 15
    assert all(d["limit_mw"] == 290_000 for d in fake.state["devices"])


def test_errors_are_injected_on_shaped_gpus_too(nvml_gpus):
    from zeus_nb.errors import UnsupportedError, ZeusNbError

    fake = nvml_gpus("v100", 2)
    system = device.current("nvml")
    assert system.gpu(1).energy() >= 0
    fake.set_device(1, energy_error="Unknown")
    with pytest.raises(ZeusNbError, match="GPU 1"):
        system.gpu(1).energy()
    assert system.gpu(0).energy() >= 0  # the other GPU reads on
    fake.set_device(1, power_error="NotSupported")
    with pytest.raises(UnsupportedError):
        system.gpu(1).power()


# --- what the checks accept ----------------------------------------------------------------------
def _records(t: float, e: float) -> dict:
    """The same (time, energy) of one GPU as each kind of input that checks energy over time."""
    from zeus_nb.inputs import kinds

    return {
        kinds.MONITOR_LOG: {
            "start_time": 1.0,
            "window_name": "__GlobalPowerLimitOptimizer_700",
            "elapsed_time": t,
            "gpu0_energy": e,
        },
        kinds.PL_MEASUREMENT: {"power_limit": 700, "energy": e, "time": t, "num_gpus": 1},
        kinds.SWEEP_RESULT: {
            "batch_size": 32,
            "power_limit": 700,
            "time": t,
            "energy": e,
            "num_gpus": 1,
        },
        kinds.OBSERVATION: {"batch_size": 32, "time": t, "energy": e, "reached": True},
    }


def test_the_checks_accept_every_window_an_h100_counter_reads(nvml_gpus):
    """Windows from 5 ms to 0.3 s on the H100's counter read 0 J or whole 69.3 J updates (1 kW
    or more over 50 ms): every file and record check takes them, as they are what a GPU reads."""
    from zeus_nb.inputs import check_record

    nvml_gpus("h100", 1)
    system = device.current("nvml")
    gpu = system.gpu(0)
    readings = []
    for seconds in (0.005, 0.02, 0.05, 0.12, 0.3):
        for _ in range(3):
            t0, e0 = system.clock(), gpu.energy()
            time.sleep(seconds)
            readings.append((system.clock() - t0, gpu.energy() - e0))
    assert any(e == 0 for _, e in readings) and any(e > 600 * t for t, e in readings)
    # and the extremes: nothing drawn yet, or a whole update more than the window lasted
    readings += [(0.02, 0.0), (0.02, 693 * 0.12 * 0.999), (0.099, 0.0)]
    for t, e in readings:
        for schema, record in _records(t, e).items():
            check_record(record, schema, f"{schema.name} of {t:.3f} s")


PER_GPU = ("ZeusMonitor log", "power-limit measurement", "sweep result")


@pytest.mark.parametrize(
    ("t", "e", "refused_by"),
    [
        (5.0, 5 * 693 * 1000.0, PER_GPU),  # energy in mJ (a whole job of 1000 GPUs could)
        (5000.0, 5 * 693.0, (*PER_GPU, "batch-size optimizer run")),  # time in ms
        # a long window that measured nothing (a sweep row of 0 J is a run that never stepped)
        (5.0, 0.0, ("ZeusMonitor log", "power-limit measurement", "batch-size optimizer run")),
        (0.05, 1e4, PER_GPU),  # more than 0.15 s of drawing at any power one GPU draws
    ],
)
def test_the_checks_still_refuse_what_no_counter_reads(t, e, refused_by):
    from zeus_nb.errors import InputError
    from zeus_nb.inputs import check_record

    for schema, record in _records(t, e).items():
        if schema.name in refused_by:
            with pytest.raises(InputError, match="out of range"):
                check_record(record, schema, "a mistake")
        else:
            check_record(record, schema, "a whole job")
