"""Zeus's in-training batch-size optimizer calls, on the simulated GPU and a real store."""

from __future__ import annotations

import socket

import pytest

from zeus_nb import device
from zeus_nb.monitor import ZeusMonitor
from zeus_nb.optimizer.batch_size.client import (
    OperationOrderError,
    TrainFailError,
    TrainingBatchSizeOptimizer,
    TrainingJobSpec,
)
from zeus_nb.optimizer.batch_size.exceptions import (
    JobSpecError,
    ZeusBSOBadOperationError,
    ZeusBSORuntimError,
)
from zeus_nb.optimizer.batch_size.store_url import open_store

SIZES = [256, 512, 1024]


def _spec(**kw) -> TrainingJobSpec:
    base = dict(
        job_id="cifar",  # one job across recurrences (job_id=None: a new job per run, as Zeus)
        job_id_prefix="cifar",
        default_batch_size=1024,
        batch_sizes=SIZES,
        target_metric=0.6,
        max_epochs=5,
    )
    base.update(kw)
    return TrainingJobSpec(**base)


def _recurrence(url, metrics_at, **spec_kw):
    """One training run: each epoch steps the simulated GPU, then evaluates."""
    system = device.use_simulated("a40", "cifar100")
    monitor = ZeusMonitor()
    bso = TrainingBatchSizeOptimizer(monitor=monitor, server_url=url, job=_spec(**spec_kw))
    bs = bso.get_batch_size()
    bso.on_train_begin()
    epochs = 0
    try:
        for epoch in range(100):
            device.step(system.steps_per_epoch(bs), batch_size=bs)
            epochs += 1
            bso.on_evaluate(metrics_at(bs, epoch))
            if bso.finished:
                break
    except TrainFailError as e:
        return bs, epochs, e
    return bs, epochs, None


def test_runs_report_themselves_and_expensive_ones_stop_early(tmp_path):
    url = f"sqlite:///{tmp_path / 'bso.sqlite3'}"
    # 1024 and 512 reach the target after one epoch, 256 after four.
    reach = {256: 4, 512: 1, 1024: 1}

    def metric(bs, epoch):
        return 0.7 if epoch + 1 >= reach[bs] else 0.1

    bs, epochs, err = _recurrence(url, metric)
    assert (bs, epochs, err) == (1024, 1, None)
    store = open_store(url, create=False)
    (obs,) = [o for _, o in store.observations("cifar")]
    sim = device.use_simulated("a40", "cifar100")
    t_step, watts = sim.step_cost(1024, sim.max_limit)
    n = sim.steps_per_epoch(1024)
    assert obs.reached and obs.batch_size == 1024
    assert obs.time == pytest.approx(n * t_step, rel=1e-6)
    assert obs.energy == pytest.approx(n * t_step * watts, rel=1e-6)
    # Max power is the GPU's maximum limit; eta 0.5.
    assert obs.cost == pytest.approx(0.5 * obs.energy + 0.5 * sim.max_limit * obs.time)

    # Pruning goes down next: 512 reaches the target in 1 epoch.
    assert _recurrence(url, metric) == (512, 1, None)
    # 256 would need 4 epochs; beta 2 stops it once its cost passes 2 x the best cost.
    bs, epochs, err = _recurrence(url, metric)
    assert bs == 256 and isinstance(err, TrainFailError)
    assert "early-stopping threshold" in str(err)
    last = store.observations("cifar")[-1][1]
    best = min(o.cost for _, o in store.observations("cifar") if o.reached)
    assert not last.reached and last.cost > 2 * best
    # It stopped at the first epoch past the threshold, not later.
    t256, w256 = sim.step_cost(256, sim.max_limit)
    per_epoch = sim.steps_per_epoch(256) * t256 * (0.5 * w256 + 0.5 * sim.max_limit)
    assert (epochs - 1) * per_epoch <= 2 * best < epochs * per_epoch


def test_max_epochs_ends_a_run_that_never_reaches_the_target(tmp_path):
    url = str(tmp_path / "bso.sqlite3")
    bs, epochs, err = _recurrence(url, lambda bs, e: 0.0, max_epochs=3, beta_knob=None)
    assert epochs == 3 and "max_epochs=3" in str(err)
    (obs,) = [o for _, o in open_store(url).observations("cifar")]
    assert not obs.reached


def test_lower_is_better_metric(tmp_path):
    url = str(tmp_path / "bso.sqlite3")
    res = _recurrence(url, lambda bs, e: 1.0 - e, target_metric=0.5, higher_is_better_metric=False)
    assert res[1:] == (2, None)


def test_an_http_server_url_nobody_serves_says_what_to_do():
    """http:// goes to a batch-size optimizer server; none listening is one clear error."""
    device.use_simulated("a40", "cifar100")
    with socket.socket() as s:  # a port of this machine that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ZeusBSORuntimError, match="cannot reach") as e:
        TrainingBatchSizeOptimizer(ZeusMonitor(), f"http://127.0.0.1:{port}", _spec())
    assert "zeus-nb bso serve" in str(e.value) and "sqlite:///" in str(e.value)


