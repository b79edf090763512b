"""The bandit's state outlives processes and survives concurrent recurrences."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from zeus_nb.optimizer.batch_size import BatchSizeOptimizer
from zeus_nb.optimizer.batch_size.sqlite_store import SQLiteStore
from zeus_nb.optimizer.batch_size.store import (
    STATE_DIR_ENV,
    JobSpec,
    Observation,
    StoreError,
    default_path,
)

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]


def _env(**extra) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    env.pop(STATE_DIR_ENV, None)
    env.update(extra)
    return env


def _python(code: str, *args: str, env=None, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        env=env or _env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def _run(code: str, *args: str, env=None) -> str:
    p = _python(code, *args, env=env)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    return out


STEP = """
import json, sys
from zeus_nb.optimizer.batch_size import BatchSizeOptimizer
path, n = sys.argv[1], int(sys.argv[2])
kw = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
bso = BatchSizeOptimizer("nightly", path, **kw)
seen = bso.num_observations
picked = []
for _ in range(n):
    bs = bso.next_batch_size()
    picked.append(bs)
    # cost falls with batch size; 512 never reaches the target
    bso.report(bs, time=1000.0 / bs, energy=1e5 / bs, reached=bs < 512)
print(json.dumps({"seen": seen, "picked": picked, "phase": bso.phase,
                  "next": bso.next_batch_size(), "survivors": bso.survivors}))
"""


def test_successive_processes_continue_the_same_bandit(tmp_path):
    db = str(tmp_path / "state.sqlite3")
    settings = json.dumps(
        {"batch_sizes": [32, 64, 128, 256, 512], "default_batch_size": 128, "max_power": 250.0}
    )
    first = json.loads(_run(STEP, db, "2", settings))
    assert first == {
        "seen": 0,
        "picked": [128, 64],
        "phase": "pruning",
        "next": 32,
        "survivors": [32, 64, 128, 256, 512],
    }
    # A later recurrence passes the job name only; the settings come from the file.
    second = json.loads(_run(STEP, db, "3"))
    assert second["seen"] == 2
    assert second["picked"] == [32, 256, 512]  # down finished, then up until 512 fails
    assert second["next"] == 256  # round 2 re-centred on the cheapest survivor
    assert second["survivors"] == [32, 64, 128, 256]
    third = json.loads(_run(STEP, db, "4"))
    assert third["seen"] == 5
    assert third["picked"] == [256, 128, 64, 32]
    assert third["phase"] == "thompson"
    # This process sees everything the others wrote and agrees on the next choice.
    bso = BatchSizeOptimizer("nightly", db)
    assert bso.num_observations == 9
    assert bso.next_batch_size() == third["next"]


def test_default_location_follows_the_state_dir_variable(tmp_path, monkeypatch):
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    assert default_path() == tmp_path / "state" / "bso.sqlite3"
    code = """
    from zeus_nb.optimizer.batch_size import BatchSizeOptimizer
    bso = BatchSizeOptimizer("j", batch_sizes=[8, 16], default_batch_size=8, max_power=100.0)
    bso.report(8, time=1.0, energy=100.0, reached=True)
    print(bso.store.path)
    """
    out = _run(code, env=_env(**{STATE_DIR_ENV: str(tmp_path / "state")}))
    assert out.strip() == str(tmp_path / "state" / "bso.sqlite3")
    with SQLiteStore() as store:
        assert store.jobs() == ["j"]
        assert len(store.observations("j")) == 1


WRITER = """
import sys, time, os
from zeus_nb.optimizer.batch_size import BatchSizeOptimizer
path, me, n, go = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
while not os.path.exists(go):
    time.sleep(0.005)
bso = BatchSizeOptimizer("shared", path, batch_sizes=[16, 32, 64, 128], default_batch_size=64,
                         max_power=300.0)
for i in range(n):
    bs = bso.next_batch_size()
    t = me * 1000 + i + 1  # each writer's own times; 100 W, a limit tagged by writer
    bso.report(bs, time=t, energy=100.0 * t, reached=True, power_limit=100 + me)
"""


def test_concurrent_recurrences_lose_no_update(tmp_path):
    db = tmp_path / "shared.sqlite3"
    go = tmp_path / "go"
    writers, per_writer = 6, 25
    procs = [_python(WRITER, str(db), str(me), str(per_writer), str(go)) for me in range(writers)]
    time.sleep(0.3)  # let them start and wait at the barrier, then release all at once
    go.touch()
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    store = SQLiteStore(db)
    rows = store.observations("shared")
    assert len(rows) == writers * per_writer
    ids = [i for i, _ in rows]
    assert ids == sorted(set(ids))
    for me in range(writers):
        mine = sorted(o.time for _, o in rows if o.power_limit == 100 + me)
        assert mine == [me * 1000 + i + 1 for i in range(per_writer)]
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    # The bandit built from the shared log went through pruning despite the interleaving.
    bso = BatchSizeOptimizer("shared", db)
    assert bso.phase == "thompson"
    assert bso.num_observations == writers * per_writer


def test_sqlite_store_api(tmp_path):
    with SQLiteStore(tmp_path / "s.sqlite3") as store:
        spec = JobSpec("a", (8, 16), 8, max_power=100.0)
        assert store.register(spec) == spec
        assert store.register(spec) == spec
        with pytest.raises(StoreError, match="other settings"):
            store.register(JobSpec("a", (8, 16), 16, max_power=100.0))
        with pytest.raises(StoreError, match="no job"):
            store.append("b", Observation(8, 1.0, 1.0, 1.0, True))
        i = store.append("a", Observation(8, 1.0, 2.0, 3.0, True, 150.0))
        j = store.append("a", Observation(16, 1.0, 2.0, 3.0, False))
        assert [k for k, _ in store.observations("a")] == [i, j]
        assert store.observations("a", after=i) == [(j, Observation(16, 1.0, 2.0, 3.0, False))]
        store.set_power_limit("a", 8, 150)
        store.set_power_limit("a", 8, 175)
        assert store.power_limits("a") == {8: 175.0}
        store.delete("a")
        assert store.jobs() == []
        assert store.job("a") is None


def test_unwritable_location_says_what_to_do(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(StoreError, match="ZEUS_NB_STATE_DIR"):
        SQLiteStore(blocker / "sub" / "bso.sqlite3")


def test_opening_waits_while_another_process_sets_up_the_file(tmp_path, monkeypatch):
    """SQLite refuses a concurrent journal-mode switch at once ("database is locked"), with no
    busy timeout; the store must wait and retry instead of failing the recurrence."""
    real_connect = sqlite3.connect
    refusals = []

    class Busy:
        def __init__(self, conn):
            self._conn = conn

        def execute(self, sql, *args):
            if sql.startswith("PRAGMA journal_mode") and len(refusals) < 3:
                refusals.append(sql)
                raise sqlite3.OperationalError("database is locked")
            return self._conn.execute(sql, *args)

        def __getattr__(self, name):
            return getattr(self._conn, name)

    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: Busy(real_connect(*a, **k)))
    store = SQLiteStore(tmp_path / "s.sqlite3")
    assert len(refusals) == 3
    assert store.jobs() == []
    store.close()

    refusals.clear()
    with pytest.raises(StoreError, match="database is locked"):
        SQLiteStore(tmp_path / "t.sqlite3", timeout=0.0)
