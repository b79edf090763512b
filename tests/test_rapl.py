"""CPU package and DRAM energy through a fake powercap tree: reading, wrap-around, errors."""

from __future__ import annotations

import builtins
import gc
import os
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import fake_powercap as fp  # noqa: E402

from zeus_nb import device  # noqa: E402
from zeus_nb.device.cpu import PERMISSION_HINT, rapl, rapl_cpus  # noqa: E402
from zeus_nb.device.doctor import diagnose  # noqa: E402
from zeus_nb.errors import CpuEnergyError, CpuEnergyPermissionError  # noqa: E402
from zeus_nb.monitor import ZeusMonitor  # noqa: E402


@pytest.fixture
def powercap(tmp_path, monkeypatch) -> Path:
    root = fp.make_tree(tmp_path / "powercap", packages=2)
    monkeypatch.setenv("ZEUS_NB_POWERCAP_ROOT", str(root))
    return root


def test_packages_and_dram_are_found(powercap):
    cpus = rapl_cpus()
    assert [c.index for c in cpus] == [0, 1]
    assert all(c.supports_dram() for c in cpus)
    assert cpus[1].name == "RAPL package-1"


def test_monitor_measures_cpu_and_dram(powercap, fake_nvml):
    mon = ZeusMonitor(gpu_indices=[0], cpu_indices=[0, 1])
    mon.begin_window("w")
    fp.add_uj(powercap, 0, 5_000_000)
    fp.add_uj(powercap, 1, 2_500_000)
    fp.add_uj(powercap, 0, 750_000, sub=1)
    fp.add_uj(powercap, 1, 1_000, sub=0)  # a core subzone is not DRAM: not counted
    m = mon.end_window("w")
    assert m.cpu_energy == {0: pytest.approx(5.0), 1: pytest.approx(2.5)}
    assert m.dram_energy == {0: pytest.approx(0.75), 1: pytest.approx(0.0)}
    assert m.total_energy == pytest.approx(sum(m.gpu_energy.values()))  # GPUs only, as in Zeus


def _fd_path(fd: int) -> str | None:
    """The file descriptor's path, None when it is closed. One readlink, no exists() first: a
    thread of this process may close the number between the two (seen on a busy machine)."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except FileNotFoundError:
        return None


def test_counters_keep_their_file_open_and_stop_their_tracker_when_dropped(powercap):
    cpus = rapl_cpus()
    counter = cpus[0]._package  # the package's RAPLFile
    fd, path = counter._fd, counter.energy_uj_path
    assert os.readlink(f"/proc/self/fd/{fd}") == path
    before = counter.read()
    fp.set_uj(powercap, 0, 7_000_000)  # rewritten in place, as the kernel's value changes
    assert counter.read() - before == pytest.approx(7_000.0)  # mJ
    thread = counter.wraparound_tracker._thread
    assert thread.is_alive()
    del cpus, counter
    gc.collect()
    assert _fd_path(fd) != path  # closed (or the number reused for another file meanwhile)
    thread.join(timeout=5)
    assert not thread.is_alive()


def test_a_poll_that_fails_once_does_not_end_the_tracker(powercap, monkeypatch):
    """Beside four busy processes the poller read a counter file while the fake rewrote it
    (empty): the error ended its thread, and the wrap after it was never counted (2026-12-07).
    A read that fails once now costs one poll."""
    fp.set_uj(powercap, 0, fp.PACKAGE_RANGE_UJ - 1_000_000)  # near the top: polls every 0.1 s
    counter = rapl_cpus()[0]._package
    start = counter.read()
    tracker = counter.wraparound_tracker
    real, failed = rapl._read_uj, threading.Event()

    def fails_once(path: str) -> float:
        if not failed.is_set():
            failed.set()
            raise CpuEnergyError(f"cannot read the RAPL counter {path}: could not convert ''")
        return real(path)

    monkeypatch.setattr(rapl, "_read_uj", fails_once)
    assert failed.wait(5)  # the poller's next read failed
    fp.add_uj(powercap, 0, 3_000_000)  # wraps; only a poll sees it
    deadline = time.monotonic() + 5
    while tracker.get_num_wraparounds() == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert tracker._thread.is_alive()
    assert tracker.get_num_wraparounds() == 1
    assert counter.read() - start == pytest.approx(3_000.0)
    tracker.stop()


def test_the_fake_counter_is_never_seen_half_written(powercap):
    """As a kernel's counter: a value is rewritten in place in one write (a reader keeps the
    file open), never truncated first."""
    path = fp.zone(powercap, 0) / "energy_uj"
    fd = os.open(path, os.O_RDONLY)
    try:
        for value in (10**11, 5, 2_000_000):
            fp.set_uj(powercap, 0, value)
            assert float(os.pread(fd, 32, 0)) == value
            assert os.path.getsize(path) == fp.WIDTH
    finally:
        os.close(fd)


def test_a_wrap_between_reads_is_counted_by_the_tracker_thread(powercap):
    top = fp.PACKAGE_RANGE_UJ
    fp.set_uj(powercap, 0, top - 1_000_000)  # near the top: the tracker polls every 0.1 s
    counter = rapl_cpus()[0]._package
    start = counter.read()
    tracker = counter.wraparound_tracker
    fp.add_uj(powercap, 0, 3_000_000)  # wraps; no read sees it, the tracker's poll does
    deadline = time.monotonic() + 5
    while tracker.get_num_wraparounds() == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert tracker.get_num_wraparounds() == 1
    assert counter.read() - start == pytest.approx(3_000.0)
    tracker.stop()


def test_readings_older_than_the_last_poll_are_not_taken_for_wraps():
    """A reader's value may predate the tracker's last poll (read outside its lock)."""
    from zeus_nb.device.cpu.rapl import _Count, _WrapTally

    tally = _WrapTally(1000, 900, _Count())
    assert tally.wraps_for(950) == 0
    assert tally.wraps_for(40) == 1  # fell by more than half the range: a wrap
    assert tally.wraps_for(990) == 0  # read just before that wrap, judged late
    assert tally.wraps_for(30) == 1  # read before the 40, judged late: no second wrap
    assert tally.wraps_for(400) == 1  # a normal rise after the wrap
    assert tally.count.value == 1


def test_counter_wraparound(powercap, fake_nvml):
    top = fp.PACKAGE_RANGE_UJ
    fp.set_uj(powercap, 0, top - 1_000_000)
    mon = ZeusMonitor(gpu_indices=[0], cpu_indices=[0])
    mon.begin_window("w")
    fp.add_uj(powercap, 0, 3_000_000)  # wraps: the file now reads 2_000_000
    assert int((fp.zone(powercap, 0) / "energy_uj").read_text()) == 2_000_000
    m = mon.end_window("w")
    assert m.cpu_energy == {0: pytest.approx(3.0)}


def test_dram_missing_gives_none(tmp_path, monkeypatch, fake_nvml):
    root = fp.make_tree(tmp_path / "pc", packages=1, dram=False)
    monkeypatch.setenv("ZEUS_NB_POWERCAP_ROOT", str(root))
    m = ZeusMonitor(gpu_indices=[0], cpu_indices=[0])
    m.begin_window("w")
    fp.add_uj(root, 0, 1_000_000)
    r = m.end_window("w")
    assert r.cpu_energy == {0: pytest.approx(1.0)} and r.dram_energy is None


def _deny(monkeypatch, powercap):
    """Make package 0's energy_uj unreadable (root reads any mode, so patch the open)."""
    target = fp.zone(powercap, 0) / "energy_uj"
    if os.geteuid() != 0:
        target.chmod(0)
        return
    real = builtins.open

    def fake_open(file, *a, **k):
        if str(file) == str(target):
            raise PermissionError(13, "Permission denied", str(file))
        return real(file, *a, **k)

    monkeypatch.setattr(builtins, "open", fake_open)


