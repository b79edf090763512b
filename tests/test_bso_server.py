"""The batch-size optimizer server (zeus_nb.optimizer.batch_size.server) with zeus-nb's client.

Zeus's own server tests run against it unchanged (tests/optimizer/batch_size in Zeus's suite);
these check what they do not:

* recurrences of a job on the simulated GPU, measured by a real ZeusMonitor, through the
  client and the app, from registration through pruning to Thompson sampling; the database is
  then a zeus-nb store the paper policy reads directly and decides from as the server does;
* the server decides run for run as zeus-nb's legacy ``PruningGTSBatchSizeOptimizer`` (the
  policy Zeus's ``test_simulator`` compares a server with) on the same replayed runs;
* Zeus's concurrency rule, repeated and late reports, and the error answers;
* ``zeus-nb bso serve`` over real HTTP on 127.0.0.1, and a base import that needs no FastAPI.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("aiosqlite")

import httpx  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402
from pg_fixture import pg_server, pg_url  # noqa: E402, F401 (fixtures)

from zeus_nb import device  # noqa: E402
from zeus_nb.monitor import ZeusMonitor  # noqa: E402
from zeus_nb.optimizer.batch_size import PaperBatchSizeOptimizer  # noqa: E402
from zeus_nb.optimizer.batch_size.client import BatchSizeOptimizer  # noqa: E402
from zeus_nb.optimizer.batch_size.common import (  # noqa: E402
    DELETE_JOB_URL,
    GET_NEXT_BATCH_SIZE_URL,
    REGISTER_JOB_URL,
    REPORT_END_URL,
    REPORT_RESULT_URL,
    JobSpec,
)
from zeus_nb.optimizer.batch_size.exceptions import ZeusBSOTrainFailError  # noqa: E402
from zeus_nb.optimizer.batch_size.server.database.db_connection import (  # noqa: E402
    DatabaseSessionManager,
    get_db_session,
)
from zeus_nb.optimizer.batch_size.server.router import app  # noqa: E402
from zeus_nb.optimizer.batch_size.store_url import open_store  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SIZES = [256, 512, 1024]
URL = "http://testserver"  # TestClient's host


@pytest.fixture(params=["sqlite"])
def server(request, tmp_path, monkeypatch):
    """The app on a fresh database (a SQLite file; a PostgreSQL database where a test asks for
    it), with httpx's functions routed to it (as Zeus's tests do); yields (TestClient, the
    database's location)."""
    if request.param == "postgresql":
        path = request.getfixturevalue("pg_url")
    else:
        path = tmp_path / "served.sqlite3"
    manager = DatabaseSessionManager(path if request.param == "postgresql" else f"sqlite:///{path}")
    asyncio.run(manager.create_tables())

    async def session():
        async with manager.session() as s:
            yield s

    app.dependency_overrides[get_db_session] = session
    try:
        with TestClient(app) as client:
            for method in ("post", "get", "patch", "delete"):
                monkeypatch.setattr(httpx, method, getattr(client, method))
            yield client, path
    finally:
        app.dependency_overrides.pop(get_db_session, None)
        asyncio.run(manager.close())


def _spec(**kw) -> JobSpec:
    base = dict(
        job_id="cifar-served",
        job_id_prefix="cifar",
        default_batch_size=1024,
        batch_sizes=SIZES,
        target_metric=0.6,
        max_epochs=6,
        mab_seed=7,
    )
    base.update(kw)
    return JobSpec(**base)


def _recurrence(epochs_to_target: dict[int, int], **spec_kw):
    """One training run on the simulated GPU through the server: (batch size, trial, epochs
    run, whether it reached the target)."""
    system = device.use_simulated("a40", "cifar100")
    bso = BatchSizeOptimizer(ZeusMonitor(), URL, _spec(**spec_kw))
    bs = bso.get_batch_size()
    bso.on_train_begin()
    epochs = 0
    try:
        while not bso.training_finished:
            device.step(system.steps_per_epoch(bs), batch_size=bs)
            epochs += 1
            bso.on_evaluate(0.7 if epochs >= epochs_to_target[bs] else 0.1)
    except ZeusBSOTrainFailError:
        return bs, bso.trial_number, epochs, False
    return bs, bso.trial_number, epochs, True


@pytest.mark.parametrize("server", ["sqlite", "postgresql"], indirect=True)
def test_recurrences_through_the_server_prune_then_sample(server, caplog):
    _, path = server
    # 1024 and 512 reach the target after one epoch, 256 needs five: beta 2 stops it early.
    reach = {256: 5, 512: 1, 1024: 1}
    with caplog.at_level(logging.INFO, logger="zeus_nb.optimizer.batch_size.server"):
        runs = [_recurrence(reach) for _ in range(12)]
    # the end of pruning is logged once, with the arms sampled from then on (as Zeus does)
    ends = [r.getMessage() for r in caplog.records if "Thompson sampling with arms" in r.message]
    assert ends == ["job cifar-served: pruning is over; Thompson sampling with arms [512, 1024]"]
    assert [r[1] for r in runs] == list(range(1, 13))  # one trial per run, numbered in order
    store = open_store(path, create=False)
    log = store.observations("cifar-served")
    # Round 1: the default, then smaller ones until one fails; round 2 over the survivors,
    # centred on the cheapest of round 1.
    cost = {o.batch_size: o.cost for _, o in log[:2]}
    centre = min(cost, key=cost.get)
    assert [(bs, ok) for bs, _, _, ok in runs[:5]] == [
        (1024, True),
        (512, True),
        (256, False),
        (centre, True),
        (1536 - centre, True),
    ]
    assert runs[2][2] < reach[256]  # stopped at beta x the best cost, before its target
    assert {bs for bs, *_ in runs[5:]} <= {512, 1024}  # Thompson sampling over the survivors
    assert all(ok for *_, ok in runs[5:])

    # The database is a zeus-nb store: every run is there, each trial ended with its run.
    try:
        assert store.jobs() == ["cifar-served"]
        assert [(o.batch_size, o.reached) for _, o in log] == [(r[0], r[3]) for r in runs]
        trials = store.trials("cifar-served")
        assert [(t.batch_size, t.status) for t in trials] == [(r[0], "succeeded") for r in runs]
        assert [t.observation for t in trials] == [i for i, _ in log]
        # The paper policy reading the store decides as the server does (no concurrent runs).
        bandit = PaperBatchSizeOptimizer("cifar-served", store)
        assert bandit.phase == "thompson" and bandit.survivors == [512, 1024]
        expected = bandit.next_batch_size()
    finally:
        store.close()
    assert _recurrence(reach)[0] == expected


class _ThroughServer:
    """Zeus's legacy policy interface, deciding by asking the server (for the legacy Simulator).

    A cost c is reported as c / P seconds at P watts, whose cost is c for any eta.
    """

    name = "server"
    POWER = 250.0

    def __init__(self, client: TestClient, seed: int) -> None:
        self.client, self.seed = client, seed
        self.trial = None

    def __deepcopy__(self, memo):  # the Simulator copies its policies; this one has no state
        return self

    def register_job(self, job, batch_sizes) -> None:
        spec = dict(
            job_id="legacy-job",
            job_id_prefix="legacy",
            batch_sizes=[int(b) for b in batch_sizes],
            default_batch_size=int(job.default_bs),
            beta_knob=None,  # the Simulator stops runs itself
            target_metric=0.5,
            max_epochs=100,
            mab_seed=self.seed,
            max_power=self.POWER,
            number_of_gpus=1,
            gpu_model="v100",
        )
        assert self.client.post(REGISTER_JOB_URL, json=spec).status_code == 201

    def predict(self, job) -> int:
        answer = self.client.get(GET_NEXT_BATCH_SIZE_URL, params={"job_id": "legacy-job"})
        self.trial = answer.json()
        return self.trial["batch_size"]

    def observe(self, job, batch_size, cost, converged=None) -> None:
        assert batch_size == self.trial["batch_size"]
        report = dict(
            self.trial,
            time=cost / self.POWER,
            energy=cost,
            metric=1.0 if converged else 0.0,
            current_epoch=100,
        )
        verdict = self.client.post(REPORT_RESULT_URL, json=report).json()
        assert verdict["stop_train"] and verdict["converged"] == bool(converged)


def test_the_server_decides_as_the_legacy_policy_run_for_run(server):
    from zeus_nb._legacy.job import Job
    from zeus_nb._legacy.policy import JITPowerLimitOptimizer, PruningGTSBatchSizeOptimizer
    from zeus_nb._legacy.simulate import Simulator
    from zeus_nb.data.traces import load_power_trace, load_train_trace

    client, _ = server
    train, power = load_train_trace(), load_power_trace("v100")
    job = Job("librispeech", "deepspeech2", "adamw", 40.0, 16, 192)

    def history(policy):
        sim = Simulator(train, power, policy, JITPowerLimitOptimizer(verbose=False), seed=1)
        return sim.simulate_one_job(job, 80, beta_knob=2.0, eta_knob=0.5)

    ours = history(_ThroughServer(client, seed=1))
    legacy = history(PruningGTSBatchSizeOptimizer(seed=1, verbose=False))
    assert len({e.bs for e in legacy}) > 3  # pruning and sampling both had choices to make
    assert ours == legacy


def _register(client, **kw):
    spec = _spec(**kw).dict()
    spec.update(max_power=600.0, number_of_gpus=2, gpu_model="A40")
    return client.post(REGISTER_JOB_URL, json=spec), spec


def _report(client, trial, seconds, reached, epoch=1):
    body = dict(trial, time=seconds, energy=300.0 * seconds, metric=0.7 if reached else 0.1)
    return client.post(REPORT_RESULT_URL, json=dict(body, current_epoch=epoch))


@pytest.mark.parametrize("server", ["sqlite", "postgresql"], indirect=True)
def test_concurrent_runs_and_repeated_reports_follow_zeus(server):
    client, _ = server
    assert _register(client)[0].status_code == 201

    def ask():
        return client.get(GET_NEXT_BATCH_SIZE_URL, params={"job_id": "cifar-served"}).json()

    first, second = ask(), ask()  # the exploration of 1024 is out: the second run is concurrent
    assert (first["batch_size"], second["batch_size"]) == (1024, 1024)
    assert _report(client, second, 10.0, True).json()["converged"]  # learned, does not prune
    third = ask()  # still waiting for the exploration: another concurrent run at the cheapest
    assert third["batch_size"] == 1024
    assert client.patch(REPORT_END_URL, json=first).status_code == 200  # its run crashed
    fourth = ask()  # the exploration of 1024 starts over
    assert fourth["batch_size"] == 1024 and fourth["trial_number"] == 4
    assert _report(client, fourth, 10.0, True).json()["stop_train"]
    assert ask()["batch_size"] == 512  # pruning moved on, down from the default
    # A run reported twice keeps its first verdict; a crashed run cannot report.
    again = _report(client, fourth, 99.0, False).json()
    assert again["converged"] and "is already reported" in again["message"]
    late = _report(client, first, 10.0, True)
    assert late.status_code == 400 and "ended without a result" in late.json()["message"]
    # A run that keeps training is not recorded; epochs left and no target yet.
    fifth = ask()
    going = _report(client, fifth, 1.0, False).json()
    assert going == {"stop_train": False, "converged": False, "message": "keep training"}


def test_error_answers_say_what_is_wrong(server):
    client, _ = server
    assert _register(client)[0].status_code == 201
    assert _register(client)[0].status_code == 200
    clash = _register(client, max_epochs=7)[0]
    assert clash.status_code == 409 and "max_epochs: registered 6, asked 7" in clash.text
    # zeus-nb refuses early stopping at or below the best cost (beta_knob must be > 1).
    low_beta = _register(client, job_id="cifar-low", beta_knob=0.5)[0]
    assert low_beta.status_code == 422 and "beta" in low_beta.json()["message"]
    fresh, _ = _register(client, job_id=None)  # a new job per registration, with its prefix
    assert fresh.status_code == 201 and fresh.json()["job_id"].startswith("cifar-")
    unknown = client.get(GET_NEXT_BATCH_SIZE_URL, params={"job_id": "nope"})
    assert unknown.status_code == 400 and "register it first" in unknown.json()["message"]
    trial = client.get(GET_NEXT_BATCH_SIZE_URL, params={"job_id": "cifar-served"}).json()
    wrong = _report(client, dict(trial, batch_size=512), 1.0, True)
    assert wrong.status_code == 400 and "no trial 1 at batch size 512" in wrong.json()["message"]
    negative = _report(client, trial, -1.0, True)
    assert (
        negative.status_code == 422 and "time: -1.0 is out of range" in negative.json()["message"]
    )
    gone = client.patch(REPORT_END_URL, json=dict(trial, trial_number=99))
    assert gone.status_code == 404
    assert client.delete(DELETE_JOB_URL, params={"job_id": "cifar-served"}).status_code == 200
    assert client.delete(DELETE_JOB_URL, params={"job_id": "cifar-served"}).status_code == 404
    assert _register(client)[0].status_code == 201  # registering again starts it over


def _env() -> dict[str, str]:
    return dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_until_served(url: str, proc: subprocess.Popen, deadline: float) -> None:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"zeus-nb bso serve exited: {proc.communicate()[1][-2000:]}")
        try:
            if httpx.get(url + "/openapi.json", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.2)
    pytest.fail("zeus-nb bso serve did not answer within 60 s")


