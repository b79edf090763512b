"""GPUs this process may read but not change, and changing them through zeusd.

A fake NVML whose setters all refuse with NO_PERMISSION (``deny_setters``) stands for a shared
node, a hosted notebook or a container without SYS_ADMIN; a fake zeusd on a real Unix socket,
started and stopped by each test, sets limits on the fake GPUs as the real daemon's NVML would.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from zeusd_fake import FakeZeusd, serve_unix

from zeus_nb import device
from zeus_nb.device.gpu.access import DIRECT, READ_ONLY, ZEUSD, ZeusdUnavailableError
from zeus_nb.device.gpu.common import ZeusGPUClockPermissionError, ZeusGPUNoPermissionError
from zeus_nb.runner.changes import nearest_simulated, settings_system


@pytest.fixture
def no_zeusd(monkeypatch):
    monkeypatch.delenv("ZEUSD_SOCK_PATH", raising=False)
    monkeypatch.delenv("ZEUSD_HOST_PORT", raising=False)
    monkeypatch.delenv("ZEUSD_TOKEN", raising=False)


@pytest.fixture
def denied(fake_nvml, no_zeusd):
    """Two fake A40s (100-300 W, at 300 W) whose every setter NVML refuses."""
    fake_nvml.update(deny_setters=True)
    return fake_nvml


@pytest.fixture
def socket_path(no_zeusd, monkeypatch):
    """A short Unix socket path, named by ZEUSD_SOCK_PATH (the daemon is not started here)."""
    folder = Path(tempfile.mkdtemp(prefix="zd", dir="/tmp"))
    path = str(folder / "s")
    monkeypatch.setenv("ZEUSD_SOCK_PATH", path)
    yield path
    for p in folder.iterdir():
        p.unlink()
    folder.rmdir()


def _daemon(fake_nvml, **kwargs) -> FakeZeusd:
    """A fake zeusd whose limit changes land on the fake GPUs, as its NVML's would."""
    fake = FakeZeusd(**kwargs)
    fake.on_limit = lambda i, mw: fake_nvml.set_device(i, limit_mw=mw)
    return fake


# --- read-only, no zeusd ---------------------------------------------------------------------
def test_the_limit_a_gpu_already_has_is_not_a_change(denied):
    gpu = device.current("nvml").gpu(0)
    gpu.set_power_limit(300.0)  # zeus-nb's call
    gpu.set_power_management_limit(300_000)  # Zeus's call
    device.current().set_power_management_limit(0, 300_000)
    assert denied.state["set_calls"] == [] and denied.limits_w() == [300.0, 300.0]


def test_a_change_fails_with_one_line_naming_zeusd_and_docker(denied):
    gpu = device.current("nvml").gpu(0)
    for _ in range(2):  # the second is refused without asking NVML again: the same line
        with pytest.raises(ZeusGPUNoPermissionError) as e:
            gpu.set_power_limit(200.0)
        text = str(e.value)
        assert "\n" not in text and "setting the power limit to 200 W" in text
        assert "zeusd" in text and "ZEUSD_SOCK_PATH" in text and "--cap-add SYS_ADMIN" in text
    assert gpu.settings_access().mode == READ_ONLY
    assert gpu.can_set_power_limit()[0] is False
    with pytest.raises(ZeusGPUClockPermissionError, match="clocks needs root"):
        gpu.set_locked_clocks(1740, 1740)
    assert denied.limits_w() == [300.0, 300.0] and denied.state["set_calls"] == []


def test_asking_finds_a_read_only_gpu_and_changes_nothing(denied):
    gpus = device.current("nvml").gpus
    assert [g.settings_access().mode for g in gpus] == [READ_ONLY, READ_ONLY]
    assert denied.limits_w() == [300.0, 300.0]