def test_permission_denied_is_explained(powercap, monkeypatch, fake_nvml):
    _deny(monkeypatch, powercap)
    with pytest.raises(CpuEnergyPermissionError, match="chmod a\\+r") as err:
        ZeusMonitor(gpu_indices=[0], cpu_indices=[0])
    assert "cpu_indices=[]" in str(err.value) and PERMISSION_HINT in str(err.value)
    assert isinstance(err.value, PermissionError)
    # Not asked for explicitly: GPUs are still measured, CPUs are not.
    m = ZeusMonitor(gpu_indices=[0])
    m.begin_window("w")
    assert m.end_window("w").cpu_energy is None
    report = diagnose("nvml")
    assert "CPU energy: RAPL present but not readable" in report.lines
    assert any("chmod" in p for p in report.problems)


def test_no_rapl(tmp_path, monkeypatch, fake_nvml):
    monkeypatch.setenv("ZEUS_NB_POWERCAP_ROOT", str(tmp_path / "nothing"))
    with pytest.raises(CpuEnergyError, match="no RAPL package zone"):
        ZeusMonitor(gpu_indices=[0], cpu_indices=[0])
    m = ZeusMonitor(gpu_indices=[0])
    assert m.cpu_indices == []
    assert len(ZeusMonitor(gpu_indices=[0], cpu_indices=[]).cpus) == 0
    assert any(line.startswith("CPU energy: not available") for line in diagnose("nvml").lines)


def test_bad_cpu_index(powercap, fake_nvml):
    with pytest.raises(ValueError, match="no CPU package with index 7 \\(have: 0, 1\\)"):
        ZeusMonitor(gpu_indices=[0], cpu_indices=[7])


def test_doctor_reports_cpu_support(powercap, fake_nvml):
    lines = diagnose("nvml").lines
    assert "CPU energy: yes, 2 package(s)" in lines
    assert "  CPU 0: RAPL package-0 (with DRAM)" in lines


def test_simulated_cpu_model():
    """CodeCarbon's model: package at half the TDP, DRAM at 3 W per 8 GB, over simulated time."""
    import zeus_nb

    system = device.use_simulated(workload="cifar100", cpu_tdp=120.0, dram_gb=32.0)
    m = ZeusMonitor()
    m.begin_window("w")
    zeus_nb.step(3)
    r = m.end_window("w")
    assert r.time > 0
    assert r.cpu_energy == {0: pytest.approx(0.5 * 120.0 * r.time)}
    assert r.dram_energy == {0: pytest.approx(3.0 / 8.0 * 32.0 * r.time)}
    assert system.cpus()[0].name.startswith("simulated CPU (120 W TDP")
