"""ZeusMonitor window semantics on the simulated GPU, and its CSV log."""

import csv
import dataclasses
import gc
import os
import subprocess
import sys

import pytest

import zeus_nb
from zeus_nb import device
from zeus_nb.errors import WindowError
from zeus_nb.monitor import Measurement, ZeusMonitor, log_file
from zeus_nb.utils import files


@pytest.fixture
def system():
    return device.use_simulated(gpu="a40", workload="cifar100", num_gpus=2)


def step_cost(system):
    t, p = system.step_cost(system.batch_size, 300.0)
    return t, p


def test_serial_windows(system):
    mon = ZeusMonitor()
    t, p = step_cost(system)
    for n in (1, 3):
        mon.begin_window("w")
        zeus_nb.step(n)
        m = mon.end_window("w")
        assert m.time == pytest.approx(n * t)
        assert m.gpu_energy == {0: pytest.approx(n * t * p), 1: pytest.approx(n * t * p)}
        assert m.total_energy == pytest.approx(2 * n * t * p)
        assert m.average_power == pytest.approx(2 * p)


def test_nested_and_overlapping_windows(system):
    mon = ZeusMonitor(gpu_indices=[1])
    t, p = step_cost(system)
    mon.begin_window("epoch")
    zeus_nb.step()
    mon.begin_window("a")
    zeus_nb.step()
    mon.begin_window("b")  # overlaps a, ends after it
    zeus_nb.step()
    a = mon.end_window("a")
    zeus_nb.step()
    b = mon.end_window("b")
    epoch = mon.end_window("epoch")
    assert (epoch.time, a.time, b.time) == pytest.approx((4 * t, 2 * t, 2 * t))
    assert list(epoch.gpu_energy) == [1]
    assert epoch.total_energy == pytest.approx(4 * t * p)
    assert mon.open_windows == []


def test_errors_and_restart(system):
    mon = ZeusMonitor()
    mon.begin_window("train")
    with pytest.raises(WindowError, match="already open.*restart=True"):
        mon.begin_window("train")
    with pytest.raises(ValueError):  # the seed notebook catches ValueError
        mon.begin_window("train")
    with pytest.raises(WindowError, match=r"'val' was never begun \(open windows: 'train'\)"):
        mon.end_window("val")
    zeus_nb.step(5)
    mon.begin_window("train", restart=True)  # e.g. a notebook cell run again
    zeus_nb.step()
    assert mon.end_window("train").time == pytest.approx(step_cost(system)[0])


def test_cancel_returns_empty_and_is_not_logged(system, tmp_path):
    log = tmp_path / "log.csv"
    mon = ZeusMonitor(log_file=log)
    mon.begin_window("x")
    zeus_nb.step()
    assert mon.end_window("x", cancel=True) == Measurement(0.0, {0: 0.0, 1: 0.0})
    assert mon.open_windows == []
    assert log.read_text().splitlines() == [
        "start_time,window_name,elapsed_time,gpu0_energy,gpu1_energy"
    ]


def test_context_manager_fills_measurement_and_cancels_on_error(system):
    mon = ZeusMonitor()
    with mon.window("w") as m:
        zeus_nb.step(2)
    assert m.time == pytest.approx(2 * step_cost(system)[0])
    with pytest.raises(RuntimeError), mon.window("w"):
        raise RuntimeError("cell failed")
    assert mon.open_windows == []


def test_log_matches_the_profile_format_and_appends(system, tmp_path):
    log = tmp_path / "sub" / "log.csv"
    mon = ZeusMonitor(gpu_indices=[0], log_file=log)
    mon.begin_window("__GlobalPowerLimitOptimizer_300")
    zeus_nb.step(2)
    m = mon.end_window("__GlobalPowerLimitOptimizer_300")
    mon2 = ZeusMonitor(gpu_indices=[0], log_file=log)  # same header: appends
    with mon2.window("second"):
        zeus_nb.step()
    with log.open() as f:
        lines = list(csv.reader(f))
    header = ["start_time", "window_name", "elapsed_time", "gpu0_energy"]
    assert lines[0] == header and lines[2] == header  # each monitor's run starts with a header
    rows = [dict(zip(header, r, strict=True)) for r in (lines[1], lines[3])]
    assert [r["window_name"] for r in rows] == ["__GlobalPowerLimitOptimizer_300", "second"]
    assert float(rows[0]["elapsed_time"]) == m.time
    assert float(rows[0]["gpu0_energy"]) == m.gpu_energy[0]
    assert float(rows[1]["start_time"]) == pytest.approx(m.time)
    with pytest.raises(ValueError, match="has header"):
        ZeusMonitor(gpu_indices=[0, 1], log_file=log)


