"""Benchmark zeus-nb's batch-size optimizer server against Zeus 0.16's, side by side.

Both serve from uvicorn on 127.0.0.1, one process each, over the same kind of store (a fresh
SQLite file through aiosqlite), and get the same requests: Zeus's client sequence of one run,
``GET /jobs/batch_size`` then ``POST /report`` (a run that reaches its target at its first
epoch, so every cycle adds one run to the job's history).

* throughput: get+report requests per second with 1 and with 8 clients, each client on its
  own job (one job's requests take turns by design);
* latency: the p50 and p99 of one request at 10 and at 1000 runs of a job's history (two
  jobs, filled to 10 and to 1000 runs first; each timed cycle adds a run to its job).

The two servers run at once and take turns: throughput is the best of ``--rounds`` turns each,
and the timed latency cycles alternate between the servers and between the two jobs one by
one, so a change of the machine's load hits every latency figure alike.

Printed: each figure per server, and the ratios zeus-nb / Zeus (throughput: higher is better;
latency: lower is better) and 1000 / 10 runs per server (1.0: flat in the history). A request
a server answers 500 "database is locked" (Zeus's server, whose SQLite transactions race for
the file's lock, several clients at once) is sent again, its time counted; how many were is
printed. Both servers log warnings only (Zeus's settings spell the level WARN).

Zeus 0.16 is installed outside the venv (``pip install --no-deps --target /tmp/zeus016
zeus==0.16.0``); its server needs pydantic 1, which FastAPI after 0.12x no longer takes, so its
process runs with ``--zeus-deps`` (default /tmp/zeus016deps: ``pip install --no-deps --target
/tmp/zeus016deps python-dotenv fastapi==0.110.3 starlette==0.37.2 pydantic==1.10.21``) first on
its path. Zeus's server creates no tables itself; the launcher creates them (as Zeus's tests
do). If Zeus's server cannot run, the benchmark says exactly why and measures zeus-nb alone.

Figures depend on the machine and its load: compare the two servers of one run only.

    python benchmarks/bench_bso_server.py [--history 1000] [--cycles 200] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
SIZES = [32, 64, 128, 256, 512]

ZEUS_LAUNCHER = """
import asyncio, sys
import uvicorn
from sqlalchemy.ext.asyncio import create_async_engine
from zeus.optimizer.batch_size.server.database.schema import Base
from zeus.optimizer.batch_size.server.router import app

async def tables(url):
    engine = create_async_engine(url)
    async with engine.begin() as conn:
        await conn.run_sync(Base.metadata.create_all)
    await engine.dispose()

