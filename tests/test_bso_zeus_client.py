"""Zeus's batch-size client, used the way Zeus's MNIST example uses it (imports changed only).

``EXAMPLE`` is a training script shaped like Zeus's ``examples/batch_size_optimizer/mnist``
client, written from Zeus's documented API: a ZeusMonitor, a ``BatchSizeOptimizer`` whose
``server_url`` comes from ``$ZEUS_SERVER_URL`` and ``job_id`` from ``$ZEUS_JOB_ID``,
``get_batch_size()``, ``on_train_begin()``, ``on_evaluate(acc)`` after each epoch, a stop on
``training_finished``. It trains a small classifier on generated data on the simulated GPU's wall
clock, as unmodified code runs here. Each recurrence makes its own optimizer; the store is one
SQLite file (that the store outlives processes is tested with fresh processes below and in
test_bso_store.py). Wall-clock costs of one batch size vary by up to about 2x from run to run on a
loaded machine, so the script turns early stopping off (``beta_knob=None``) and its batch sizes
are 8x apart; early stopping and the power-limit optimizer are tested on the virtual clock below.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from zeus_nb import device
from zeus_nb.monitor import ZeusMonitor
from zeus_nb.optimizer.batch_size import BatchSizeOptimizer, JobSpec
from zeus_nb.optimizer.batch_size.common import CreatedJob, JobSpecFromClient, TrialId
from zeus_nb.optimizer.batch_size.exceptions import (
    JobSpecError,
    ZeusBSORuntimError,
    ZeusBSOTrainFailError,
)
from zeus_nb.optimizer.batch_size.store_url import open_store

REPO = Path(__file__).resolve().parents[1]

EXAMPLE = r"""
import json, os, sys
import torch
from torch import nn

from zeus_nb.monitor import ZeusMonitor
from zeus_nb.optimizer.batch_size import BatchSizeOptimizer, JobSpec


def generated_data(n_train=1024, n_test=256, dim=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(dim, generator=g)
    x = torch.randn(n_train + n_test, dim, generator=g)
    y = ((x @ w + 0.5 * torch.randn(n_train + n_test, generator=g)) > 0).long()
    return (x[:n_train], y[:n_train]), (x[n_train:], y[n_train:])


def train(model, data, optimizer, batch_size, epoch):
    x, y = data
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(epoch))
    model.train()
    for i in range(0, len(x), batch_size):
        idx = order[i : i + batch_size]
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
        optimizer.step()


def test(model, data):
    x, y = data
    model.eval()
    with torch.no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


def main():
    epochs, target = 10, 0.9
    torch.manual_seed(1)
    train_data, test_data = generated_data()

    monitor = ZeusMonitor(gpu_indices=[0])
    bso = BatchSizeOptimizer(
        monitor=monitor,
        server_url=os.environ["ZEUS_SERVER_URL"],
        job=JobSpec(
            job_id=os.environ.get("ZEUS_JOB_ID", None),
            job_id_prefix="mnist-dev",
            default_batch_size=64,
            batch_sizes=[8, 64, 512],
            beta_knob=None,
            max_epochs=epochs,
            target_metric=target,
        ),
    )
    batch_size = bso.get_batch_size()
    print("Chosen batch_size:", batch_size)
    lr = 0.01 * batch_size / 64  # the linear scaling rule, from batch size 64

    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)

    bso.on_train_begin()
    accs = []
    try:
        for epoch in range(1, epochs + 1):
            train(model, train_data, optimizer, batch_size, epoch)
            acc = test(model, test_data)
            accs.append(acc)
            bso.on_evaluate(acc)
            if bso.training_finished:
                break
    finally:
        with open(sys.argv[1], "w") as f:
            json.dump({"job_id": bso.job.job_id, "batch_size": batch_size, "accs": accs,
                       "trial_number": bso.trial_number,
                       "finished": bso.training_finished}, f)


if __name__ == "__main__":
    main()
"""


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    env.update(
        ZEUS_NB_BACKEND="sim",
        ZEUS_NB_SIM_CLOCK="wall",  # unmodified code never calls zeus_nb.step()
        ZEUS_NB_STATE_DIR=str(tmp_path / "state"),
        OMP_NUM_THREADS="1",
    )
    env.pop("ZEUS_JOB_ID", None)
    env.update(extra)
    return env


# Runs the example ``n`` times in one process (one torch import), as a scheduler would run
# recurrences one after another; each run makes its own optimizer and reads the store afresh.
DRIVER = """
import json, runpy, sys
script, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for i in range(n):
    sys.argv = [script, f"{out}{i}.json"]
    failed = False
    try:
        runpy.run_path(script, run_name="__main__")
    except Exception as e:
        if type(e).__name__ != "ZeusBSOTrainFailError":
            raise
        failed = True
    with open(f"{out}{i}.failed", "w") as f:
        f.write(str(failed))
