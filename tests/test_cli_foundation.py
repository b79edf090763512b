"""zeus-nb doctor and demo, in process and as the installed console script."""

import shutil
import subprocess
import sys

import pytest

from zeus_nb import device
from zeus_nb.cli import main
from zeus_nb.device.gpu import nvidia as nvml_backend


def test_doctor_without_gpu_uses_simulated_backend(capsys, fake_nvml):
    fake_nvml.update(init_error="LibraryNotFound")
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "NVML: not usable: no NVIDIA driver found" in out
    assert "simulated" in out and "GPU 0: NVIDIA A40 (simulated)" in out
    assert "zeus-nb is usable." in out


def test_doctor_forced_nvml_without_driver_fails_with_fix(capsys, fake_nvml):
    fake_nvml.update(init_error="DriverNotLoaded")
    assert main(["doctor", "--backend", "nvml"]) == 1
    out = capsys.readouterr().out
    assert "ZEUS_NB_BACKEND=sim" in out and "cannot run here yet" in out


def test_doctor_on_gpus_without_permission_changes_nothing(capsys, fake_nvml, monkeypatch):
    monkeypatch.setattr(nvml_backend, "has_sys_admin", lambda: False)
    fake_nvml.set_device(1, energy_error="NotSupported", architecture=4)  # pre-Volta
    assert main(["doctor", "--backend", "nvml"]) == 0
    out = capsys.readouterr().out
    assert "driver: 550.54.15" in out and "nvml: 12.550.54.15" in out
    assert "power limit: 300 W (min 100 W, max 300 W, default 300 W)" in out
    assert out.count("may change power limits: no") == 2
    assert "energy counter: no (energy is integrated" in out
    assert "--cap-add SYS_ADMIN" in out and "zeus-nb is usable." in out
    assert fake_nvml.state["set_calls"] == []
    device.reset()


def test_demo_prints_epochs_consistent_with_the_trace(capsys):
    assert main(["demo", "--epochs", "2", "--workload", "cifar100", "--power-limit", "150"]) == 0
    out = capsys.readouterr().out.splitlines()
    system = device.current()
    t, p = system.step_cost(system.batch_size, 150.0)
    steps = system.steps_per_epoch()
    assert out[1] == f"epoch 0: {t * steps:.2f} s, {t * steps * p:.1f} J ({p:.1f} W)"
    assert len(out) == 3


def test_bad_input_is_one_clear_line(capsys):
    with pytest.raises(SystemExit) as exit_:  # a usage error, at parse time
        main(["demo", "--epochs", "0"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip() == (
        "zeus-nb demo: error: argument --epochs: '0' is out of range; expected an integer "
        "between 1 and 10000 (see zeus-nb demo --help)"
    )
    assert main(["demo", "--power-limit", "20"]) == 2
    assert "outside GPU 0's range [100, 300] W" in capsys.readouterr().err


def test_console_script_runs():
    exe = shutil.which("zeus-nb", path=str(__import__("pathlib").Path(sys.executable).parent))
    assert exe, "the zeus-nb console script is not installed next to this Python"
    out = subprocess.run([exe, "demo", "--epochs", "1"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("NVIDIA A40 (simulated)")


def test_a_reader_that_stops_early_gets_no_traceback():
    """`zeus-nb ... | head`: the command stops quietly when its reader closes the pipe."""
    # about 90 kB of JSON: more than a pipe holds, so the write meets the closed end
    cmd = [sys.executable, "-m", "zeus_nb.cli", "bso", "simulate", "--workload", "librispeech"]
    proc = subprocess.Popen(
        [*cmd, "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout.read(10) == '{"summary"'
    proc.stdout.close()
    err = proc.stderr.read()
    proc.stderr.close()
    assert proc.wait(timeout=60) == 1
    assert "Traceback" not in err and "BrokenPipe" not in err
