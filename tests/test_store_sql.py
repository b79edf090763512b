"""The batch-size store by URL: SQLite files and PostgreSQL, shared by many processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from pg_fixture import pg_server, pg_url  # noqa: F401 (fixtures)

from zeus_nb.optimizer.batch_size import BatchSizeOptimizer
from zeus_nb.optimizer.batch_size.sql_store import (
    SCHEMA_VERSION,
    SQLStore,
    StoreNotFoundError,
    StoreSchemaError,
)
from zeus_nb.optimizer.batch_size.sqlite_store import SQLiteStore
from zeus_nb.optimizer.batch_size.store import JobSpec, Observation, StoreError
from zeus_nb.optimizer.batch_size.store_url import STORE_ENV, StoreURLError, open_store

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.sqlite3'}"
    return request.getfixturevalue("pg_url")


def _spec(name="nightly", **kw):
    return JobSpec(name, (16, 32, 64), 32, max_power=300.0, **kw)


def test_url_forms_open_the_right_store(tmp_path, pg_url):  # noqa: F811
    rel = open_store(f"sqlite:///{tmp_path / 'a.sqlite3'}")
    assert isinstance(rel, SQLiteStore) and rel.path == tmp_path / "a.sqlite3"
    assert isinstance(open_store(str(tmp_path / "b.db")), SQLiteStore)
    assert isinstance(open_store(tmp_path / "c.db"), SQLiteStore)
    pg = open_store(pg_url)
    assert isinstance(pg, SQLStore) and pg.engine.dialect.name == "postgresql"
    assert open_store(pg) is pg


@pytest.mark.parametrize("url", ["http://bso-server:80", "https://example.org/bso"])
def test_a_server_url_says_which_forms_work(url):
    with pytest.raises(StoreURLError, match="server URL, not a store") as e:
        open_store(url)
    assert "postgresql://" in str(e.value) and "sqlite:///" in str(e.value)


def test_unknown_scheme_and_memory_sqlite_are_refused():
    with pytest.raises(StoreURLError, match="postgresql://"):
        open_store("mysql://db/x")
    with pytest.raises(StoreURLError, match="names no file"):
        open_store("sqlite:///:memory:")


def test_environment_variable_names_the_default_store(tmp_path, monkeypatch):
    monkeypatch.setenv(STORE_ENV, f"sqlite:///{tmp_path / 'env.sqlite3'}")
    assert open_store().path == tmp_path / "env.sqlite3"


def test_read_only_open_never_creates_a_store(tmp_path, pg_url):  # noqa: F811
    missing = tmp_path / "missing.sqlite3"
    with pytest.raises(StoreNotFoundError):
        open_store(f"sqlite:///{missing}", create=False)
    assert not missing.exists()
    with pytest.raises(StoreNotFoundError):
        open_store(pg_url, create=False)
    import sqlalchemy

    engine = sqlalchemy.create_engine(pg_url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.connect() as conn:
        assert sqlalchemy.inspect(conn).get_table_names() == []
    engine.dispose()


def test_same_semantics_on_both_backends(store_url):
    store = open_store(store_url)
    assert store.jobs() == []
    spec = store.register(_spec())
    assert store.register(_spec()) == spec  # a second process registering the same job
    with pytest.raises(StoreError, match="other settings"):
        store.register(_spec(eta=0.9))
    with pytest.raises(StoreError, match="no job 'other'"):
        store.append("other", Observation(16, 1.0, 2.0, 3.0, True))
    ids = [
        store.append("nightly", Observation(b, b * 1.0, 2.0, 3.0, b < 64, 100.0)) for b in (16, 64)
    ]
    assert ids[0] < ids[1]
    rows = store.observations("nightly")
    assert [o.batch_size for _, o in rows] == [16, 64]
    assert [o.reached for _, o in rows] == [True, False]
    assert store.observations("nightly", after=ids[0]) == rows[1:]
    store.set_power_limit("nightly", 32, 175.0)
    store.set_power_limit("nightly", 32, 150.0)
    assert store.power_limits("nightly") == {32: 150.0}
    store.delete("nightly")
    assert store.jobs() == [] and store.job("nightly") is None


@pytest.mark.parametrize("memory", [False, True])
def test_trials_are_numbered_per_job_on_every_backend(store_url, memory):
    from zeus_nb.optimizer.batch_size.store import MemoryStore

    store = MemoryStore() if memory else open_store(store_url)
    for name in ("a", "b"):
        store.register(_spec(name))
    assert [store.new_trial("a", 32), store.new_trial("a", 16), store.new_trial("b", 64)] == [
        1,
        2,
        1,
    ]
    assert store.end_trial("a", 1, "succeeded", observation=7)
    assert not store.end_trial("a", 1, "failed")  # ended already: unchanged
    assert store.end_trial("a", 2, "failed") and not store.end_trial("a", 9, "failed")
    got = [(t.trial_number, t.batch_size, t.status, t.observation) for t in store.trials("a")]
    assert got == [(1, 32, "succeeded", 7), (2, 16, "failed", None)]
    with pytest.raises(ValueError, match="succeeded"):
        store.end_trial("a", 3, "dispatched")
    store.delete("a")
    assert store.trials("b")[0].batch_size == 64 and "a" not in store.jobs()


def test_stores_from_before_the_trials_table_get_it(store_url):
    import sqlalchemy

    open_store(store_url).register(_spec())
    url = store_url.replace("postgresql://", "postgresql+psycopg://")
    engine = sqlalchemy.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sqlalchemy.text("DROP TABLE trials"))
    engine.dispose()
    store = open_store(store_url)  # an older store: the table comes back, the job stays
    assert store.job("nightly") is not None and store.new_trial("nightly", 32) == 1


def test_bandit_runs_on_postgresql_like_on_sqlite(tmp_path, pg_url):  # noqa: F811
    """The same reports give the same decisions whichever backend keeps them."""
    picks = {}
    for url in (f"sqlite:///{tmp_path / 's.sqlite3'}", pg_url):
        bso = BatchSizeOptimizer(_spec(), open_store(url))
        seq = []
        for _ in range(8):
            bs = bso.next_batch_size()
            seq.append(bs)
            bso.report(bs, time=500.0 / bs + bs / 10, energy=4e4 / bs + bs, reached=bs != 64)
        picks[url.split(":")[0]] = seq
    assert picks["sqlite"] == picks["postgresql"]


def test_newer_schema_is_refused_with_a_clear_error(pg_url):  # noqa: F811
    SQLStore(pg_url).close()
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE schema_version SET version = %s", (SCHEMA_VERSION + 1,))
    with pytest.raises(StoreSchemaError, match="newer zeus-nb") as e:
        open_store(pg_url)
    assert "upgrade" in str(e.value)


def test_foreign_tables_are_not_taken_over(pg_url):  # noqa: F811
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE jobs (id int)")
    with pytest.raises(StoreSchemaError, match="another application"):
        open_store(pg_url)


def test_unreachable_server_is_a_store_error():
    with pytest.raises(StoreError, match="cannot open"):
        SQLStore("postgresql://nobody@127.0.0.1:1/none", connect_timeout=2)


WRITER = """
import os, sys, time
from zeus_nb.optimizer.batch_size import BatchSizeOptimizer
from zeus_nb.optimizer.batch_size.store_url import open_store
url, me, n, go = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
job = "job-a" if me % 2 == 0 else "job-b"
while not os.path.exists(go):
    time.sleep(0.005)