"""


def _recurrences(tmp_path: Path, env: dict[str, str], n: int) -> tuple[list[dict], str]:
    script = tmp_path / "train_single_gpu.py"
    script.write_text(EXAMPLE)
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, str(script), str(out), str(n)], env=env,
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = [
        {**json.loads(Path(f"{out}{i}.json").read_text()),
         "failed": Path(f"{out}{i}.failed").read_text() == "True"}
        for i in range(n)
    ]  # fmt: skip
    return runs, proc.stderr


@pytest.mark.slow
def test_mnist_shaped_example_converges_over_recurrences(tmp_path):
    store_file = tmp_path / "bso.sqlite3"
    env = _env(tmp_path, ZEUS_SERVER_URL=f"sqlite:///{store_file}", ZEUS_JOB_ID="mnist-dev-1")
    n = 9
    runs, _ = _recurrences(tmp_path, env, n)
    picks = [r["batch_size"] for r in runs]
    # Pruning: the default, then smaller, then larger batch sizes; a second round from the
    # cheapest one down (every batch size reaches 90 % accuracy within 10 epochs).
    assert picks[:3] == [64, 8, 512] and sorted(picks[3:6]) == [8, 64, 512]
    assert [r["trial_number"] for r in runs] == list(range(1, n + 1))
    assert not any(r["failed"] for r in runs) and all(r["finished"] for r in runs)
    store = open_store(f"sqlite:///{store_file}", create=False)
    obs = [o for _, o in store.observations("mnist-dev-1")]
    assert [o.batch_size for o in obs] == picks and all(o.reached for o in obs)
    assert [t.status for t in store.trials("mnist-dev-1")] == ["succeeded"] * n
    # Converged: after pruning, every recurrence runs the batch size with the least mean cost.
    costs = {b: [o.cost for o in obs if o.batch_size == b] for b in set(picks)}
    best = min(costs, key=lambda b: sum(costs[b]) / len(costs[b]))
    assert picks[6:] == [best] * (n - 6)
    # One store file; nothing at the default location.
    assert sorted(p.name for p in tmp_path.glob("bso.sqlite3*"))[0] == "bso.sqlite3"
    assert not (tmp_path / "state" / "bso.sqlite3").exists()


@pytest.mark.slow
def test_without_job_id_every_run_is_a_new_job(tmp_path):
    env = _env(tmp_path, ZEUS_SERVER_URL=str(tmp_path / "bso.sqlite3"))
    (first, second), log = _recurrences(tmp_path, env, 2)
    assert first["job_id"] != second["job_id"]
    assert first["job_id"].startswith("mnist-dev-") and len(first["job_id"]) == 18
    assert first["job_id"] in log  # logged, so it can be passed as ZEUS_JOB_ID next time
    assert first["batch_size"] == second["batch_size"] == 64  # each starts at the default
    assert sorted(open_store(env["ZEUS_SERVER_URL"]).jobs()) == sorted(
        [first["job_id"], second["job_id"]]
    )


def _spec(**kw) -> JobSpec:
    base = dict(job_id="cifar-1", job_id_prefix="cifar", default_batch_size=1024)
    base.update(batch_sizes=[256, 512, 1024], target_metric=0.6, max_epochs=5)
    base.update(kw)
    return JobSpec(**base)


def _epochs(bso, system, metrics) -> ZeusBSOTrainFailError | None:
    bs = bso.get_batch_size()
    bso.on_train_begin()
    try:
        for m in metrics:
            device.step(system.steps_per_epoch(bs), batch_size=bs)
            bso.on_evaluate(m)
            if bso.training_finished:
                return None
    except ZeusBSOTrainFailError as e:
        return e
    return None


def test_zeus_records_and_attributes(tmp_path):
    system = device.use_simulated("a40", "cifar100")
    url = f"sqlite:///{tmp_path / 's.sqlite3'}"
    bso = BatchSizeOptimizer(ZeusMonitor(), url, _spec())  # Zeus's positional call
    assert isinstance(bso.job, CreatedJob) and bso.job.job_id == "cifar-1"
    assert isinstance(bso.job_spec, JobSpecFromClient)
    assert bso.job_spec.max_power == system.max_limit and bso.job_spec.number_of_gpus == 1
    assert (bso.trial_number, bso.training_finished, bso.cur_epoch) == (0, False, 0)
    assert bso.get_batch_size() == 1024 and bso.trial_number == 1
    assert _epochs(bso, system, [0.1, 0.7]) is None
    assert bso.training_finished and bso.cur_epoch == 2
    assert bso.running_time > 0 and bso.consumed_energy > 0
    bso.on_evaluate(0.9)  # after the verdict, further epochs change nothing
    assert bso.cur_epoch == 2
    (trial,) = open_store(url).trials("cifar-1")
    assert (trial.trial_number, trial.status, trial.batch_size) == (1, "succeeded", 1024)
    # Records keep pydantic's conveniences.
    tid = TrialId(job_id="cifar-1", batch_size=1024, trial_number=1)
    assert TrialId.parse_raw(tid.json()) == tid
    assert CreatedJob.parse_obj({**bso.job.dict(), "extra": 1}) == bso.job
    with pytest.raises(JobSpecError, match="default_batch_size"):
        _spec(default_batch_size=7)
    with pytest.raises(JobSpecError, match="eta_knob"):
        _spec(eta_knob=1.5)
    assert _spec(batch_sizes=[1024, 256, 512]).batch_sizes == [256, 512, 1024]


def test_reaching_the_target_past_the_cost_bound_is_not_converged(tmp_path):
    """As Zeus's server decides: a run stopped at the target but over beta x the best cost
    failed (and prunes its direction)."""
    system = device.use_simulated("a40", "cifar100")
    url = str(tmp_path / "s.sqlite3")
    assert _epochs(BatchSizeOptimizer(ZeusMonitor(), url, _spec()), system, [0.7]) is None
    second = BatchSizeOptimizer(ZeusMonitor(), url, _spec())
    err = _epochs(second, system, [0.1, 0.7])  # 512 needs two epochs: over 2 x 1024's cost
    assert second.current_batch_size == 512 and "early-stopping threshold" in str(err)
    assert [o.reached for _, o in open_store(url).observations("cifar-1")] == [True, False]


def test_a_run_that_exits_without_a_verdict_leaves_a_failed_trial(tmp_path):
    url = f"sqlite:///{tmp_path / 's.sqlite3'}"
    code = (
        "from zeus_nb import device\n"
        "from zeus_nb.monitor import ZeusMonitor\n"
        "from zeus_nb.optimizer.batch_size import BatchSizeOptimizer, JobSpec\n"
        "device.use_simulated('a40', 'cifar100')\n"
        "spec = JobSpec(job_id='j', job_id_prefix='j', default_batch_size=64, "
        "batch_sizes=[32, 64])\n"
        f"bso = BatchSizeOptimizer(monitor=ZeusMonitor(), server_url={url!r}, job=spec)\n"
        "print(bso.get_batch_size())\n"
    )
    env = _env(tmp_path)
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == "64"  # nothing was learned from the crashed run
    store = open_store(url)
    assert [(t.trial_number, t.status) for t in store.trials("j")] == [(1, "failed"), (2, "failed")]
    assert store.observations("j") == []


def test_server_url_from_the_environment_and_http_goes_to_a_server(tmp_path, monkeypatch):
    device.use_simulated("a40", "cifar100")
    path = tmp_path / "env.sqlite3"
    monkeypatch.setenv("ZEUS_SERVER_URL", f"sqlite:///{path}")
    bso = BatchSizeOptimizer(monitor=ZeusMonitor(), server_url=None, job=_spec())
    assert bso.get_batch_size() == 1024 and path.is_file()
    bso = BatchSizeOptimizer(monitor=ZeusMonitor(), server_url="", job=_spec())  # Zeus's ""
    assert bso.optimizer is not None and bso.get_batch_size() == 1024
    with socket.socket() as s:  # nothing listens there: the client says so, naming the URL
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    with pytest.raises(ZeusBSORuntimError, match=f"cannot reach .* at {url}"):
        BatchSizeOptimizer(ZeusMonitor(), url, _spec())


def test_a_known_job_must_keep_its_settings(tmp_path):
    device.use_simulated("a40", "cifar100")
    url = str(tmp_path / "s.sqlite3")
    BatchSizeOptimizer(ZeusMonitor(), url, _spec())
    with pytest.raises(Exception, match="already exists with other settings"):
        BatchSizeOptimizer(ZeusMonitor(), url, _spec(eta_knob=0.9))


def test_callback_set_drives_it(tmp_path):
    from zeus_nb.callback import CallbackSet

    system = device.use_simulated("a40", "cifar100")
    bso = BatchSizeOptimizer(ZeusMonitor(), str(tmp_path / "s.sqlite3"), _spec())
    callbacks = CallbackSet([bso])
    bs = bso.get_batch_size()
    callbacks.on_train_begin()
    callbacks.on_epoch_begin()
    device.step(system.steps_per_epoch(bs), batch_size=bs)
    callbacks.on_epoch_end()
    callbacks.on_evaluate(0.8)
    assert bso.training_finished


def test_the_power_limit_optimizer_pick_is_recorded_with_the_run(tmp_path):
    """Zeus's example runs a GlobalPowerLimitOptimizer beside the client: the limit it chose
    just in time is what the run's report records."""
    from zeus_nb.optimizer.power_limit import GlobalPowerLimitOptimizer

    system = device.use_simulated("a40", "cifar100")
    monitor = ZeusMonitor()
    plo = GlobalPowerLimitOptimizer(monitor, warmup_steps=1, profile_steps=2, pl_step=100)
    url = str(tmp_path / "s.sqlite3")
    bso = BatchSizeOptimizer(monitor=monitor, server_url=url, job=_spec())
    bs = bso.get_batch_size()
    bso.on_train_begin()
    for epoch in range(3):
        plo.on_epoch_begin()
        for _ in range(system.steps_per_epoch(bs)):
            plo.on_step_begin()
            device.step(1, batch_size=bs)
            plo.on_step_end()
        plo.on_epoch_end()
        bso.on_evaluate(0.7 if epoch == 2 else 0.1)
    assert bso.training_finished and plo.optimal_power_limit is not None
    ((_, obs),) = open_store(url).observations("cifar-1")
    assert obs.reached and obs.power_limit == plo.optimal_power_limit


