"""One test per way a careless user once got a wrong answer, lost data or a raw error.

Each of these failed before the input boundary (``zeus_nb.utils.schema``), the write path
(``zeus_nb.utils.files``) and the entry-point boundary (``zeus_nb.utils.boundary``) existed;
docs/reliability.md names them.
"""

from __future__ import annotations

import csv
import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path

import pytest
from disk_faults import fill, mount_tiny_tmpfs

import zeus_nb
from zeus_nb import device
from zeus_nb.cli import main
from zeus_nb.errors import ZeusNbError
from zeus_nb.monitor import ZeusMonitor

REPO = Path(__file__).resolve().parents[1]
PROFILES = resources.files("zeus_nb") / "resources" / "zeus_profiles"
LOG = PROFILES / "A40+resnet50+gpu0.csv"


def _one_line_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# --- 1. values checked at every entry point ------------------------------------------------
@pytest.mark.parametrize("n", [math.nan, math.inf, 1.5, "3", -math.inf])
def test_step_refuses_a_count_that_is_not_a_whole_number(n):
    device.use_simulated()
    monitor = ZeusMonitor()
    monitor.begin_window("w")
    with pytest.raises(ZeusNbError, match="step"):
        zeus_nb.step(n)
    zeus_nb.step(3)
    m = monitor.end_window("w")
    assert math.isfinite(m.total_energy) and m.total_energy > 0


def _profile_in_ms(tmp_path: Path) -> Path:
    good = tmp_path / "p.csv"
    assert main(["perseus", "synthetic", str(good), "--stages", "2"]) == 0
    lines = good.read_text().splitlines()
    out = []
    for line in lines:
        cells = line.split(",")
        if len(cells) == 5 and cells[0].isdigit():
            cells[3] = repr(float(cells[3]) * 1000)  # seconds written as milliseconds
        out.append(",".join(cells))
    bad = tmp_path / "p_ms.csv"
    bad.write_text("\n".join(out) + "\n")
    return bad