def test_a_gpu_that_may_be_changed_is_found_so_and_left_as_it_was(fake_nvml, no_zeusd):
    gpu = device.current("nvml").gpu(0)
    assert gpu.settings_access().mode == DIRECT
    assert fake_nvml.limits_w() == [300.0, 300.0]  # the limit it had was written back: no change


def test_parts_that_change_limits_run_simulated_with_one_line(denied, capsys):
    real = device.current("nvml")
    assert nearest_simulated(real) == "a40"  # 300 W: the A40's trace, not the V100's (250 W)
    system, source = settings_system(real, "The sweep")
    assert system.backend == "sim" and device.current() is system  # the environment aside
    assert source.startswith("simulated: NVIDIA A40 (simulated) (nearest measured model")
    line = capsys.readouterr().out.strip()
    assert "\n" not in line and line.startswith("The sweep runs on a simulated NVIDIA A40")
    assert "NVML refuses its setters" in line and "no zeusd is configured" in line


# --- through zeusd ---------------------------------------------------------------------------
def test_limits_set_through_zeusd_land_on_the_gpu_and_come_back(denied, socket_path, capsys):
    fake = _daemon(denied)
    with serve_unix(fake, socket_path):
        system = device.current("nvml")
        gpu = system.gpu(0)
        assert gpu.can_set_power_limit()[0] is True  # configured: zeusd will do it
        assert gpu.settings_access().mode == ZEUSD  # asked NVML once; zeusd was not asked to
        assert not [s for s in fake.seen if s[1].startswith("/gpu/set")]  # repeat a no-change
        system.set_power_management_limit(0, 150_000)  # Zeus's call: guarded, restored
        assert denied.limits_w() == [150.0, 300.0] and fake.limits[0] == 150_000
        assert gpu.settings_access().mode == ZEUSD
        gpu.set_gpu_locked_clocks(1500, 1500)  # Zeus's call: guarded too
        assert fake.locked["gpu", 0] == (1500, 1500) and gpu.locked_clocks() == (1500, 1500)
        for guard in gpu._guards.values():
            guard.restore()
        assert denied.limits_w() == [300.0, 300.0] and fake.locked["gpu", 0] is None
        same, source = settings_system(system, "The sweep")
        assert same is system and source.startswith("zeusd: NVIDIA A40")
        assert f"through zeusd at {socket_path}" in capsys.readouterr().out
    assert denied.state["set_calls"] == []  # NVML itself never accepted a change


def test_a_daemon_that_is_down_is_one_clear_line_and_nothing_changes(denied, socket_path):
    gpu = device.current("nvml").gpu(0)
    with pytest.raises(ZeusdUnavailableError) as e:
        gpu.set_power_limit(200.0)
    text = str(e.value)
    assert "\n" not in text and "Cannot reach Zeusd" in text and socket_path in text
    assert text.endswith("nothing was changed")
    assert denied.limits_w() == [300.0, 300.0]


@pytest.mark.parametrize("refusal", ["no control group", "HTTP 500"])
def test_a_daemon_that_refuses_is_one_clear_line_and_nothing_changes(denied, socket_path, refusal):
    if refusal == "no control group":
        fake = _daemon(denied, groups=("gpu-read",))
    else:
        fake = _daemon(denied)
        answer = fake.answer

        def refuse(method, path, params, headers):
            if path == "/gpu/set_power_limit":
                return 500, {"error": "nvml: insufficient permissions"}
            return answer(method, path, params, headers)

        fake.answer = refuse
    with serve_unix(fake, socket_path):
        gpu = device.current("nvml").gpu(0)
        with pytest.raises(ZeusdUnavailableError) as e:
            gpu.set_power_limit(200.0)
    text = str(e.value)
    assert "\n" not in text and "zeusd could not do it" in text
    assert ("gpu-control" in text) if refusal == "no control group" else ("HTTP 500" in text)
    assert denied.limits_w() == [300.0, 300.0]