asyncio.run(tables(sys.argv[1]))
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One server process on 127.0.0.1, stopped on exit."""

    def __init__(self, name: str, cmd: list[str], env: dict[str, str], port: int) -> None:
        self.name, self.url = name, f"http://127.0.0.1:{port}"
        # its log goes to a file: a pipe nobody reads fills up and stalls the server
        self.log = tempfile.TemporaryFile("w+")  # noqa: SIM115 (closed by stop)
        self.proc = subprocess.Popen(cmd, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.log.seek(0)
                raise RuntimeError(f"{name} exited: {self.log.read()[-1500:]}")
            try:
                if httpx.get(self.url + "/openapi.json", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"{name} did not answer within 90 s")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def start_zeus_nb(folder: Path) -> Server:
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=str(REPO))
    db = f"sqlite:///{folder / 'zeus-nb.sqlite3'}"
    cmd = [sys.executable, "-m", "zeus_nb.cli", "bso", "serve", "--port", str(port)]
    cmd += ["--database-url", db, "--log-level", "warning"]
    return Server("zeus-nb", cmd, env, port)


def start_zeus(folder: Path, zeus: Path, deps: Path) -> Server:
    if not (zeus / "zeus" / "optimizer" / "batch_size" / "server").is_dir():
        raise RuntimeError(
            f"Zeus 0.16 is not at {zeus} (pip install --no-deps --target {zeus} zeus==0.16.0)"
        )
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(deps), str(zeus)]))
    env.pop("ZEUS_BSO_DATABASE_URL", None)
    url = f"sqlite+aiosqlite:///{folder / 'zeus.sqlite3'}"
    env["ZEUS_BSO_DATABASE_URL"] = url
    # Zeus's settings take WARN, not WARNING (any other name means INFO: a line per report
    # with the job's arm rewards, which would slow its server down)
    env["ZEUS_BSO_LOG_LEVEL"] = "WARN"
    cmd = [sys.executable, "-c", ZEUS_LAUNCHER, url, str(port)]
    return Server("Zeus 0.16", cmd, env, port)


def _job(job_id: str) -> dict:
    return dict(
        job_id=job_id,
        job_id_prefix=job_id.split("-")[0],
        batch_sizes=SIZES,
        default_batch_size=128,
        eta_knob=0.5,
        beta_knob=None,
        target_metric=0.5,
        higher_is_better_metric=True,
        max_epochs=100,
        num_pruning_rounds=2,
        window_size=0,
        mab_prior_mean=0.0,
        mab_prior_precision=0.0,
        mab_num_explorations=2,
        mab_seed=1,
        max_power=300.0,
        number_of_gpus=1,
        gpu_model="A40",
    )


def register(client: httpx.Client, job_id: str) -> None:
    answer = client.post("/jobs", json=_job(job_id))
    if answer.status_code not in (200, 201):
        raise RuntimeError(f"POST /jobs answered {answer.status_code}: {answer.text[:300]}")


#: Requests answered "database is locked" and sent again, per server URL.
RETRIES: dict[str, int] = {}
MAX_RETRIES = 20


def _send(client: httpx.Client, method: str, url: str, **kw) -> httpx.Response:
    """One request, sent again while the server answers 500 "database is locked".

    Zeus's server opens SQLite transactions deferred: two requests that both read and then
    write race for the file's lock, and SQLite answers the loser at once (no busy wait), a 500
    whose transaction was rolled back. Such a request is sent again (its time counts), and
    the retries are printed; any other failure ends the benchmark."""
    for _ in range(MAX_RETRIES):
        answer = client.request(method, url, **kw)
        if answer.status_code != 500 or "database is locked" not in answer.text:
            return answer
        key = str(client.base_url).rstrip("/")
        RETRIES[key] = RETRIES.get(key, 0) + 1
    return answer


def cycle(client: httpx.Client, job_id: str, times: list[float] | None = None) -> None:
    """One run: ask for a batch size, report it reached the target (both requests timed)."""
    t0 = time.perf_counter()
    answer = _send(client, "GET", "/jobs/batch_size", params={"job_id": job_id})
    t1 = time.perf_counter()
    if answer.status_code != 200:
        raise RuntimeError(f"GET answered {answer.status_code}: {answer.text[:300]}")
    trial = answer.json()
    seconds = 50.0 + trial["batch_size"] / 10
    result = dict(trial, time=seconds, energy=200.0 * seconds, metric=0.9, current_epoch=1)
    t2 = time.perf_counter()
    answer = _send(client, "POST", "/report", json=result)
    t3 = time.perf_counter()
    if answer.status_code != 200:
        raise RuntimeError(f"POST /report answered {answer.status_code}: {answer.text[:300]}")
    if times is not None:
        times += [t1 - t0, t3 - t2]


def throughput(server: Server, clients: int, cycles: int, tag: str) -> float:
    """get+report requests per second, ``clients`` threads on a job each."""
    jobs = [f"tp{tag}{clients}-{i}" for i in range(clients)]
    with httpx.Client(base_url=server.url, timeout=120) as c:
        for job in jobs:
            register(c, job)
    errors: list[BaseException] = []
    start = threading.Barrier(clients + 1)

    def work(job: str) -> None:
        with httpx.Client(base_url=server.url, timeout=120) as c:
            start.wait()
            try:
                for _ in range(cycles):
                    cycle(c, job)
            except BaseException as e:  # reported after the threads end
                errors.append(e)

    threads = [threading.Thread(target=work, args=(job,)) for job in jobs]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    if errors:
        raise RuntimeError(f"{server.name}: {errors[0]!r}")
    return 2 * cycles * clients / elapsed


def latency(servers: list[Server], history: int, samples: int) -> list[dict]:
    """Per server, {runs of history: (p50, p99) of one request in ms} at 10 and ``history``
    runs: two jobs, one with 10 runs and one with ``history``, whose timed cycles alternate
    one by one, and the servers' too, so a change of the machine's load meets every figure
    alike (measured one after the other, the load's drift read as growth with history)."""
    levels = (10, history)
    out: list[dict] = [{} for _ in servers]
    clients = [httpx.Client(base_url=s.url, timeout=120) for s in servers]
    try:
        for c in clients:
            for level in levels:
                register(c, f"lat-{level}")
                for _ in range(level):
                    cycle(c, f"lat-{level}")
        times = [{level: [] for level in levels} for _ in servers]
        for _ in range(samples // 2):
            for level in levels:
                for c, t in zip(clients, times, strict=True):
                    cycle(c, f"lat-{level}", t[level])
        for o, t in zip(out, times, strict=True):
            for level in levels:
                ms = [1e3 * x for x in t[level]]
                o[level] = (statistics.median(ms), statistics.quantiles(ms, n=100)[98])
    finally:
        for c in clients:
            c.close()
    return out


def measure(servers: list[Server], args) -> list[dict]:
    """Every figure of every server, the servers taking turns (best of ``--rounds``)."""
    results = [{"server": s.name} for s in servers]
    for server in servers:  # warm up: the first requests load modules and open connections
        with httpx.Client(base_url=server.url, timeout=120) as c:
            register(c, "warm-1")
            for _ in range(5):
                cycle(c, "warm-1")
    for clients in (1, 8):
        cycles = max(10, args.cycles // clients)
        for r in range(args.rounds):
            for server, result in zip(servers, results, strict=True):
                key = f"throughput_{clients}"
                rate = throughput(server, clients, cycles, f"r{r}x")
                result[key] = max(result.get(key, 0.0), rate)
    for result, lat in zip(results, latency(servers, args.history, args.samples), strict=True):
        result["latency"] = lat
    for server, result in zip(servers, results, strict=True):
        result["retries"] = RETRIES.get(server.url, 0)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--history", type=int, default=1000, help="runs of history (and 10)")
    parser.add_argument("--cycles", type=int, default=200, help="get+report cycles per level")
    parser.add_argument("--samples", type=int, default=100, help="requests timed per level")
    parser.add_argument("--rounds", type=int, default=2, help="throughput: best of N turns")
    parser.add_argument("--zeus", type=Path, default=Path("/tmp/zeus016"))
    parser.add_argument("--zeus-deps", type=Path, default=Path("/tmp/zeus016deps"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results, why_not = [], None
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        servers = [start_zeus_nb(folder)]
        try:
            try:
                servers.append(start_zeus(folder, args.zeus, args.zeus_deps))
            except RuntimeError as e:
                why_not = f"Zeus 0.16's server cannot run here: {e}"
            try:
                results = measure(servers, args)
            except RuntimeError as e:
                if len(servers) == 1 or "Zeus" not in str(e):
                    raise
                why_not = f"Zeus 0.16's server failed during the benchmark: {e}"
                results = measure(servers[:1], args)
        finally:
            for server in servers:
                server.stop()
    if args.json:
        print(json.dumps({"results": results, "zeus": why_not, "load": load}, indent=1))
        return 0
    print(f"1-minute load average at start: {load:.2f} ({os.cpu_count()} CPUs)")
    for r in results:
        lat = r["latency"]
        lo, hi = sorted(lat)
        print(
            f"{r['server']:>10}: {r['throughput_1']:7.1f} req/s (1 client), "
            f"{r['throughput_8']:7.1f} req/s (8 clients); p50/p99 "
            f"{lat[lo][0]:.1f}/{lat[lo][1]:.1f} ms at {lo} runs, "
            f"{lat[hi][0]:.1f}/{lat[hi][1]:.1f} ms at {hi} runs "
            f"(p50 {hi}/{lo} runs: {lat[hi][0] / lat[lo][0]:.2f}x)"
        )
        if r["retries"]:
            print(f"{'':>10}  {r['retries']} request(s) answered 'database is locked', sent again")
    if why_not:
        print(why_not)
    if len(results) == 2:
        ours, zeus = results
        lo, hi = sorted(ours["latency"])
        print("zeus-nb / Zeus 0.16:")
        for clients in (1, 8):
            key = f"throughput_{clients}"
            print(f"  throughput, {clients} client(s): {ours[key] / zeus[key]:.2f}x")
        for level in (lo, hi):
            ratio = ours["latency"][level][0] / zeus["latency"][level][0]
            print(f"  p50 latency at {level} runs: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
