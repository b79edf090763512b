"""The batch-size optimizer server's boundary: what a request may hold, what start-up checks,
and what a trial that never reports costs (zeus_nb.optimizer.batch_size.server).

Each cause of the reliability issue is closed as a class, and each test discovers its cases
from the records themselves (every float field, every int field...), so a new field is covered
without a new test: the HTTP boundary and a Python caller meet one validation
(:mod:`zeus_nb.optimizer.batch_size.common`), every refusal is a 4xx JSON answer, nothing is
stored that a reader refuses, start-up fails with one line and exit 2, a dispatched trial is
leased, and a request reads only the runs added since the last one.
"""

# ruff: noqa: F811 (the server fixture, imported, is each test's argument)
from __future__ import annotations

import dataclasses
import json
import math
import socket
import subprocess
import sys
import typing

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("aiosqlite")

from pg_fixture import pg_server, pg_url  # noqa: E402, F401 (fixtures)
from test_bso_server import (  # noqa: E402
    REPO,
    _env,
    _free_port,
    _register,
    _report,
    _spec,
    server,  # noqa: F401 (fixture)
)

from zeus_nb.optimizer.batch_size.common import (  # noqa: E402
    GET_NEXT_BATCH_SIZE_URL,
    MAX_ID_LENGTH,
    REGISTER_JOB_URL,
    REPORT_END_URL,
    REPORT_RESULT_URL,
    JobSpecFromClient,
    TrainingResult,
    TrialId,
)
from zeus_nb.optimizer.batch_size.exceptions import JobSpecError  # noqa: E402
from zeus_nb.optimizer.batch_size.server import service  # noqa: E402
from zeus_nb.optimizer.batch_size.server.bodies import MAX_BODY_BYTES  # noqa: E402
from zeus_nb.optimizer.batch_size.server.jobs import Jobs  # noqa: E402
from zeus_nb.optimizer.batch_size.server.policy import POLICIES  # noqa: E402

JOB = "cifar-served"


def _job_body(**kw) -> dict:
    body = _spec().dict()
    body.update(max_power=600.0, number_of_gpus=2, gpu_model="A40")
    body.update(kw)
    return body


def _fields(record: type, *kinds: type) -> list[str]:
    """The record's fields whose declared type is one of ``kinds`` (Optional included)."""
    hints = typing.get_type_hints(record)
    out = []
    for f in dataclasses.fields(record):
        args = typing.get_args(hints[f.name]) or (hints[f.name],)
        if any(a in kinds for a in args):
            out.append(f.name)
    return out


def _raw(body: dict, field: str, literal: str) -> bytes:
    """``body`` as JSON with ``field`` set to a literal (NaN, Infinity: not JSON numbers)."""
    marker = "__literal__"
    text = json.dumps(dict(body, **{field: marker}))
    return text.replace(f'"{marker}"', literal).encode()


def _refused(answer, status=422) -> str:
    assert answer.status_code == status, (answer.status_code, answer.text)
    message = answer.json()["message"]  # JSON, with a message
    assert message
    return message


def _unknown(client, job_id=JOB) -> bool:
    answer = client.get(GET_NEXT_BATCH_SIZE_URL, params={"job_id": job_id})
    return answer.status_code == 400 and "register it first" in answer.json()["message"]


# -- one validation: the same values refused over HTTP and from Python -------------------------

FLOATS = _fields(JobSpecFromClient, float)
INTS = _fields(JobSpecFromClient, int)


def _bad_job_values() -> list[tuple[str, str, object]]:
    """(field, JSON literal, Python value) of every cause: non-finite floats, bool or text for
    numbers, ints out of range, bad priors, ids too long or not storable."""
    cases = []
    for name in FLOATS:
        cases += [(name, "NaN", math.nan), (name, "Infinity", math.inf), (name, "true", True)]
        cases.append((name, '"0.5"', "0.5"))
    for name in INTS:
        cases += [(name, "true", True), (name, "-3", -3), (name, "1.5", 1.5)]
    cases += [
        ("batch_sizes", "[true, 1024]", [True, 1024]),
        ("batch_sizes", "[256, 256, 1024]", [256, 256, 1024]),
        ("batch_sizes", json.dumps(list(range(1, 2000)) + [1024]), [*range(1, 2000), 1024]),
        ("mab_prior_precision", "-1", -1),
        ("higher_is_better_metric", "1", 1),
        ("job_id", json.dumps("cifar-\ud800"), "cifar-\ud800"),
        ("job_id", json.dumps("cifar-" + "x" * MAX_ID_LENGTH), "cifar-" + "x" * MAX_ID_LENGTH),
        ("job_id", json.dumps("cifar-\n"), "cifar-\n"),
        ("gpu_model", json.dumps(""), ""),
        ("max_power", "6e9", 6e9),
    ]
    return cases