def test_perseus_plan_refuses_a_profile_in_milliseconds(tmp_path, capsys):
    bad = _profile_in_ms(tmp_path)
    capsys.readouterr()
    assert main(["perseus", "plan", str(bad), "--stages", "2", "--microbatches", "4"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    line = _one_line_error(err)
    assert str(bad) in line and "time" in line, line


def test_batch_size_optimizer_refuses_a_fractional_batch_size():
    from zeus_nb.optimizer.batch_size import BatchSizeOptimizer, MemoryStore

    with pytest.raises(ZeusNbError, match="batch_sizes"):
        BatchSizeOptimizer("job", MemoryStore(), batch_sizes=[1.5, 2], default_batch_size=2)
    with pytest.raises(ZeusNbError, match="default_batch_size"):
        BatchSizeOptimizer("job", MemoryStore(), batch_sizes=[1, 2], default_batch_size=2.5)


@pytest.mark.parametrize(
    ("time_s", "energy"), [(0.0, 0.0), (0.0, 100.0), (10.0, 0.0), (10.0, math.nan)]
)
def test_batch_size_optimizer_refuses_an_empty_run(time_s, energy):
    from zeus_nb.optimizer.batch_size import BatchSizeOptimizer, MemoryStore

    bso = BatchSizeOptimizer(
        "job", MemoryStore(), batch_sizes=[8, 16], default_batch_size=16, max_power=300
    )
    with pytest.raises(ZeusNbError, match="time|energy|power"):
        bso.report(16, time=time_s, energy=energy, reached=True)
    assert bso.num_observations == 0


# --- 2. repeated rows get an identity --------------------------------------------------------
def _profile_run(log: Path, stop_after: int | None = None) -> float | None:
    """One GlobalPowerLimitOptimizer run over the shipped A40 log, written to ``log``."""
    from zeus_nb.device.replay import ReplaySystem
    from zeus_nb.optimizer.power_limit import GlobalPowerLimitOptimizer

    system = ReplaySystem(str(LOG), steps_per_window=40)
    plo = GlobalPowerLimitOptimizer(
        ZeusMonitor(system=system, log_file=log),
        wait_steps=0,
        profile_steps=40,
        adaptive=False,
        verbose=False,
    )
    while not plo.done:
        if stop_after is not None and len(plo.measurements) >= stop_after:
            break  # the run is killed here
        plo.on_step_begin()
        system.step()
        plo.on_step_end()
    return plo.optimal_power_limit


@pytest.mark.parametrize("selector", ["zeus-cost", "energy", "time", "max-slowdown"])
def test_replay_of_a_log_with_a_second_interrupted_run(tmp_path, capsys, selector):
    clean, twice = tmp_path / "clean.csv", tmp_path / "twice.csv"
    _profile_run(clean)
    _profile_run(twice)
    _profile_run(twice, stop_after=3)
    capsys.readouterr()
    assert main(["plo", "replay", str(clean), "--selector", selector, "--json"]) == 0
    want = json.loads(capsys.readouterr().out)["power_limit"]
    # the log marks which run finished: the complete one is replayed, the other named
    assert main(["plo", "replay", str(twice), "--selector", selector, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert (got["power_limit"], got["run"], got["ignored_runs"]) == (want, 1, [2])
    assert main(["plo", "replay", str(twice), "--selector", selector, "--run", "1"]) == 0
    assert f"chosen power limit: {want:g} W" in capsys.readouterr().out


# --- 3. writes that are atomic and without side effects -------------------------------------
@pytest.fixture
def tiny_disk(tmp_path):
    """A 64 KiB tmpfs (root only); the test is skipped where it cannot be mounted."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if not mount_tiny_tmpfs(mnt):
        pytest.skip("cannot mount a tmpfs here (needs root); see test_torn_appends_* instead")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_full_disk_never_leaves_a_torn_row_that_later_runs_append_onto(tiny_disk, caplog):
    device.use_simulated()
    log = tiny_disk / "monitor.csv"
    monitor = ZeusMonitor(log_file=log)
    filler = fill(tiny_disk)
    names = []
    for i in range(200):  # enough rows to cross a page of the full disk
        name = f"w{i}"
        monitor.begin_window(name)
        zeus_nb.step(1)
        m = monitor.end_window(name)
        assert math.isfinite(m.total_energy) and m.total_energy > 0  # never lost
        names.append(name)
    assert "could not" in caplog.text
    filler.unlink()  # space again: a later run appends to the same log
    later = ZeusMonitor(log_file=log)
    later.begin_window("later")
    zeus_nb.step(1)
    later.end_window("later")
    monitor.begin_window("last")
    zeus_nb.step(1)
    assert monitor.end_window("last").total_energy > 0  # measured, but the log is later's now
    assert "newer ZeusMonitor" in caplog.text
    rows = list(csv.reader(log.open(newline="")))
    header = rows[0]
    body = [r for r in rows[1:] if r != header]
    assert all(len(r) == len(header) for r in body), [r for r in body if len(r) != len(header)]
    for r in body:
        float(r[2]), float(r[3])  # every number whole
    assert sorted(r[1] for r in body) == sorted([*names, "later"])


def _foreign_sqlite(path: Path) -> bytes:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    conn.execute("INSERT INTO notes(text) VALUES ('mine')")
    conn.commit()
    conn.close()
    return path.read_bytes()


@pytest.mark.parametrize("job", [[], ["some-job"]])
def test_bso_show_never_writes_to_another_programs_database(tmp_path, capsys, job):
    db = tmp_path / "other.sqlite3"
    before = _foreign_sqlite(db)
    code = main(["bso", "show", *job, "--store", str(db)])
    assert db.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.sqlite3"]
    assert code == 2
    assert str(db) in _one_line_error(capsys.readouterr().err)


def test_a_profile_that_cannot_be_saved_does_not_stop_training(tmp_path, caplog):
    from replay_profiling import profile_on_replayed_log

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the profile's folder should be")
    with caplog.at_level("WARNING"):
        plo = profile_on_replayed_log(blocker / "profile.json")
    assert plo.done and plo.optimal_power_limit is not None
    assert "profile.json" in caplog.text


# --- 4. dependency errors and waits ---------------------------------------------------------
def _subprocess(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "ZEUS_NB_BACKEND": "sim", "ZEUS_NB_SIM_GPUS": "2"}
    return subprocess.run(
        [sys.executable, *argv], capture_output=True, text=True, env=env, timeout=timeout
    )


@pytest.mark.parametrize(
    "args",
    [
        ["power", "--update-period", "-1", "--duration", "1"],
        ["power", "--duration", "nan"],
        ["energy", "--gpu-indices", "5", "--duration", "1"],
        ["energy", "--gpu-indices", "-1"],
    ],
)
def test_python_m_monitor_has_an_error_boundary(args):
    done = _subprocess("-m", "zeus_nb.monitor", *args, "--backend", "sim")
    assert done.returncode == 2, done.stderr
    line = _one_line_error(done.stderr)
    assert line.startswith("python -m zeus_nb.monitor")


def test_numpy_seed_message_does_not_reach_the_user(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["bso", "simulate", "--workload", "cifar100", "--seed", "-1"])
    assert exit_.value.code == 2
    line = _one_line_error(capsys.readouterr().err)
    assert "--seed" in line and "expected non-negative integer" not in line


def test_a_file_that_is_not_a_store_is_named_as_such(tmp_path, capsys):
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    assert main(["bso", "show", "--store", str(text)]) == 2
    line = _one_line_error(capsys.readouterr().err)
    assert str(text) in line and "not a SQLite" in line
    assert text.read_text() == "hello\n"


@pytest.mark.parametrize("address", ["foo:bar", "tcp://host:99999", "tcp://"])
def test_a_bad_scheduler_address_is_a_usage_error(tmp_path, capsys, address):
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exit_:
        main(["sweep", "01", "-o", str(out), "--scheduler", address])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--scheduler" in err and "int()" not in err
    assert not out.exists()


def test_a_scheduler_with_nothing_listening_fails_with_a_short_connect_timeout(monkeypatch):
    distributed = pytest.importorskip("distributed")
    from zeus_nb.runner import cluster

    seen = {}

    def fake_client(address, **kw):
        seen.update(kw, address=address)
        raise OSError(f"Timed out trying to connect to {address}")

    monkeypatch.setattr(distributed, "Client", fake_client)
    with (
        pytest.raises(cluster.ClusterError, match="127.0.0.1"),
        cluster.open_client(scheduler="tcp://127.0.0.1:9"),
    ):
        pass
    timeout = seen["timeout"]
    seconds = float(str(timeout).rstrip("s"))
    assert seconds <= 10, timeout


def test_slurm_without_sbatch_fails_at_once(monkeypatch, tmp_path):
    pytest.importorskip("distributed")
    from zeus_nb.runner import cluster

    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch on it

    def never(*a, **kw):
        raise AssertionError("a Slurm cluster was started without sbatch")

    monkeypatch.setattr(cluster, "slurm_cluster", never)
    with pytest.raises(cluster.ClusterError, match="sbatch"), cluster.open_client(cluster="slurm"):
        pass


# --- 5. empty and unknown values, flags that do not apply -----------------------------------
@pytest.mark.parametrize(
    "argv",
    [
        ["sweep", "01", "-o", ""],
        ["sweep", "01", "--scheduler", ""],
        ["tour", "-o", ""],
        ["course", "build", "-o", ""],
        ["bso", "show", "--store", ""],
        ["restore", "--state-dir", ""],
        ["notebooks", ""],
    ],
)
def test_an_empty_string_is_never_the_default(tmp_path, monkeypatch, capsys, argv):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert "empty" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("value", ["strct", "yes", "1"])
def test_an_unknown_checks_mode_is_refused(monkeypatch, value):
    from zeus_nb.course import check

    monkeypatch.setenv("ZEUS_NB_CHECKS", value)
    with pytest.raises(ZeusNbError, match="ZEUS_NB_CHECKS"):
        check.strict()


@pytest.mark.parametrize(
    "extra",
    [
        ["--selector", "zeus-cost", "--factor", "1.2"],
        ["--selector", "energy", "--eta", "0.3"],
        ["--selector", "max-slowdown", "--eta", "0.3"],
        ["--selector", "time", "--factor", "1.1"],
    ],
)
def test_a_knob_of_another_selector_is_an_error(capsys, extra):
    with pytest.raises(SystemExit) as exit_:
        main(["plo", "replay", str(LOG), *extra])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert extra[2] in err and "--selector" in err


@pytest.mark.parametrize("option", [["--jobs", "2"], ["--queue", "gpu"], ["--walltime", "2:00:00"]])
def test_slurm_options_without_cluster_slurm_are_errors(tmp_path, capsys, option):
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exit_:
        main(["sweep", "01", "-o", str(out), "--workers", "1", *option])
    assert exit_.value.code == 2
    assert option[0] in capsys.readouterr().err
    assert not out.exists()


# --- also: JupyterLab stops with zeus-nb lab; docs build on the base install ----------------
def test_lab_forwards_sigterm_to_jupyterlab(tmp_path):
    pidfile = tmp_path / "child.pid"
    child = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(120)"
    script = (
        "import sys; from pathlib import Path; from zeus_nb.commands.lab import launch; "
        f"sys.exit(launch([sys.executable, '-c', {child!r}, {str(pidfile)!r}], Path('.')))"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    parent = subprocess.Popen([sys.executable, "-c", script], env=env, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while not (pidfile.exists() and pidfile.read_text()):
            assert parent.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        pid = int(pidfile.read_text())
        parent.send_signal(signal.SIGTERM)
        parent.wait(timeout=30)
        for _ in range(300):  # the child is reaped by its parent before that exits
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, signal.SIGKILL)
            pytest.fail("JupyterLab kept running after zeus-nb lab was stopped")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_docs_build_without_the_docs_extra_names_it(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "mkdocs", None)  # as on the base install
    monkeypatch.setitem(sys.modules, "mkdocs.commands", None)
    monkeypatch.setitem(sys.modules, "mkdocs.commands.build", None)
    monkeypatch.setitem(sys.modules, "mkdocs.config", None)
    assert main(["docs", "build", str(tmp_path / "site"), "--no-execute"]) == 2
    line = _one_line_error(capsys.readouterr().err)
    assert "zeus-nb[docs]" in line and "ModuleNotFoundError" not in line
    assert not (tmp_path / "site").exists()