def test_call_order_and_ranks(tmp_path):
    device.use_simulated("a40", "cifar100")
    url = str(tmp_path / "s.sqlite3")
    bso = TrainingBatchSizeOptimizer(ZeusMonitor(), url, _spec())
    with pytest.raises(OperationOrderError, match="get_batch_size"):
        bso.on_evaluate(0.1)
    other = TrainingBatchSizeOptimizer(ZeusMonitor(), url, _spec(), rank=1)
    assert other.optimizer is None  # only rank 0 touches the store
    with pytest.raises(ZeusBSOBadOperationError, match="broadcast"):
        other.get_batch_size()


def test_job_id_must_carry_its_prefix():
    with pytest.raises(JobSpecError, match="prefix"):
        _spec(job_id="other-1")
    assert _spec(job_id="cifar-7").job_id == "cifar-7"


DP_SCRIPT = """
import json, os, sys
import torch.distributed as dist
from zeus_nb import device
from zeus_nb.monitor import ZeusMonitor
# Zeus's imports with zeus -> zeus_nb: zeus.optimizer.batch_size.{client,common}
from zeus_nb.optimizer.batch_size.client import BatchSizeOptimizer, ZeusBSOTrainFailError
from zeus_nb.optimizer.batch_size.common import JobSpec

dist.init_process_group("gloo")
rank = dist.get_rank()
url, out = sys.argv[1], sys.argv[2]
system = device.use_simulated("a40", "cifar100")
spec = JobSpec(job_id="dp", job_id_prefix="dp", default_batch_size=1024,
               batch_sizes=[256, 512, 1024], target_metric=0.6, max_epochs=5)
log = []
for recurrence in range(3):
    bso = BatchSizeOptimizer(monitor=ZeusMonitor(), server_url=url, job=spec, rank=rank)
    bs = bso.get_batch_size()
    bso.on_train_begin()
    epochs, failed = 0, False
    try:
        for epoch in range(100):
            device.step(system.steps_per_epoch(bs) * (rank + 1), batch_size=bs)  # rank 1 slower
            epochs += 1
            # Only rank 0's metric decides; rank 1 reports nonsense to prove it.
            reached = epoch + 1 >= (4 if bs == 256 else 1)
            bso.on_evaluate((0.7 if reached else 0.1) if rank == 0 else -1.0)
            if bso.finished:
                break
    except ZeusBSOTrainFailError:
        failed = True
    log.append({"bs": bs, "epochs": epochs, "failed": failed, "time": bso.time,
                "energy": bso.energy})
with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
    json.dump(log, f)
dist.barrier()
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_data_parallel_ranks_share_one_decision_and_one_report(tmp_path):
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    script = tmp_path / "dp.py"
    script.write_text(DP_SCRIPT)
    url = f"sqlite:///{tmp_path / 'bso.sqlite3'}"
    env = dict(os.environ, OMP_NUM_THREADS="1", ZEUS_NB_STATE_DIR=str(tmp_path / "state"))
    env["PYTHONPATH"] = os.pathsep.join([str(repo), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    proc = subprocess.run(
        [*cmd, str(script), url, str(tmp_path)], env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert r0 == r1  # same batch sizes, same stops, same job-wide time and energy
    assert [(x["bs"], x["epochs"], x["failed"]) for x in r0] == [
        (1024, 1, False),
        (512, 1, False),
        (256, r0[2]["epochs"], True),  # early-stopped, as in the single-process test
    ]
    rows = [o for _, o in open_store(url).observations("dp")]
    assert len(rows) == 3  # one report per recurrence, from rank 0 only
    sim = device.use_simulated("a40", "cifar100")
    t_step, watts = sim.step_cost(1024, sim.max_limit)
    n = sim.steps_per_epoch(1024)
    # The job's time is the slowest rank's (rank 1 ran twice the steps); energy both GPUs'.
    assert rows[0].time == pytest.approx(2 * n * t_step, rel=1e-6)
    assert rows[0].energy == pytest.approx(3 * n * t_step * watts, rel=1e-6)
    # Max power is both GPUs' maximum limit: cost = 0.5 E + 0.5 (2 x max) T.
    assert rows[0].cost == pytest.approx(0.5 * rows[0].energy + sim.max_limit * rows[0].time)


def test_the_recurrence_level_class_takes_zeus_call_shape(tmp_path):
    from zeus_nb.optimizer.batch_size import BatchSizeOptimizer, JobSpec
    from zeus_nb.optimizer.batch_size.common import JobSpec as ZeusJobSpec
    from zeus_nb.optimizer.batch_size.store import JobSpec as StoreJobSpec

    assert JobSpec is ZeusJobSpec  # the package exports Zeus's JobSpec, as Zeus does

    device.use_simulated("a40", "cifar100")
    url = f"sqlite:///{tmp_path / 's.sqlite3'}"
    bso = BatchSizeOptimizer(monitor=ZeusMonitor(), server_url=url, job=_spec(), rank=0)
    assert isinstance(bso, TrainingBatchSizeOptimizer) and ZeusJobSpec is TrainingJobSpec
    assert bso.get_batch_size() == 1024
    # The recurrence-level API is unchanged, by path or URL.
    plain = BatchSizeOptimizer("cifar", url)
    assert plain.job == bso.optimizer.job and plain.next_batch_size() == 1024
    with pytest.raises(TypeError, match="common.JobSpec"):
        BatchSizeOptimizer(monitor=ZeusMonitor(), server_url=url, job=StoreJobSpec("x", (8,), 8))
    with pytest.raises(TypeError, match="monitor"):
        BatchSizeOptimizer(server_url=url, job=_spec())
