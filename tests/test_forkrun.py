"""``zeus_nb.train.forkrun``: torchrun's job, ranks forked from a process that imported PyTorch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from zeus_nb.train import forkrun
from zeus_nb.train.pipeline.launch import launch

REPO = Path(__file__).resolve().parents[1]
JOB = [
    "--backend", "sim", "--model", "tiny-gpt", "--pp", "2", "--num-microbatches", "2",
    "--max-steps", "1", "--num-warmup-steps", "0", "--num-prof-steps", "1", "--seed", "3",
]  # fmt: skip


def _env(tmp_path: Path) -> dict[str, str]:
    return dict(
        os.environ,
        PYTHONPATH=str(REPO),
        ZEUS_NB_SIM_GPU="a40",
        OMP_NUM_THREADS="1",
        ZEUS_NB_STATE_DIR=str(tmp_path / "state"),
    )


@pytest.mark.slow
def test_ranks_run_the_same_job_as_under_torchrun(tmp_path):
    """The same pipeline job under ``torchrun`` and under the forked launcher: the same numbers,
    rank by rank (the simulated GPUs' time and energy, and the training's losses)."""
    results = {}
    torchrun = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m"]
    forked = ["-m", "zeus_nb.train.forkrun", "--nproc_per_node", "2"]
    for name, launcher in (("torchrun", torchrun), ("forkrun", forked)):
        out = tmp_path / f"{name}.json"
        cmd = [sys.executable, *launcher, "zeus_nb.train.pipeline", *JOB]
        cmd += ["--results-json", str(out)]
        run = subprocess.run(cmd, env=_env(tmp_path), capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
        results[name] = json.loads(out.read_text())
    a, b = results["torchrun"], results["forkrun"]
    assert a["iterations"] == b["iterations"]  # time, energy and loss of each measured step
    assert a["ranks"] == b["ranks"] and len(a["ranks"]) == 2
    assert (a["world_size"], a["pp"]) == (b["world_size"], b["pp"]) == (2, 2)


@pytest.mark.slow
def test_a_failed_rank_says_why_in_one_line(tmp_path):
    """A rank's own error line, then torchrun's summary; launch() leads with the rank's line."""
    cmd = [sys.executable, "-m", "zeus_nb.train.forkrun", "--nproc_per_node", "2"]
    cmd += ["zeus_nb.train.pipeline", "--backend", "sim", "--model", "nope", "--pp", "2"]
    run = subprocess.run(cmd, env=_env(tmp_path), capture_output=True, text=True, timeout=600)
    assert run.returncode == 1  # as torchrun's, when a rank failed
    assert "zeus_nb.train.pipeline: error: unknown pipeline model 'nope'" in run.stderr
    assert "Root Cause" in run.stderr  # torchrun's summary (after its agent's log of the exit)
    from zeus_nb.train.launch import TrainingFailed

    with pytest.raises(TrainingFailed) as e:
        launch(2, echo=False, backend="sim", model="nope", pp=2, timeout=600)
    assert (
        str(e.value)
        .splitlines()[0]
        .startswith(
            "pipeline run failed (exit status 1): zeus_nb.train.pipeline: error: unknown pipeline "
            "model 'nope'; use one of"
        )
    )


@pytest.mark.slow  # two launchers start (PyTorch imported four times); five jobs
def test_a_process_keeps_one_launcher_for_its_jobs_until_one_overruns(tmp_path, monkeypatch):
    """launch()'s jobs run in the launcher kept for the process while the environment stays:
    a usage error or a failed rank ends the job, not the launcher; another environment gets a
    new one; a job past its timeout stops it with its ranks."""
    from zeus_nb.train import launch as launch_mod
    from zeus_nb.train import launcher

    syn = _synthetic_imagenet_module()
    syn.make(tmp_path, classes=2, train_per_class=4, val_per_class=2, archives=False)
    folder = tmp_path / "imagenet"
    job = dict(backend="sim", epochs=1, workers=0, image_size=16, batch_size=2, echo=False)
    job |= dict(power_limit_optimizer=False, timeout=600)
    monkeypatch.setenv("ZEUS_NB_STATE_DIR", str(tmp_path / "state"))
    launcher.close_kept()

    def kept() -> int:
        assert launcher._kept is not None and launcher._kept.proc.poll() is None
        return launcher._kept.proc.pid

    first = launch_mod.launch("dp", nproc=2, data=str(folder), **job)
    assert first["world_size"] == 2 and first["num_classes"] == 2
    pid = kept()
    with pytest.raises(launch_mod.TrainingFailed, match="exit status 2"):
        bad = [sys.executable, "-m", "zeus_nb.train.forkrun", "--nproc_per_node", "0"]
        with monkeypatch.context() as m:
            m.setattr(launch_mod, "command", lambda *a, **k: [*bad, "zeus_nb.train.dp"])
            launch_mod.launch("dp", nproc=2, data=str(folder), **job)
    with pytest.raises(launch_mod.TrainingFailed, match="exit status 1"):  # a rank failed
        launch_mod.launch("fsdp", nproc=2, data=str(tmp_path / "nowhere"), **job)
    again = launch_mod.launch("fsdp", nproc=2, data=str(folder), **job)
    assert again["world_size"] == 2 and kept() == pid

    other = launch_mod.launch(
        "dp", nproc=2, data=str(folder), env={"ZEUS_NB_SIM_GPU": "v100"}, **job
    )
    assert other["world_size"] == 2 and kept() != pid and not _alive(pid)

    # a rank that hangs opening an image (a named pipe no one writes): stopped at the timeout
    pid = kept()
    hung = next((folder / "train").rglob("*.JPEG"))
    hung.unlink()
    os.mkfifo(hung)
    ranks = job | {"timeout": 8}
    with pytest.raises(launch_mod.TrainingTimedOut):
        launch_mod.launch("dp", nproc=2, data=str(folder), env={"ZEUS_NB_SIM_GPU": "v100"}, **ranks)
    assert launcher._kept is None and not _alive(pid)
    assert not _group(pid)  # its fork server and ranks were stopped with it


