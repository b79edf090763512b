"""The Dask execution layer with real scheduler and worker processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter

import pytest
from cluster_tasks import die_if_poisoned, lines, slow_square
from dask_fixture import dask_env, dask_processes  # noqa: F401 (a fixture)

from zeus_nb.runner.cluster import ClusterError, PinGPU, SlurmOptions, open_client, run_points

pytestmark = pytest.mark.slow


def test_killed_worker_point_reruns_elsewhere_and_each_result_arrives_once(
    dask_processes,  # noqa: F811
    tmp_path,
):
    log = tmp_path / "started.log"
    points = {f"p{x}": {"x": x, "seconds": 1.5, "log": str(log)} for x in range(6)}
    written: list[str] = []
    killed = threading.Event()

    def kill_when_both_busy():
        # Wait until both workers hold a point, then kill worker 0 mid-point.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len({ln.split()[1] for ln in lines(log)}) < 2:
            time.sleep(0.05)
        dask_processes.kill_worker(0)
        killed.set()

    killer = threading.Thread(target=kill_when_both_busy, daemon=True)
    with open_client(scheduler=dask_processes.address) as client:
        killer.start()
        out = run_points(
            points,
            slow_square,
            client,
            on_result=lambda key, r: written.append(key) or _check(points[key], r),
            progress=False,
        )
    killer.join(timeout=5)
    assert killed.is_set()
    assert sorted(written) == sorted(points)  # every point written, none twice
    assert out.failed == {}
    starts = Counter(ln.split()[0] for ln in lines(log))
    # Both workers began their first point together, so worker 0 died in the middle of one:
    # that point started twice (once on the dead worker), every other point once.
    assert sum(starts.values()) == 7
    (twice,) = [x for x, n in starts.items() if n == 2]
    pids = [ln.split()[1] for ln in lines(log) if ln.split()[0] == twice]
    assert pids[0] == str(dask_processes.workers[0].pid) and pids[1] != pids[0]


def _check(point, result):
    assert result["square"] == point["x"] ** 2


def test_point_that_kills_every_worker_fails_after_one_retry(tmp_path):
    log = tmp_path / "tries.log"
    points = {f"p{x}": {"x": x, "log": str(log), "poison": x == 1} for x in range(4)}
    written, failed = [], {}
    with open_client(workers=2) as client:
        out = run_points(
            points,
            die_if_poisoned,
            client,
            on_result=lambda k, r: written.append(k),
            on_failure=failed.__setitem__,
            progress=False,
        )
    assert sorted(written) == ["p0", "p2", "p3"]
    assert list(out.failed) == ["p1"] and list(failed) == ["p1"]
    assert "died" in failed["p1"]
    assert Counter(lines(log))["1"] == 2  # tried once more elsewhere, then given up


def test_a_raising_point_fails_alone(tmp_path):
    points = {"good": {"x": 3, "seconds": 0}, "bad": {"seconds": 0}}  # "bad" has no x
    written = {}
    with open_client(workers=1) as client:
        out = run_points(points, slow_square, client, on_result=written.__setitem__, progress=False)
    assert written == {"good": {"x": 3, "square": 9, "pid": written["good"]["pid"]}}
    assert list(out.failed) == ["bad"] and "KeyError" in out.failed["bad"]


INTERRUPTIBLE = """
import json, sys
from pathlib import Path
from cluster_tasks import slow_square
from zeus_nb.runner.cluster import open_client, run_points

results = Path(sys.argv[1])
lines = results.read_text().splitlines() if results.exists() else []
done = {json.loads(line)["key"] for line in lines}
log = str(results.with_name("started.log"))
points = {f"p{x}": {"x": x, "seconds": 1.0, "log": log} for x in range(6) if f"p{x}" not in done}

def write(key, result):
    with results.open("a") as f:
        f.write(json.dumps({"key": key, **result}) + "\\n")

with open_client(workers=2) as client:
    client.wait_for_workers(2)
    print("ready", flush=True)
    run_points(points, slow_square, client, on_result=write, progress=False,
               on_interrupt=sys.argv[2] if len(sys.argv) > 2 else "wait")