@pytest.mark.slow
def test_serve_command_over_http(tmp_path):
    """``zeus-nb bso serve`` on 127.0.0.1, two recurrences over real HTTP, then the served
    database read as a store by ``zeus-nb bso show``."""
    pytest.importorskip("uvicorn")
    port, db = _free_port(), tmp_path / "served.sqlite3"
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    )
    cli = [sys.executable, "-m", "zeus_nb.cli", "bso"]
    serve = [*cli, "serve", "--port", str(port), "--database-url", f"sqlite:///{db}"]
    proc = subprocess.Popen(
        serve, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_served(url, proc, time.monotonic() + 60)
        runs = []
        for _ in range(2):
            system = device.use_simulated("a40", "cifar100")
            bso = BatchSizeOptimizer(ZeusMonitor(), url, _spec())
            bs = bso.get_batch_size()
            bso.on_train_begin()
            device.step(system.steps_per_epoch(bs), batch_size=bs)
            bso.on_evaluate(0.7)
            assert bso.training_finished
            runs.append((bs, bso.trial_number))
        assert runs == [(1024, 1), (512, 2)]
    finally:
        proc.terminate()
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
    shown = subprocess.run(
        [*cli, "show", "cifar-served", "--store", str(db), "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    state = json.loads(shown.stdout)
    assert state["observations"] == 2 and state["phase"] == "pruning"


def test_the_package_imports_without_the_server_extra():
    code = (
        "import sys\n"
        "for m in ('fastapi', 'aiosqlite', 'uvicorn'): sys.modules[m] = None\n"
        "import zeus_nb.optimizer.batch_size as b\n"
        "from zeus_nb.optimizer.batch_size.client import BatchSizeOptimizer\n"
        "from zeus_nb.optimizer.batch_size.common import REGISTER_JOB_URL\n"
        "from zeus_nb.cli import build_parser\n"
        "build_parser()\n"
        "print('ok')\n"
    )
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
