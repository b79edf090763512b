"""Original power limits come back after normal exit, exceptions, Ctrl-C, SIGTERM and SIGKILL.

Each case runs a training loop in a subprocess against the fake NVML (state shared via a file),
interrupts it mid-profiling and checks the fake GPUs' final limits.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from zeus_nb.device.recovery import restore_from_state_files

pytestmark = pytest.mark.slow

ORIGINAL_MW = [250_000, 225_000]

SCRIPT = textwrap.dedent(
    """
    import sys, time
    from zeus_nb.monitor import ZeusMonitor
    from zeus_nb.optimizer import Energy, GlobalPowerLimitOptimizer

    mode = sys.argv[1]
    if mode == "handler":  # the program's own SIGTERM handler must still run
        import signal

        def handler(signum, frame):
            print("own handler", flush=True)
            sys.exit(3)

        signal.signal(signal.SIGTERM, handler)
    monitor = ZeusMonitor(gpu_indices=[0, 1])
    plo = GlobalPowerLimitOptimizer(
        monitor, Energy(), wait_steps=0, warmup_steps=1, profile_steps=2, verbose=False
    )
    step = 0
    while True:
        plo.on_step_begin()
        time.sleep(0.01)
        plo.on_step_end()
        step += 1
        if step == 4:  # the second profiled limit set and warming up
            print("profiling", flush=True)
            if mode == "raise":
                raise RuntimeError("training failed")
            if mode in ("loop", "handler"):
                sys.stdin.readline()  # held here while the test reads the limits, then trains on
        if mode == "normal" and plo.done:
            print("optimum", plo.optimal_power_limit, flush=True)
            break
    """
)


@pytest.fixture
def setup(fake_nvml, tmp_path, spawn):
    for i, mw in enumerate(ORIGINAL_MW):
        fake_nvml.set_device(i, limit_mw=mw)
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = fake_nvml.env()
    env["ZEUS_NB_STATE_DIR"] = str(tmp_path / "state")
    return fake_nvml, script, env, tmp_path / "state", spawn


def start(spawn, script, env, mode):
    return spawn([sys.executable, str(script), mode], env=env)


def wait_profiling(proc, fake):
    """Read the limits while the training loop is held mid-profiling, then let it train on (a
    loop left running would move past this limit while a busy machine delays the test)."""
    line = proc.stdout.readline()
    assert line.strip() == "profiling", proc.stderr.read()
    limits = fake.limits_w()  # the second limit of the descent, on both GPUs, neither original
    assert limits[0] == limits[1] and limits[0] not in originals_w() and limits[0] < 300
    proc.stdin.write("\n")
    proc.stdin.flush()


def originals_w():
    return [mw / 1000 for mw in ORIGINAL_MW]


def test_normal_exit_restores_after_applying_the_optimum(setup):
    fake, script, env, state, spawn = setup
    proc = start(spawn, script, env, "normal")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    optimum = float(out.split("optimum")[1])
    calls = [tuple(c) for c in fake.state["set_calls"]]
    opt_mw = int(optimum * 1000)
    assert {(0, opt_mw), (1, opt_mw)} <= set(calls)  # the optimum was applied
    assert calls[-2:] == [(0, ORIGINAL_MW[0]), (1, ORIGINAL_MW[1])]  # then the originals
    assert fake.limits_w() == originals_w()
    assert not list(state.glob("*.json"))


def test_exception_restores(setup):
    fake, script, env, state, spawn = setup
    proc = start(spawn, script, env, "raise")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "training failed" in err
    assert fake.limits_w() == originals_w()
    assert not list(state.glob("*.json"))


@pytest.mark.parametrize(
    ("sig", "code"),
    [(signal.SIGINT, -signal.SIGINT), (signal.SIGTERM, -signal.SIGTERM)],
    ids=["int", "term"],
)
def test_signals_restore(setup, sig, code):
    fake, script, env, state, spawn = setup
    proc = start(spawn, script, env, "loop")
    wait_profiling(proc, fake)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert fake.limits_w() == originals_w()
    assert not list(state.glob("*.json"))


def test_sigterm_chains_to_the_programs_own_handler(setup):
    fake, script, env, state, spawn = setup
    proc = start(spawn, script, env, "handler")
    wait_profiling(proc, fake)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    assert "own handler" in out
    assert fake.limits_w() == originals_w()


def test_sigkill_leaves_a_state_file_that_zeus_nb_restore_uses(setup):
    fake, script, env, state, spawn = setup
    proc = start(spawn, script, env, "loop")
    wait_profiling(proc, fake)
    proc.kill()
    proc.communicate(timeout=60)
    assert fake.limits_w() != originals_w()
    files = list(state.glob("*.json"))
    assert len(files) == 1
    recorded = json.loads(files[0].read_text())
    assert [(e["gpu"], e["kind"], e["original"]) for e in recorded["settings"]] == [
        (i, "power_limit", w) for i, w in enumerate(originals_w())
    ]

    done = subprocess.run(
        [sys.executable, "-m", "zeus_nb", "restore"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "restored" in done.stdout
    assert fake.limits_w() == originals_w()
    assert not list(state.glob("*.json"))
    again = subprocess.run(
        [sys.executable, "-m", "zeus_nb", "restore"], env=env, capture_output=True, text=True
    )
    assert again.returncode == 0 and "nothing to restore" in again.stdout


def test_restore_skips_live_processes_unless_forced(tmp_path):
    """Also: a state file of the first format (power limits only) is still restored."""
    path = tmp_path / "x.json"
    import socket

    path.write_text(
        json.dumps(
            {
                "format": "zeus-nb power-limit state",
                "host": socket.gethostname(),
                "pid": os.getppid(),
                "backend": "sim",
                "cuda_visible_devices": None,
                "gpus": [{"index": 0, "name": "x", "power_limit": 200.0}],
            }
        )
    )
    (tmp_path / "bad.json").write_text("{")
    results = {r.path.name: r for r in restore_from_state_files(tmp_path)}
    assert results["x.json"].action == "skipped" and "still running" in results["x.json"].detail
    assert results["bad.json"].action == "failed"
    forced = {r.path.name: r for r in restore_from_state_files(tmp_path, force=True)}
    assert forced["x.json"].action == "restored"
    assert not path.exists()


def test_power_limits_restored_block_puts_limits_back_and_cleans_its_state(fake_nvml, tmp_path):
    """The context manager the sweep and the notebooks' explorers share."""
    from zeus_nb import device
    from zeus_nb.device.guard import power_limits_restored, state_dir

    gpus = device.current("nvml").gpus
    gpus[1].set_power_limit(250)  # an original that is not the maximum
    with pytest.raises(RuntimeError), power_limits_restored(gpus, backend="nvml") as guard:
        for g in gpus:
            g.set_power_limit(150)
        assert guard.path is not None and guard.path.exists()  # crash insurance while inside
        saved = json.loads(guard.path.read_text())
        assert [e["original"] for e in saved["settings"]] == [300.0, 250.0]
        raise RuntimeError("training failed")
    assert fake_nvml.limits_w() == [300.0, 250.0]
    assert list(state_dir().glob("*.json")) == []