print("finished", flush=True)
"""


@pytest.mark.parametrize("mode", ["wait", "cancel"])
def test_ctrl_c_stops_and_the_next_run_resumes(tmp_path, mode):
    """Ctrl-C in a terminal (SIGINT to the whole process group, local workers included)."""
    results = tmp_path / "results.jsonl"
    env = dask_env()
    cmd = [sys.executable, "-c", textwrap.dedent(INTERRUPTIBLE), str(results), mode]
    p = subprocess.Popen(
        cmd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while len(lines(results)) < 2 and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(p.pid, signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode != 0, out + err
    assert "finished" not in out
    assert "KeyboardInterrupt" in err
    first = [json.loads(x)["key"] for x in lines(results)]
    started = {f"p{line.split()[0]}" for line in lines(tmp_path / "started.log")}
    assert len(first) >= 2 and set(first) <= started
    if mode == "wait":  # every point that had started finished and was written
        assert set(first) == started, err
    else:  # the points running at Ctrl-C were cancelled: started, never written
        assert len(first) < len(started), err
    rerun = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    assert rerun.returncode == 0, rerun.stderr
    keys = [json.loads(x)["key"] for x in lines(results)]
    assert sorted(keys) == [f"p{x}" for x in range(6)]  # each exactly once
    assert keys[: len(first)] == first


# Ctrl-C while the client is inside its own code and inside Dask's: SIGINT sent by the client to
# itself as the first result is half written, then again inside `Future.result` (a blocking Dask
# call) as the second is fetched.
CTRL_C_INSIDE = """
import json, os, signal, sys
from pathlib import Path
from distributed import Future
from cluster_tasks import slow_square
from zeus_nb.runner.cluster import open_client, run_points

results = Path(sys.argv[1])
log = str(results.with_name("started.log"))
points = {f"p{x}": {"x": x, "seconds": 1.0, "log": log} for x in range(6)}
fetched = []
plain_result = Future.result

def result(self, *args, **kwargs):
    fetched.append(self.key)
    if len(fetched) == 2:
        os.kill(os.getpid(), signal.SIGINT)
    return plain_result(self, *args, **kwargs)

Future.result = result

def write(key, result):
    line = json.dumps({"key": key, **result})
    with results.open("a") as f:
        f.write(line[:10])
        if len(fetched) == 1:
            os.kill(os.getpid(), signal.SIGINT)
        f.write(line[10:] + "\\n")

with open_client(workers=2) as client:
    client.wait_for_workers(2)
    try:
        run_points(points, slow_square, client, on_result=write, progress=False)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
"""


def test_ctrl_c_inside_a_result_write_or_a_dask_call_never_cuts_it(tmp_path):
    """A Ctrl-C is acted on between calls: the result being written is written whole, nothing
    more is submitted, the point being fetched is fetched and written, then the run stops with
    KeyboardInterrupt (the second Ctrl-C cancels what still runs: nothing here)."""
    results = tmp_path / "results.jsonl"
    cmd = [sys.executable, "-c", textwrap.dedent(CTRL_C_INSIDE), str(results)]
    run = subprocess.run(cmd, env=dask_env(), capture_output=True, text=True, timeout=180)
    assert run.returncode == 0 and "interrupted" in run.stdout, run.stdout + run.stderr
    written = [json.loads(line) for line in lines(results)]  # every line whole
    started = {f"p{line.split()[0]}" for line in lines(tmp_path / "started.log")}
    assert started == {"p0", "p1"}, started  # the two first submitted; none after the Ctrl-C
    assert {w["key"] for w in written} == started and len(written) == len(started)
    assert all(w["square"] == w["x"] ** 2 for w in written)


def test_slurm_job_script_asks_for_gpus_and_one_worker_per_gpu():
    opts = SlurmOptions(
        queue="gpu", account="lab42", walltime="02:30:00", gpus_per_job=4, memory="64GB"
    )
    from zeus_nb.runner.cluster import slurm_cluster

    with slurm_cluster(opts) as cluster:
        script = cluster.job_script()
    assert "#SBATCH -p gpu" in script
    assert "#SBATCH -A lab42" in script
    assert "#SBATCH -t 02:30:00" in script
    assert "#SBATCH --gres=gpu:4" in script
    assert "#SBATCH --mem=60G" in script  # dask-jobqueue writes memory in its own units
    assert "--nworkers 4" in script and "--nthreads 1" in script
    assert "--resources GPU=1" in script
    assert "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES=1" in script


def test_bad_gpu_count_and_targets_are_refused():
    with pytest.raises(ClusterError, match="gpus_per_job"):
        SlurmOptions(gpus_per_job=0).cluster_kwargs()
    with pytest.raises(ClusterError, match="exactly one"):  # noqa: SIM117
        with open_client(workers=2, scheduler="tcp://127.0.0.1:1"):
            pass
    with pytest.raises(ClusterError, match="unknown cluster"):  # noqa: SIM117
        with open_client(cluster="pbs-typo"):
            pass


class _Worker:
    def __init__(self, name):
        self.name = name


@pytest.mark.parametrize(
    ("name", "visible", "expected"),
    [(0, "3,5", "3"), (1, "3,5", "5"), ("job17-1", "0,1", "1"), ("w2", "0,1,2", "2")],
)
def test_each_worker_is_pinned_to_its_own_gpu(monkeypatch, name, visible, expected):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    PinGPU().setup(_Worker(name))
    assert os.environ["CUDA_VISIBLE_DEVICES"] == expected


def test_no_gpu_list_changes_nothing(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("ZEUS_NB_BACKEND", "sim")
    PinGPU().setup(_Worker(1))
    assert "CUDA_VISIBLE_DEVICES" not in os.environ