@pytest.mark.slow  # three launchers start
def test_a_kept_launcher_left_idle_ends_and_its_next_job_goes_to_a_new_one(tmp_path, monkeypatch):
    """An idle launcher ends by itself (its memory freed); a job sent to it as it ended is run by
    a new one, not lost."""
    from zeus_nb.train import launch as launch_mod
    from zeus_nb.train import launcher

    monkeypatch.setattr(launcher, "IDLE_S", 1.0)
    monkeypatch.setenv("ZEUS_NB_STATE_DIR", str(tmp_path / "state"))
    launcher.close_kept()
    # the launcher's life is under test, not training: the smallest job that trains
    job = dict(data="synthetic", backend="sim", epochs=1, echo=False, timeout=600,
               train_size=64, val_size=32, max_steps_per_epoch=2)  # fmt: skip
    assert launch_mod.launch("dp", nproc=2, **job)["world_size"] == 2
    first = launcher._kept.proc
    assert first.wait(timeout=120) == launcher.IDLE_EXIT  # no job for 1 s: it ended
    assert launch_mod.launch("dp", nproc=2, **job)["world_size"] == 2  # found ended: a new one
    second = launcher._kept.proc
    assert second.pid != first.pid and second.wait(timeout=120) == launcher.IDLE_EXIT
    monkeypatch.setattr(second, "poll", lambda: None)  # as if it ended just after being found
    assert launch_mod.launch("dp", nproc=2, **job)["world_size"] == 2
    assert launcher._kept.proc.pid not in (first.pid, second.pid)
    launcher.close_kept()


def _synthetic_imagenet_module():
    import importlib.util

    path = REPO / "data_scripts" / "make_synthetic_imagenet.py"
    spec = importlib.util.spec_from_file_location("make_synthetic_imagenet", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:  # a zombie is dead, only not reaped yet
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _group(pgid: int) -> list[int]:
    """The live processes of process group ``pgid``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            found.append(int(entry.name))
    return found


def test_only_zeus_nb_entry_points_run(capsys):
    with pytest.raises(SystemExit) as e:
        forkrun.main(["--nproc_per_node", "2", "zeus_nb.train.nope"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "zeus_nb.train.forkrun: error: argument module: invalid choice" in err
    assert all(name in err for name in forkrun.ENTRIES)
    with pytest.raises(SystemExit):
        forkrun.main(["--nproc_per_node", "0", "zeus_nb.train.dp"])
    assert "--nproc_per_node" in capsys.readouterr().err


def test_the_fork_server_imports_what_each_entry_point_needs():
    """Every entry point is preloaded with torch, the launcher's module and its own imports, and
    each name is a module that imports here (the fork server skips one that does not)."""
    import importlib

    for module, extra in forkrun.ENTRIES.items():
        importlib.import_module(module)
        for name in (*forkrun.COMMON, *extra):
            assert importlib.util.find_spec(name) is not None, name
    assert forkrun.MODULE not in forkrun.COMMON  # a rank runs it as its main module first


PRELOAD_PROBE = """
import sys, torch
asked = []
for name in ("_cuda_getDeviceCount", "_cuda_init", "_cuda_getDevice"):
    if hasattr(torch._C, name):
        real = getattr(torch._C, name)
        setattr(torch._C, name, lambda *a, _n=name, _r=real, **k: asked.append(_n) or _r(*a, **k))
from zeus_nb.train import forkrun
import importlib
for module, extra in forkrun.ENTRIES.items():
    for name in (*forkrun.COMMON, *extra):
        importlib.import_module(name)
print(asked, torch.cuda.is_initialized())
"""


@pytest.mark.slow
def test_the_fork_server_asks_nothing_of_cuda():
    """What the fork server imports never asks CUDA for a device (a rank forked after that could
    not use the GPU): the imports run in a fresh interpreter with CUDA's entry points watched."""
    run = subprocess.run(
        [sys.executable, "-c", PRELOAD_PROBE],
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split("\n")[-2] == "[] False"
