"""Training entry points on synthetic data with simulated GPUs: one process, DDP and FSDP."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from zeus_nb.errors import ZeusNbError

# profile 3 limits (300, 200, 100 W) in 1 + 3 * (1 + 2) = 10 steps; 2 ranks run 2 x 8 steps
QUICK = dict(
    data="synthetic",
    backend="sim",
    epochs=2,
    batch_size=16,
    train_size=256,
    val_size=96,
    image_size=16,
    warmup_steps=1,
    profile_steps=2,
    pl_step=100,
    progress=False,
)


@pytest.fixture(autouse=True)
def _state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ZEUS_NB_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("ZEUS_NB_MAX_SLOWDOWN", raising=False)
    monkeypatch.delenv("ZEUS_NB_SIM_NOISE", raising=False)


def test_single_process_trains_and_applies_the_optimum(tmp_path):
    from zeus_nb import device
    from zeus_nb.train import single

    out = tmp_path / "single.json"
    r = single.train(results=str(out), adaptive=False, **QUICK)
    assert json.loads(out.read_text()) == json.loads(json.dumps(r))
    assert r["mode"] == "single" and r["world_size"] == 1 and r["gpu_backend"] == "sim"
    assert [e["epoch"] for e in r["epochs"]] == [1, 2]
    # the synthetic classes (colour patterns under noise) are learnable: far above chance (10%)
    assert r["accuracy"] > 0.5
    assert r["profiling_done"] and r["optimal_power_limit_w"] in (300.0, 200.0, 100.0)
    assert r["power_limit_w"] == r["optimal_power_limit_w"]
    # energy and time come from the simulated GPU, summed over the epochs
    assert r["energy_j"] == pytest.approx(sum(e["energy_j"] for e in r["epochs"]))
    assert r["time_s"] == pytest.approx(sum(e["time_s"] for e in r["epochs"]))
    # the choice is the one MaxSlowdownConstraint(1.1) makes over the simulated step costs
    sim = device.current()
    t = {w: sim.step_cost(sim.batch_size, w)[0] for w in (300.0, 200.0, 100.0)}
    expected = min(w for w in t if t[w] <= 1.1 * t[300.0])
    assert r["optimal_power_limit_w"] == expected
    # exhaustive profiling measured every limit for profile_steps=2 steps
    assert [p["power_limit_w"] for p in r["profile"]] == [300.0, 200.0, 100.0]
    for p in r["profile"]:
        assert p["time_s"] == pytest.approx(2 * t[p["power_limit_w"]])
    # and the GPU is back at its original limit afterwards
    assert sim.gpu(0).get_power_limit() == sim.max_limit


def test_max_slowdown_comes_from_the_environment(monkeypatch):
    from zeus_nb.train.config import max_slowdown_factor

    assert max_slowdown_factor() == 1.1
    monkeypatch.setenv("ZEUS_NB_MAX_SLOWDOWN", "1.5")
    assert max_slowdown_factor() == 1.5
    assert max_slowdown_factor(2.0) == 2.0
    monkeypatch.setenv("ZEUS_NB_MAX_SLOWDOWN", "fast")
    with pytest.raises(ValueError, match="ZEUS_NB_MAX_SLOWDOWN"):
        max_slowdown_factor()
    with pytest.raises(ValueError, match=">= 1.0"):
        max_slowdown_factor(0.9)


def test_without_the_optimizer_the_limit_stays(tmp_path):
    from zeus_nb.train import single

    r = single.train(
        results=str(tmp_path / "r.json"),
        power_limit_optimizer=False,
        **{**QUICK, "epochs": 1, "train_size": 32},
    )
    assert r["optimal_power_limit_w"] is None and r["power_limit_w"] == 300.0


def test_dp_and_fsdp_need_torchrun():
    from zeus_nb.train import dp

    with pytest.raises(ZeusNbError, match="torchrun --nproc_per_node"):
        dp.train(**QUICK)


def test_cli_errors_have_no_traceback(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "zeus_nb.train.single", "--data", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert r.returncode == 2
    assert "extract_imagenet.py" in r.stderr and "Traceback" not in r.stderr


def test_launch_command_line():
    from zeus_nb.train.launch import command

    cmd = command("fsdp", 2, data="synthetic", epochs=3, progress=False, adaptive=False)
    assert cmd[1:5] == ["-m", "zeus_nb.train.forkrun", "--nproc_per_node", "2"]
    assert cmd[5] == "zeus_nb.train.fsdp"
    assert cmd[6:] == ["--data", "synthetic", "--epochs", "3", "--no-progress", "--exhaustive"]
    # the flags parse back into the same configuration
    from zeus_nb.train.config import config_from_args

    config = config_from_args("fsdp", cmd[6:])
    assert (config.epochs, config.progress, config.adaptive) == (3, False, False)
    assert command("single", 1, gpu=1)[1:] == ["-m", "zeus_nb.train.single", "--gpu", "1"]
    with pytest.raises(ValueError, match="unknown training options"):
        command("dp", 2, epoch=3)
    with pytest.raises(ValueError, match="epochs must be >= 1"):
        command("dp", 2, epochs=0)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["dp", "fsdp"])
def test_torchrun_two_ranks_agree_on_the_power_limit(tmp_path, mode):
    from zeus_nb.train.launch import launch

    r = launch(
        mode,
        nproc=2,
        echo=False,
        timeout=300,
        env={"ZEUS_NB_SIM_NOISE": "0.2", "ZEUS_NB_STATE_DIR": str(tmp_path / "state")},
        results=str(tmp_path / f"{mode}.json"),
        **QUICK,
    )
    assert r["mode"] == mode and r["world_size"] == 2 and r["device"] == "cpu"
    ranks = r["ranks"]
    assert [x["rank"] for x in ranks] == [0, 1]
    assert [x["gpu_index"] for x in ranks] == [0, 1]  # one monitor per local rank
    # independent noise: the ranks measured different energies...
    assert ranks[0]["energy_j"] != ranks[1]["energy_j"]
    # ...yet aggregated before choosing, so both apply the same limit
    assert r["profiling_done"]
    assert ranks[0]["optimal_power_limit_w"] == ranks[1]["optimal_power_limit_w"] is not None
    assert ranks[0]["power_limit_w"] == ranks[1]["power_limit_w"] == r["power_limit_w"]
    assert r["energy_j"] == pytest.approx(ranks[0]["energy_j"] + ranks[1]["energy_j"])
    assert r["accuracy"] > 0.5
    # the profile holds both ranks' measurements combined
    assert r["profile"] and all(p["num_gpus"] == 2 for p in r["profile"])


def test_single_process_on_an_image_folder(tmp_path):
    """The ImageFolder path end to end: synthetic JPEGs in the extracted ImageNet layout."""
    import importlib.util
    from pathlib import Path

    from zeus_nb.train import single

    scripts = Path(__file__).resolve().parents[1] / "data_scripts"
    spec = importlib.util.spec_from_file_location("syn", scripts / "make_synthetic_imagenet.py")
    syn = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(syn)
    syn.make(tmp_path, classes=3, train_per_class=8, val_per_class=2, archives=False)
    r = single.train(
        data=str(tmp_path / "imagenet"),
        image_size=16,
        batch_size=8,
        workers=0,
        epochs=1,
        backend="sim",
        power_limit_optimizer=False,
        progress=False,
        results=str(tmp_path / "r.json"),
    )
    assert r["num_classes"] == 3 and r["steps_per_epoch"] == 3
    assert 0.0 <= r["accuracy"] <= 1.0 and r["energy_j"] > 0


def test_data_folder_defaults_to_the_environment(monkeypatch):
    """The Docker image sets ZEUS_NB_DATA_DIR=/data/imagenet; --data still wins."""
    from zeus_nb.train.config import parser

    monkeypatch.delenv("ZEUS_NB_DATA_DIR", raising=False)
    assert parser("single").parse_args([]).data == "synthetic"
    monkeypatch.setenv("ZEUS_NB_DATA_DIR", "/data/imagenet")
    assert parser("single").parse_args([]).data == "/data/imagenet"
    assert parser("dp").parse_args(["--data", "synthetic"]).data == "synthetic"


def _zeus_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k.startswith("ZEUS_NB_")}


def test_the_gpu_system_is_passed_as_a_value(tmp_path, monkeypatch):
    """A system handed to run() is the one measured and stepped; the environment is not touched."""
    from zeus_nb import device
    from zeus_nb.train.config import TrainConfig
    from zeus_nb.train.loop import run

    monkeypatch.setenv("ZEUS_NB_BACKEND", "nvml")  # no GPU here: using it would fail
    device.reset()
    sim = device.create("sim")
    env_before = _zeus_env()
    config = TrainConfig(**{**QUICK, "backend": None, "results": str(tmp_path / "r.json")})
    r = run("single", config, system=sim)
    assert _zeus_env() == env_before
    assert r["gpu_backend"] == "sim" and r["profiling_done"]
    # every step was charged to this system: its virtual clock is the run's GPU time
    assert sim.clock() == pytest.approx(r["time_s"])
    assert sim.gpu(0).get_power_limit() == sim.max_limit  # restored afterwards
    # and no process-wide system was created on the way
    assert device._current is None


@pytest.mark.parametrize("gpus", [0, 1, 2])
def test_ranks_train_on_cuda_only_where_each_has_a_gpu_of_its_own(monkeypatch, gpus):
    """On an H200 (one GPU, read-only), notebook 05 ran 2 ranks on simulated GPUs: rank 1 took
    ``cuda:1`` and failed with "invalid device ordinal". Ranks choose alike: CUDA for all where
    each has a GPU, else the CPU for all; asked for CUDA without enough, a clear error."""
    import torch

    from zeus_nb.train.config import TrainConfig
    from zeus_nb.train.distributed import _torch_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpus > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: None)
    for rank in (0, 1):
        device, cuda = _torch_device(TrainConfig(device="auto"), rank, 2)
        assert (str(device), cuda) == ((f"cuda:{rank}", True) if gpus >= 2 else ("cpu", False))
        if gpus < 2:
            with pytest.raises(ZeusNbError, match=f"needs 2 CUDA GPU.*torch sees {gpus}"):
                _torch_device(TrainConfig(device="cuda"), rank, 2)
    assert _torch_device(TrainConfig(device="auto"), 0)[1] is (gpus >= 1)  # one process


def test_each_rank_gets_its_own_noise_seed(monkeypatch):
    from zeus_nb.train.distributed import Context, gpu_system

    monkeypatch.setenv("ZEUS_NB_SIM_SEED", "7")
    seeds = [gpu_system("sim", Context("dp", rank=r, distributed=True)).seed for r in (0, 1)]
    assert seeds == [7, 8]


HUNG_CHILD = """
import subprocess, sys, time
# a worker that inherits stdout and never exits, as a hung torchrun worker would
worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print("worker", worker.pid, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is dead, only not reaped yet
        return f.read().split(")")[-1].split()[0] != "Z"


def test_launch_stops_a_hung_run_at_its_timeout(tmp_path, monkeypatch, capsys):
    import os
    import signal
    import time

    from zeus_nb.train import launch as launch_mod

    monkeypatch.setattr(launch_mod, "command", lambda *a, **k: [sys.executable, "-c", HUNG_CHILD])
    t0 = time.monotonic()
    with pytest.raises(launch_mod.TrainingTimedOut, match="did not finish within 3 s") as e:
        launch_mod.launch("dp", nproc=2, timeout=3, data="synthetic")
    elapsed = time.monotonic() - t0
    assert 3 <= elapsed < 30
    import re

    worker = int(re.search(r"^worker (\d+)$", str(e.value), re.MULTILINE).group(1))
    assert "worker" in capsys.readouterr().out  # echoed while it ran
    deadline = time.monotonic() + 10
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = _alive(worker)
    if alive:  # clean up before failing
        os.kill(worker, signal.SIGKILL)
    assert not alive, "the hung worker was left running"


# What torchrun prints when a rank fails: our boundary's line per rank, then its own dump.
TORCHRUN_DUMP = """\
zeus-nb train (dp): tiny on synthetic, 2 process(es) on cpu, 8 steps/epoch
[rank1]: zeus_nb.train.dp: internal error (AcceleratorError: CUDA error: invalid device ordinal); \
this is a bug in zeus-nb: rerun with --debug for the traceback and report it
W1126 20:05:56.377000 16115 torch/distributed/elastic/multiprocessing/api.py:1028] Sending \
process 16123 closing signal SIGTERM
Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
  File "torch/distributed/launcher/api.py", line 386, in launch_agent
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
zeus_nb.train.dp FAILED
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  rank      : 1 (local_rank: 1)
  exitcode  : 3 (pid: 16124)
============================================================
"""


def test_a_failed_run_is_one_line_naming_its_cause(monkeypatch, capsys):
    """The first line of TrainingFailed is the rank's own error, not torchrun's dump; the dump
    was shown as the run went (echo) and is not repeated."""
    from zeus_nb.train import launch as launch_mod

    script = f"import sys; sys.stdout.write({TORCHRUN_DUMP!r}); sys.exit(1)"
    monkeypatch.setattr(launch_mod, "command", lambda *a, **k: [sys.executable, "-c", script])
    with pytest.raises(launch_mod.TrainingFailed) as e:
        launch_mod.launch("dp", nproc=2, data="synthetic")
    first, *rest = str(e.value).splitlines()
    assert first == (
        "training failed (exit status 1): zeus_nb.train.dp: internal error (AcceleratorError: "
        "CUDA error: invalid device ordinal); this is a bug in zeus-nb: rerun with --debug for "
        "the traceback and report it"
    )
    assert len(rest) == 1 and rest[0].startswith("command: ")
    assert "ChildFailedError" in capsys.readouterr().out  # echoed while it ran
    with pytest.raises(launch_mod.TrainingFailed) as quiet:
        launch_mod.launch("dp", nproc=2, data="synthetic", echo=False)
    assert "Root Cause" in str(quiet.value)  # not shown before: kept below the first line


@pytest.mark.parametrize(
    ("lines", "cause"),
    [
        (TORCHRUN_DUMP.splitlines(), "zeus_nb.train.dp: internal error (AcceleratorError"),
        (
            [
                "[rank0]: Traceback (most recent call last):",
                "[rank0]:   File 'stage.py', line 1, in forward_one_chunk",
                "[rank0]: torch.distributed.pipelining._utils.PipeliningShapeError: Stage 0 "
                "forward inputs: value 0 has a stride mismatch: expected (32, 1) actual (33, 1)",
                "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
                "zeus_nb.train.pipeline FAILED",
            ],
            "torch.distributed.pipelining._utils.PipeliningShapeError: Stage 0 forward inputs",
        ),
        (["just a line", ""], "just a line"),
        ([], "no output"),
    ],
)
def test_failure_cause_finds_the_line_that_says_why(lines, cause):
    from zeus_nb.train.launch import failure_cause

    assert failure_cause(lines).startswith(cause)