ZEUS_DP = """
import json, os, sys
import torch
import torch.distributed as dist
from zeus_nb import device
from zeus_nb.callback import CallbackSet
from zeus_nb.monitor import ZeusMonitor
from zeus_nb.optimizer.batch_size import BatchSizeOptimizer, JobSpec
from zeus_nb.optimizer.batch_size.exceptions import ZeusBSOTrainFailError

dist.init_process_group("gloo")
rank = dist.get_rank()
system = device.use_simulated("a40", "cifar100")
log = []
for recurrence in range(2):
    bso = BatchSizeOptimizer(
        monitor=ZeusMonitor(gpu_indices=None), server_url=sys.argv[1], rank=rank,
        job=JobSpec(job_id="dp-1", job_id_prefix="dp", default_batch_size=1024,
                    batch_sizes=[512, 1024], target_metric=0.6, max_epochs=5),
    )
    # Zeus's data-parallel example: rank 0 asks, then broadcasts batch size and trial number.
    if rank == 0:
        t = torch.tensor([bso.get_batch_size(), bso.trial_number])
    else:
        t = torch.tensor([0, 0])
    dist.broadcast(t, src=0)
    bso.current_batch_size, bso.trial_number = int(t[0]), int(t[1])
    callbacks = CallbackSet([bso])
    callbacks.on_train_begin()
    bs = bso.current_batch_size
    try:
        for epoch in range(5):
            callbacks.on_epoch_begin()
            device.step(system.steps_per_epoch(bs), batch_size=bs)
            callbacks.on_epoch_end()
            callbacks.on_evaluate(0.7)
            if bso.training_finished:
                break
    except ZeusBSOTrainFailError:
        pass
    log.append([bs, bso.trial_number, bso.training_finished])
with open(os.path.join(sys.argv[2], f"rank{rank}.json"), "w") as f:
    json.dump(log, f)
dist.barrier()
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_zeus_data_parallel_pattern(tmp_path):
    """Zeus's DP example broadcasts the batch size by hand; the optimizer agrees with it."""
    script = tmp_path / "dp.py"
    script.write_text(ZEUS_DP)
    url = f"sqlite:///{tmp_path / 'bso.sqlite3'}"
    env = _env(tmp_path)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    proc = subprocess.run(
        [*cmd, str(script), url, str(tmp_path)], env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert r0 == r1 == [[1024, 1, True], [512, 2, True]]
    assert [t.status for t in open_store(url).trials("dp-1")] == ["succeeded"] * 2
