"""Torch CPU threads: sized by the model and the cores, an explicit choice always wins."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from zeus_nb.errors import InputError
from zeus_nb.utils import threads

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def restore(monkeypatch):
    """Each test starts with no explicit choice and leaves torch's thread count as it was."""
    before = torch.get_num_threads()
    monkeypatch.setattr(threads, "_chosen", None)
    monkeypatch.delenv(threads.THREADS_VAR, raising=False)
    monkeypatch.delenv(threads.DEFAULT_MARK, raising=False)
    yield
    torch.set_num_threads(before)


def test_threads_follow_model_size_and_cores():
    per = threads.PARAMS_PER_THREAD
    assert threads.threads_for(0, cpus=16) == 1
    assert threads.threads_for(per // 2, cpus=16) == 1
    assert threads.threads_for(per + 1, cpus=16) == 2
    assert threads.threads_for(5 * per, cpus=16) == 5
    assert threads.threads_for(5 * per, cpus=2) == 2  # never more than the cores
    assert threads.threads_for(5 * per, cpus=16, processes=8) == 2  # ranks share the cores
    assert threads.threads_for(5 * per, cpus=2, processes=4) == 1


def test_available_cpus_is_the_affinity_mask():
    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no CPU affinity on this OS")
    assert threads.available_cpus() == len(os.sched_getaffinity(0))


def test_a_small_model_gets_one_thread(monkeypatch):
    torch.set_num_threads(2)
    model = torch.nn.Linear(10, 10)
    assert threads.count_parameters(model) == 110
    assert threads.use_threads(model=model) == 1
    assert torch.get_num_threads() == 1
    monkeypatch.setattr(threads, "available_cpus", lambda: 4)
    assert threads.use_threads(parameters=3 * threads.PARAMS_PER_THREAD) == 3


def test_an_explicit_count_wins_and_is_kept():
    assert threads.use_threads(2) == 2 and torch.get_num_threads() == 2
    assert threads.use_threads(model=torch.nn.Linear(2, 2)) is None  # the choice stands
    assert torch.get_num_threads() == 2
    with pytest.raises(InputError, match="threads.*positive"):
        threads.use_threads(0)


def test_the_users_omp_num_threads_wins_but_not_our_default(monkeypatch):
    torch.set_num_threads(2)
    monkeypatch.setenv(threads.THREADS_VAR, "2")
    assert threads.use_threads(model=torch.nn.Linear(2, 2)) is None
    assert torch.get_num_threads() == 2
    env = {}
    threads.thread_environment(env)  # what a kernel or a rank is started with
    assert env == {threads.THREADS_VAR: "1", threads.DEFAULT_MARK: "1"}
    monkeypatch.setenv(threads.THREADS_VAR, "1")
    monkeypatch.setenv(threads.DEFAULT_MARK, "1")
    assert threads.use_threads(model=torch.nn.Linear(2, 2)) == 1  # a default, not a choice


def test_thread_environment_keeps_the_users_setting():
    env = {threads.THREADS_VAR: "4"}
    threads.thread_environment(env)
    assert env == {threads.THREADS_VAR: "4"}


def test_notebook_setup_sets_threads(monkeypatch):
    from zeus_nb import notebook_setup

    torch.set_num_threads(2)
    notebook_setup("sim", quiet=True)
    assert torch.get_num_threads() == 1
    notebook_setup("sim", quiet=True, threads=2)
    assert torch.get_num_threads() == 2


def test_training_takes_a_threads_option():
    from zeus_nb.train.config import TrainConfig, config_from_args
    from zeus_nb.train.launch import command
    from zeus_nb.train.pipeline.trainer import PipelineConfig
    from zeus_nb.train.pipeline.trainer import config_from_args as pipeline_args

    flags = command("single", 1, threads=3)[3:]
    assert flags == ["--threads", "3"] and config_from_args("single", flags).threads == 3
    assert config_from_args("single", []).threads is None
    assert pipeline_args(["--threads", "2"]).threads == 2
    with pytest.raises(ValueError, match="threads must be >= 1"):
        TrainConfig(threads=0)
    with pytest.raises(ValueError, match="threads must be >= 1"):
        PipelineConfig(threads=0)


def test_every_process_the_suite_starts_waits_passively():
    """The suite runs three workers on two cores: an OpenMP thread spinning for a descheduled
    peer burns a core another worker needs (``tests/conftest.py``; by how much:
    ``benchmarks/bench_omp_wait.py``). A process a test starts inherits the setting (PASSIVE,
    or what whoever started the suite set)."""
    policy = os.environ.get("OMP_WAIT_POLICY", "")
    assert policy, "tests/conftest.py no longer sets OMP_WAIT_POLICY"
    seen = subprocess.run(
        [sys.executable, "-c", "import os; print(os.environ['OMP_WAIT_POLICY'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert seen == policy