bso = BatchSizeOptimizer(job, open_store(url), batch_sizes=[16, 32, 64, 128],
                         default_batch_size=64, max_power=300.0)
for i in range(n):
    bs = bso.next_batch_size()
    t = me * 1000 + i + 1  # each writer's own times; 100 W, a limit tagged by writer
    bso.report(bs, time=t, energy=100.0 * t, reached=True, power_limit=100 + me)
"""

READER = """
import json, os, sys, time
from zeus_nb.optimizer.batch_size.store_url import open_store
url, job, total, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
while not os.path.exists(go):
    time.sleep(0.005)
store = open_store(url)
seen, last, deadline = [], 0, time.monotonic() + 120
while len(seen) < total and time.monotonic() < deadline:
    rows = store.observations(job, after=last) if job in store.jobs() else []
    for i, _ in rows:
        seen.append(i)
        last = i
print(json.dumps(seen))
"""


def _py(code: str, *args: str) -> subprocess.Popen:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_concurrent_reports_are_never_lost_doubled_or_mixed_between_jobs(store_url, tmp_path):
    go = tmp_path / "go"
    writers, per_writer = 6, 20
    # One reader follows job-a incrementally the way a bandit does (ids after the last seen):
    # a report committed late with a smaller id would be skipped by it.
    reader = _py(READER, store_url, "job-a", str(writers // 2 * per_writer), str(go))
    procs = [_py(WRITER, store_url, str(me), str(per_writer), str(go)) for me in range(writers)]
    time.sleep(0.5)
    go.touch()
    for p in procs:
        _, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
    out, err = reader.communicate(timeout=180)
    assert reader.returncode == 0, err
    store = open_store(store_url)
    for job, mine in (("job-a", range(0, writers, 2)), ("job-b", range(1, writers, 2))):
        rows = store.observations(job)
        assert len(rows) == len(mine) * per_writer
        ids = [i for i, _ in rows]
        assert ids == sorted(set(ids))
        for me in mine:
            got = sorted(o.time for _, o in rows if o.power_limit == 100 + me)
            assert got == [me * 1000 + i + 1 for i in range(per_writer)]
        assert {o.power_limit for _, o in rows} == {100.0 + me for me in mine}  # no other job's
    assert json.loads(out) == [i for i, _ in store.observations("job-a")]


def test_a_report_commits_after_an_earlier_uncommitted_one_of_the_same_job(pg_url):  # noqa: F811
    """Ids of one job grow in commit order, so incremental readers skip nothing."""
    import threading

    store = SQLStore(pg_url)
    store.register(_spec("nightly"))
    store.register(_spec("other"))
    holding = threading.Event()
    first: list[int] = []

    def slow_append():  # another process, in the middle of its own report
        peer = SQLStore(pg_url)
        with peer.engine.begin() as conn:
            first.append(peer._append(conn, "nightly", Observation(16, 1.0, 1.0, 1.0, True)))
            holding.set()
            time.sleep(1.0)
        peer.close()

    t = threading.Thread(target=slow_append)
    t.start()
    assert holding.wait(30)
    start = time.monotonic()
    other = store.append("other", Observation(16, 1.0, 1.0, 1.0, True))  # another job: no wait
    assert time.monotonic() - start < 0.5
    second = store.append("nightly", Observation(32, 1.0, 1.0, 1.0, True))
    waited = time.monotonic() - start
    t.join()
    assert waited > 0.5  # it queued behind the uncommitted report
    assert second > first[0] and other != second
    # When the second report is visible, so is the first: a reader that saw `second` missed nothing.
    assert [i for i, _ in store.observations("nightly")] == [first[0], second]


def test_bso_show_reads_any_store_and_creates_none(tmp_path, pg_url, capsys):  # noqa: F811
    from zeus_nb.cli import main

    # Nothing there yet: an empty list, and still nothing there afterwards.
    assert main(["bso", "show", "--store", pg_url]) == 0
    assert "no jobs" in capsys.readouterr().out
    with pytest.raises(StoreNotFoundError):
        open_store(pg_url, create=False)
    missing = tmp_path / "none.sqlite3"
    assert main(["bso", "show", "--store", f"sqlite:///{missing}", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["jobs"] == []
    assert not missing.exists()
    assert main(["bso", "show", "nightly", "--store", f"sqlite:///{missing}"]) == 2
    assert not missing.exists()

    bso = BatchSizeOptimizer(_spec(), open_store(pg_url))
    bso.report(32, time=10.0, energy=1000.0, reached=True)
    bso.set_power_limit(32, 200.0)
    assert main(["bso", "show", "--store", pg_url]) == 0
    out = capsys.readouterr().out
    assert "1 job(s)" in out and "  nightly" in out and "postgres" in out
    assert main(["bso", "show", "nightly", "--store", pg_url, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["observations"] == 1 and shown["power_limits"] == {"32": 200.0}
    assert shown["next_batch_size"] == bso.next_batch_size()
    assert main(["bso", "show", "other", "--store", pg_url]) == 2
    assert "no job 'other'" in capsys.readouterr().err


def test_sqlite_files_carry_the_schema_version_too(tmp_path):
    import sqlite3

    old = tmp_path / "old.sqlite3"  # a file from before the version table: still readable
    with sqlite3.connect(old) as conn:
        conn.execute("CREATE TABLE jobs (name TEXT PRIMARY KEY, spec TEXT NOT NULL)")
        conn.execute("INSERT INTO jobs VALUES (?, ?)", ("nightly", _spec().to_json()))
    store = open_store(old)
    assert store.job("nightly") == _spec()
    store.close()
    with sqlite3.connect(old) as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
        conn.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    with pytest.raises(StoreSchemaError, match="newer zeus-nb"):
        open_store(f"sqlite:///{old}")