@pytest.mark.parametrize(("field", "literal", "value"), _bad_job_values())
def test_a_bad_job_is_refused_over_http_and_from_python_alike(server, field, literal, value):
    client, _ = server
    with pytest.raises(JobSpecError):
        JobSpecFromClient(**_job_body(**{field: value}))
    answer = client.post(REGISTER_JOB_URL, content=_raw(_job_body(), field, literal))
    assert field.split("[")[0] in _refused(answer)
    assert _unknown(client)  # nothing stored
    job_id = value if field == "job_id" and isinstance(value, str) else JOB
    if field == "job_id" and "\ud800" not in job_id:  # (httpx cannot send a surrogate)
        assert client.get(GET_NEXT_BATCH_SIZE_URL, params={"job_id": job_id}).status_code in (
            400,
            422,
        )


def _bad_report_values() -> list[tuple[str, str, object]]:
    cases = []
    for name in _fields(TrainingResult, float):
        cases += [(name, "NaN", math.nan), (name, "-Infinity", -math.inf), (name, "true", True)]
    for name in _fields(TrainingResult, int):
        cases += [(name, "true", True), (name, "-3", -3)]
    return cases


@pytest.mark.parametrize(("field", "literal", "value"), _bad_report_values())
def test_a_bad_report_is_refused_and_the_trial_stays_out(server, field, literal, value):
    client, _ = server
    assert _register(client)[0].status_code == 201
    trial = client.get(GET_NEXT_BATCH_SIZE_URL, params={"job_id": JOB}).json()
    good = dict(trial, time=10.0, energy=3000.0, metric=0.7, current_epoch=1)
    with pytest.raises(JobSpecError):
        TrainingResult(**dict(good, **{field: value}))
    assert field in _refused(client.post(REPORT_RESULT_URL, content=_raw(good, field, literal)))
    # nothing recorded: the exploration is still out, so the next run is a concurrent one
    again = client.post(REPORT_RESULT_URL, json=good).json()
    assert again["converged"] and again["message"] == "reached the target"


def test_a_report_no_gpu_of_the_job_can_draw_is_refused(server):
    """1e7 J over 10 s on one GPU is 1 MW: never a run that reached its target."""
    client, _ = server
    body = _job_body(max_power=300.0, number_of_gpus=1)
    assert client.post(REGISTER_JOB_URL, json=body).status_code == 201
    trial = client.get(GET_NEXT_BATCH_SIZE_URL, params={"job_id": JOB}).json()
    mw = dict(trial, time=10.0, energy=1e7, metric=0.7, current_epoch=1)
    assert "max_power 300 W" in _refused(client.post(REPORT_RESULT_URL, json=mw))
    fine = dict(mw, energy=10.0 * 300.0)
    assert client.post(REPORT_RESULT_URL, json=fine).json()["converged"]