# --- the training commands -------------------------------------------------------------------
def test_training_measures_and_says_the_optimizer_is_off(denied, tmp_path, caplog):
    """train.single on a read-only GPU trains and measures at the limit it has, and says in one
    line what it could not do and how to do it."""
    from zeus_nb.train.config import TrainConfig
    from zeus_nb.train.loop import run

    config = TrainConfig(
        data="synthetic",
        backend="nvml",
        epochs=1,
        batch_size=16,
        train_size=32,
        val_size=16,
        image_size=16,
        progress=False,
        results=str(tmp_path / "r.json"),
    )
    r = run("single", config)
    assert r["gpu_backend"] == "nvml" and r["optimal_power_limit_w"] is None
    assert r["power_limit_w"] == 300.0 and r["energy_j"] > 0
    assert json.loads((tmp_path / "r.json").read_text())["energy_j"] == r["energy_j"]
    said = [m for m in caplog.messages if "power-limit optimizer is off" in m]
    assert len(said) == 1 and "--cap-add SYS_ADMIN" in said[0] and "zeusd" in said[0]
    assert denied.state["set_calls"] == []


# --- the instructor guide's commands --------------------------------------------------------------
GUIDE = Path(__file__).resolve().parents[1] / "docs" / "course" / "instructor-guide.md"


def _student_commands() -> list[str]:
    """The block of the guide's "GPUs the students may not change" that a student runs."""
    text = GUIDE.read_text().split("### GPUs the students may not change", 1)[1]
    for block in text.split("```bash\n")[1:]:
        lines = block.split("```", 1)[0].strip().splitlines()
        if lines[0].startswith("export ZEUSD_SOCK_PATH="):
            return lines
    raise AssertionError("the guide has no student block starting with export ZEUSD_SOCK_PATH")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_guides_student_commands_run_through_a_fake_zeusd(
    nvml_gpus, socket_path, tmp_path, monkeypatch
):
    """The guide's student commands, as written but for the socket's path, on an H100-shaped GPU
    whose setters NVML refuses, beside a fake zeusd: doctor says limits change through it, and
    notebook 02 profiles the real GPU's limits through it and puts the limit back."""
    import subprocess
    import sys

    nvml = nvml_gpus("h100", 1)
    nvml.update(deny_setters=True)
    lines = _student_commands()
    assert lines[0] == "export ZEUSD_SOCK_PATH=/run/zeusd/zeusd.sock"
    env = nvml.env() | {"ZEUSD_SOCK_PATH": socket_path, "MPLBACKEND": "Agg"}
    env["ZEUS_NB_ENERGY_READS"] = "auto"
    fake = _daemon(nvml, gpus=(0,))
    fake.limits = {0: 700_000}
    outputs = []
    with serve_unix(fake, socket_path):
        for line in lines[1:]:
            assert line.startswith("zeus-nb "), line
            cmd = [sys.executable, "-m", "zeus_nb", *line.split()[1:]]
            r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)
            assert r.returncode == 0, (line, r.stdout[-3000:], r.stderr[-3000:])
            outputs.append(r.stdout)
    assert f"may change power limits: yes (through zeusd at {socket_path})" in outputs[0]
    assert "1/1 notebook(s) ran" in outputs[1]
    changes = [p for m, path, p, _ in fake.seen if path == "/gpu/set_power_limit"]
    assert len({p["power_limit_mw"] for p in changes}) > 1  # it profiled several limits
    assert nvml.limits_w() == [700.0] and nvml.state["set_calls"] == []  # put back, via zeusd
    nb = (tmp_path / "zeus-nb-tour" / "02_power_limit_optimizer.ipynb").read_text()
    assert f"settings change through zeusd at {socket_path}" in nb
    assert "runs on a simulated" not in nb

    env.pop("ZEUSD_SOCK_PATH")  # what a student without it sees
    cmd = [sys.executable, "-m", "zeus_nb", "doctor"]
    r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert "may change power limits: no" in r.stdout + r.stderr