def test_log_rows_are_written_at_once_and_fsynced_at_most_once_a_second(
    system, tmp_path, monkeypatch
):
    """A window per training step must not wait for the disk at every step: each row is one
    whole write, readable at once, and rows are fsynced at most once a second (by the clock the
    log reads) and when the monitor lets go of the log, so none is left unsynced."""
    now = [1000.0]
    monkeypatch.setattr(log_file.time, "monotonic", lambda: now[0])
    synced: list[float] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(now[0]), real_fsync(fd))[1])
    log = tmp_path / "log.csv"
    mon = ZeusMonitor(gpu_indices=[0], log_file=log)
    synced.clear()  # the header's write, which starts the run, is fsynced as before
    for i in range(30):  # 30 windows of 0.1 s by the log's clock
        with mon.window(f"step{i}"):
            zeus_nb.step()
        now[0] += 0.1
        assert sum(1 for _ in log.open()) == 2 + i  # the row is in the file at once
    assert len(synced) in (2, 3), synced  # 3 s of windows: one fsync a second at most
    assert all(b - a >= log_file.SYNC_S - 1e-9 for a, b in zip(synced, synced[1:], strict=False))
    synced.clear()
    del mon
    gc.collect()
    assert synced, "rows written since the last fsync were not fsynced when the log was let go"


def test_a_row_torn_by_a_failed_write_is_repaired_before_the_next_row(
    system, tmp_path, monkeypatch
):
    """A row cut short by a failed write (a full disk) whose cut-off itself failed is repaired
    before the next row goes out: the monitor skips the tail's repair only after its own whole
    rows, so no row is ever appended onto part of another."""
    log = tmp_path / "log.csv"
    mon = ZeusMonitor(gpu_indices=[0], log_file=log)
    with mon.window("first"):
        zeus_nb.step()
    real_write = files._write

    def half_then_full(fd, data):
        real_write(fd, bytes(data)[: len(data) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files, "_write", half_then_full)
    monkeypatch.setattr(os, "ftruncate", lambda fd, n: (_ for _ in ()).throw(OSError(5, "EIO")))
    with mon.window("torn"):  # measured and returned; its row waits for the next window
        zeus_nb.step()
    monkeypatch.undo()
    with mon.window("after"):
        zeus_nb.step()
    rows = list(csv.reader(log.open()))
    assert [r[1] for r in rows[1:]] == ["first", "torn", "after"], rows
    assert all(len(r) == 4 for r in rows), rows  # whole rows only: the torn part was cut


@pytest.mark.parametrize("backend", ["nvml", "sim"])
def test_window_edges_fill_every_field_of_their_dataclasses(backend, request):
    """begin_window and end_window fill MeasurementState and Measurement slot by slot, without
    their __init__ (zeus_nb/monitor/states.py): a field added to either and left unset there
    fails here. NVML's counters are read as Zeus reads them (both edges so); the simulated
    GPU's window ends by the dataclass's own __init__."""
    if backend == "nvml":
        request.getfixturevalue("fake_nvml")
    else:
        device.use_simulated(workload="cifar100")
    mon = ZeusMonitor(gpu_indices=[0], cpu_indices=[])
    mon.begin_window("w")
    start = mon.measurement_states["w"]
    zeus_nb.step()
    end = mon.end_window("w")
    assert end.time > 0 and end.gpu_energy[0] > 0
    for made in (start, end):
        # getattr raises AttributeError on a slot that was never filled
        values = {f.name: getattr(made, f.name) for f in dataclasses.fields(made)}
        assert type(made)(**values) == made


def test_bad_gpu_indices(system):
    with pytest.raises(ValueError, match="no GPU with index 5 on the sim backend"):
        ZeusMonitor(gpu_indices=[5])
    with pytest.raises(ValueError, match="duplicates"):
        ZeusMonitor(gpu_indices=[0, 0])


def test_seed_snippet_runs_with_only_the_import_changed():
    """The getting-started loop, on the simulated backend, plus zeus_nb.step() per step."""
    from zeus_nb.monitor import ZeusMonitor  # the only changed line

    system = device.use_simulated(gpu="v100", workload="cifar100", batch_size=1024)
    train_loader = range(system.steps_per_epoch())
    monitor = ZeusMonitor(gpu_indices=[0])
    lines = []
    for epoch in range(2):
        monitor.begin_window("epoch")
        measurements = []
        for _ in train_loader:
            monitor.begin_window("step")
            zeus_nb.step()  # train_one_step(x, y)
            result = monitor.end_window("step")
            measurements.append(result)
        eres = monitor.end_window("epoch")
        lines.append(f"Epoch {epoch} consumed {eres.time} s and {eres.total_energy} J.")
        avg_time = sum(map(lambda m: m.time, measurements)) / len(measurements)
        avg_energy = sum(map(lambda m: m.total_energy, measurements)) / len(measurements)
        assert avg_time * len(measurements) == pytest.approx(eres.time)
        assert avg_energy * len(measurements) == pytest.approx(eres.total_energy)
    row = system.trace.query(
        "dataset == 'cifar100' and optimizer == 'adadelta' and batch_size == 1024 and "
        "power_limit == 250"
    ).iloc[0]
    assert eres.time == pytest.approx(row.time_per_epoch)
    assert eres.total_energy == pytest.approx(row.time_per_epoch * row.average_power)


def test_import_is_light():
    code = "import sys, zeus_nb, zeus_nb.cli; zeus_nb.cli.build_parser(); " + (
        "print(sorted(m for m in ('torch', 'matplotlib', 'pandas') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