def test_bodies_that_are_not_records_get_4xx_json(server):
    client, _ = server
    for content in (b"[1, 2]", b"{", b"\xff\xfe", b"[" * 10_000, b"{}", b"null"):
        _refused(client.post(REGISTER_JOB_URL, content=content))
        _refused(client.post(REPORT_RESULT_URL, content=content))
        _refused(client.patch(REPORT_END_URL, content=content))
    big = json.dumps(_job_body(job_id="cifar-" + "x" * MAX_BODY_BYTES)).encode()
    assert "larger than" in _refused(client.post(REGISTER_JOB_URL, content=big), 413)

    def chunks():
        yield big[: len(big) // 2]
        yield big[len(big) // 2 :]

    streamed = client.post(REGISTER_JOB_URL, content=chunks())  # no Content-Length
    assert "larger than" in _refused(streamed, 413)
    _refused(client.get(GET_NEXT_BATCH_SIZE_URL))  # no job_id
    long_id = client.get(GET_NEXT_BATCH_SIZE_URL, params={"job_id": "x" * (MAX_ID_LENGTH + 1)})
    assert "at most" in _refused(long_id)
    assert _unknown(client)


@pytest.mark.parametrize(
    "extreme",
    [
        dict(mab_prior_precision=1e300, mab_prior_mean=-1e300),
        dict(mab_seed=2**32 - 1, mab_num_explorations=0),
        dict(beta_knob=None, window_size=10**9, num_pruning_rounds=0),
        dict(job_id="cifar-" + "é" * (MAX_ID_LENGTH - 6), eta_knob=1.0),
        dict(target_metric=-1e300, higher_is_better_metric=False),
    ],
)
def test_what_is_stored_is_what_its_readers_take(server, extreme):
    """A job the server accepts is one its policy (and later requests) read back: 201, then
    every request answers."""
    client, _ = server
    body = _job_body(**extreme)
    answer = client.post(REGISTER_JOB_URL, json=body)
    if answer.status_code == 422:  # refused at registration, never stored
        assert _unknown(client, body["job_id"])
        return
    assert answer.status_code == 201, answer.text
    for _ in range(3):
        trial = client.get(GET_NEXT_BATCH_SIZE_URL, params={"job_id": body["job_id"]})
        assert trial.status_code == 200, trial.text
        assert _report(client, trial.json(), 10.0, False, epoch=1).status_code == 200


# -- the Python client refuses a NaN metric before sending -------------------------------------


def test_the_client_refuses_a_nan_metric_before_sending(server, monkeypatch):
    from zeus_nb import device
    from zeus_nb.monitor import ZeusMonitor
    from zeus_nb.optimizer.batch_size.client import BatchSizeOptimizer

    client, _ = server
    system = device.use_simulated("a40", "cifar100")
    bso = BatchSizeOptimizer(ZeusMonitor(), "http://testserver", _spec())
    bs = bso.get_batch_size()
    bso.on_train_begin()
    device.step(system.steps_per_epoch(bs), batch_size=bs)
    sent = []
    real_post = client.post
    monkeypatch.setattr("httpx.post", lambda *a, **k: sent.append(a) or real_post(*a, **k))
    for bad in (math.nan, math.inf, "0.5", True):
        with pytest.raises(JobSpecError, match="on_evaluate"):
            bso.on_evaluate(bad)
    assert sent == [] and bso.cur_epoch == 0
    bso.on_evaluate(0.7)  # the run goes on as if nothing happened
    assert bso.training_finished and len(sent) == 1


# -- leases on dispatched trials --------------------------------------------------------------


def test_a_trial_that_never_reports_is_lost_after_its_lease(server, monkeypatch):
    client, _ = server
    now = [1_000_000.0]
    monkeypatch.setattr(service, "clock", lambda: now[0])
    lease = service.settings.trial_lease
    assert _register(client)[0].status_code == 201

    def ask():
        return client.get(GET_NEXT_BATCH_SIZE_URL, params={"job_id": JOB}).json()

    first = ask()  # the exploration of 1024, never answered
    assert ask()["batch_size"] == 1024  # a concurrent run while it is out
    now[0] += lease / 2
    going = _report(client, ask(), 1.0, False)  # trial 3 reports: its lease is renewed
    assert going.json()["stop_train"] is False
    now[0] += lease / 2 + 1  # trials 1 and 2 are past their lease; trial 3 is not
    nxt = ask()
    assert nxt["batch_size"] == 1024 and nxt["trial_number"] == 4  # the exploration again
    late = _report(client, first, 10.0, True)
    assert "trial lease" in _refused(late, 400)
    assert _report(client, dict(first, trial_number=3), 2.0, True).json()["converged"]
    assert _report(client, nxt, 2.5, True).json()["converged"]
    assert ask()["batch_size"] == 512  # pruning goes on
    # the ended trials hold no lease; an unknown trial still answers 404
    assert client.patch(REPORT_END_URL, json=dict(first, trial_number=99)).status_code == 404


# -- the policy is cached: a request reads only the runs added since ---------------------------


def test_requests_read_only_new_runs_and_decide_as_a_rebuilt_policy(server, monkeypatch):
    client, _ = server
    assert _register(client, batch_sizes=[128, 256, 512, 1024])[0].status_code == 201
    read = []
    original = Jobs.observations_after

    async def counted(self, job_id, after):
        rows = await original(self, job_id, after)
        read.append(len(rows))
        return rows

    monkeypatch.setattr(Jobs, "observations_after", counted)
    decisions = []
    for i in range(24):
        trial = client.get(GET_NEXT_BATCH_SIZE_URL, params={"job_id": JOB}).json()
        decisions.append(trial["batch_size"])
        answer = _report(client, trial, 10.0 + trial["batch_size"] / 100 + i % 3, True)
        assert answer.json()["converged"]
    assert max(read[1:]) <= 1  # after the first request, only the new run is read
    cached = client.get(GET_NEXT_BATCH_SIZE_URL, params={"job_id": JOB}).json()
    assert read[-1] == 1
    client.patch(REPORT_END_URL, json=cached)
    POLICIES.clear()  # a fresh process: rebuilt from all runs, the same decision
    rebuilt = client.get(GET_NEXT_BATCH_SIZE_URL, params={"job_id": JOB}).json()
    assert read[-1] == 24 and len(set(decisions)) > 1  # the rebuild read the whole history
    # the same decision (the failed trial in between teaches nothing)
    assert cached["batch_size"] == rebuilt["batch_size"]


def test_a_deleted_and_registered_job_starts_over_in_the_cache(server):
    client, _ = server
    assert _register(client)[0].status_code == 201
    trial = client.get(GET_NEXT_BATCH_SIZE_URL, params={"job_id": JOB}).json()
    assert _report(client, trial, 10.0, True).json()["converged"]
    assert client.delete("/jobs", params={"job_id": JOB}).status_code == 200
    assert _register(client)[0].status_code == 201
    first = client.get(GET_NEXT_BATCH_SIZE_URL, params={"job_id": JOB}).json()
    assert (first["batch_size"], first["trial_number"]) == (1024, 1)  # nothing remembered


# -- concurrent requests: every trial numbered once, every result kept once ---------------------


@pytest.mark.parametrize("server", ["sqlite", "postgresql"], indirect=True)
def test_concurrent_requests_keep_every_trial_and_result_once(server):
    """Eight clients at once, two per job: the requests of one database take turns (and those
    of one job), so trial numbers are unique and contiguous, each result is stored once, a
    repeated report changes nothing, and no lease outlives its trial."""
    from concurrent.futures import ThreadPoolExecutor

    from zeus_nb.optimizer.batch_size.store_url import open_store

    client, path = server
    jobs = [f"cifar-c{i}" for i in range(4)]
    for job in jobs:
        assert _register(client, job_id=job)[0].status_code == 201

    def runs(i: int) -> list[tuple[int, bool]]:
        job, done = jobs[i % 4], []
        for n in range(6):
            trial = client.get(GET_NEXT_BATCH_SIZE_URL, params={"job_id": job}).json()
            if n % 3 == 2:  # a run that exits without a verdict
                assert client.patch(REPORT_END_URL, json=trial).status_code == 200
                done.append((trial["trial_number"], False))
                continue
            assert _report(client, trial, 10.0, False).json()["stop_train"] is False
            assert _report(client, trial, 20.0, True, epoch=2).json()["stop_train"]
            again = _report(client, trial, 99.0, True, epoch=3).json()
            assert "already reported" in again["message"]
            done.append((trial["trial_number"], True))
        return done

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(runs, range(8)))
    store = open_store(path, create=False)
    try:
        for j, job in enumerate(jobs):
            mine = sorted(r for i, rs in enumerate(results) if i % 4 == j for r in rs)
            assert [n for n, _ in mine] == list(range(1, 13))  # each number handed out once
            trials = store.trials(job)
            assert [t.trial_number for t in trials] == list(range(1, 13))
            reported = {n for n, ok in mine if ok}
            assert {t.trial_number for t in trials if t.status == "succeeded"} == reported
            log = store.observations(job)
            assert len(log) == len(reported) == 8  # each result once
            assert sorted(t.observation for t in trials if t.observation) == [i for i, _ in log]
            assert all(t.status != "dispatched" for t in trials)  # each ended with its lease
    finally:
        store.close()
    nxt = client.get(GET_NEXT_BATCH_SIZE_URL, params={"job_id": jobs[0]}).json()
    assert nxt["trial_number"] == 13


# -- start-up checks: one line, exit 2 ---------------------------------------------------------


def _serve(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "zeus_nb.cli", "bso", "serve", *args]
    return subprocess.run(
        cmd, env=_env(), capture_output=True, text=True, timeout=timeout, cwd=REPO
    )


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("sqlite:///{tmp}/missing/served.sqlite3", "does not exist"),
        ("sqlite:///{tmp}/text.db", "not a SQLite database"),
        ("postgresql://user:secret@127.0.0.1:{closed}/db", "connection refused"),
        ("mysql://user:secret@127.0.0.1/db", "pip install aiomysql"),
    ],
)
def test_serve_checks_its_database_before_it_serves(tmp_path, url, says):
    (tmp_path / "text.db").write_text("not a database\n" * 100)
    port = _free_port()
    url = url.format(tmp=tmp_path, closed=_free_port())
    out = _serve("--port", str(port), "--database-url", url)
    assert out.returncode == 2, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("zeus-nb: error:") and says in last, out.stderr
    assert "secret" not in out.stderr


def test_serve_refuses_a_port_in_use(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = _serve("--port", str(port), "--database-url", f"sqlite:///{tmp_path}/s.sqlite3")
    assert out.returncode == 2, out.stderr
    assert f"port {port} on 127.0.0.1 is in use" in out.stderr.strip().splitlines()[-1]


def test_trial_ids_are_checked_like_jobs():
    with pytest.raises(JobSpecError):
        TrialId(job_id="x", batch_size=True, trial_number=1)
    with pytest.raises(JobSpecError):
        TrialId(job_id="x", batch_size=64, trial_number=0)
