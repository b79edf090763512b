"""Locked SM clocks come back after normal exit, exceptions, Ctrl-C, SIGTERM and SIGKILL.

A subprocess applies a frequency plan through PipelineFrequencyOptimizer on a fake-NVML GPU and
is stopped mid-iteration; the fake GPU must end up unlocked (the driver choosing clocks again).
"""

import json
import signal
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent(
    """
    import sys, time
    from zeus_nb import device
    from zeus_nb.optimizer.pipeline_frequency import FrequencyPlan, PipelineFrequencyOptimizer

    mode = sys.argv[1]
    plan = FrequencyPlan.from_choice(2, 2, lambda op: 1410 if op[1] == "forward" else 1740)
    gpu = device.current("nvml").gpu(0)
    opt = PipelineFrequencyOptimizer(plan, 0, gpu, backend="nvml")
    step = 0
    while True:
        opt.on_step_begin()
        for inst, _, _ in plan.stages[0]:
            opt.on_instruction_begin(inst)
            time.sleep(0.005)
            opt.on_instruction_end(inst)
        opt.on_step_end()
        step += 1
        if step == 2:
            print("locked", flush=True)
            if mode == "raise":
                raise RuntimeError("training failed")
        if mode == "normal" and step == 3:
            opt.close()
            print("done", flush=True)
            break
    """
)


@pytest.fixture
def setup(fake_nvml, tmp_path, spawn):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = fake_nvml.env()
    env["ZEUS_NB_STATE_DIR"] = str(tmp_path / "state")
    return fake_nvml, script, env, tmp_path / "state", spawn


def start(spawn, script, env, mode):
    return spawn([sys.executable, str(script), mode], env=env)


def wait_locked(proc, fake):
    line = proc.stdout.readline()
    assert line.strip() == "locked", proc.stderr.read()
    assert fake.state["devices"][0]["locked_clocks"] in ([1410, 1410], [1740, 1740])


def test_normal_exit_resets_clocks(setup):
    fake, script, env, state, spawn = setup
    proc = start(spawn, script, env, "normal")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "done" in out, err
    calls = fake.state["clock_calls"]
    assert [0, 1410, 1410] in calls and [0, 1740, 1740] in calls
    assert calls[-1] == [0, "reset"] and calls.count([0, "reset"]) == 1
    assert fake.state["devices"][0]["locked_clocks"] is None
    assert fake.state["devices"][1]["locked_clocks"] is None  # never touched
    assert not list(state.glob("*.json"))


def test_exception_resets_clocks(setup):
    fake, script, env, state, spawn = setup
    proc = start(spawn, script, env, "raise")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "training failed" in err
    assert fake.state["devices"][0]["locked_clocks"] is None
    assert not list(state.glob("*.json"))


@pytest.mark.parametrize(
    ("sig", "code"),
    [(signal.SIGINT, -signal.SIGINT), (signal.SIGTERM, -signal.SIGTERM)],
    ids=["int", "term"],
)
def test_signals_reset_clocks(setup, sig, code):
    fake, script, env, state, spawn = setup
    proc = start(spawn, script, env, "loop")
    wait_locked(proc, fake)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert fake.state["devices"][0]["locked_clocks"] is None
    assert not list(state.glob("*.json"))


def test_sigkill_then_zeus_nb_restore_resets_clocks(setup):
    fake, script, env, state, spawn = setup
    proc = start(spawn, script, env, "loop")
    wait_locked(proc, fake)
    proc.kill()
    proc.communicate(timeout=60)
    assert fake.state["devices"][0]["locked_clocks"] is not None
    files = list(state.glob("*.json"))
    assert len(files) == 1
    recorded = json.loads(files[0].read_text())
    assert [(e["gpu"], e["kind"], e["original"]) for e in recorded["settings"]] == [
        (0, "locked_clocks", None)
    ]
    done = subprocess.run(
        [sys.executable, "-m", "zeus_nb", "restore"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "locked_clocks" in done.stdout
    assert fake.state["devices"][0]["locked_clocks"] is None
    assert fake.state["clock_calls"][-1] == [0, "reset"]
    assert not list(state.glob("*.json"))
