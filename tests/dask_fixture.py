"""A real Dask scheduler and workers as subprocesses on 127.0.0.1, for tests and benchmarks.

Workers are started the way docs/cluster.md tells users to (``dask worker ADDRESS --nthreads 1
--resources GPU=1``), each in its own process group so a test can kill one outright. The
scheduler re-runs a point whose worker died once (allowed-failures 1), as zeus-nb's own
clusters do. Everything is stopped at the end, with a time bound.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pg_fixture import free_port

REPO = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
DASK = Path(sys.executable).with_name("dask")
START_TIMEOUT = 90.0


def dask_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO), str(TESTS), env.get("PYTHONPATH", "")) if p
    )
    env["DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES"] = "1"
    env["ZEUS_NB_BACKEND"] = "sim"
    env.update(extra)
    return env


class DaskProcesses:
    """``dask scheduler`` plus ``n`` ``dask worker`` processes; ``address`` to connect to."""

    def __init__(self, workers: int = 2, log_dir: Path | None = None, **env: str):
        self.port = free_port()
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.n = workers
        self.env = dask_env(**env)
        self.log_dir = log_dir
        self.scheduler: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen] = []

    def _spawn(self, args: list[str], name: str) -> subprocess.Popen:
        out = open(self.log_dir / f"{name}.log", "wb") if self.log_dir else subprocess.DEVNULL  # noqa: SIM115
        p = subprocess.Popen(
            [str(DASK), *args],
            env=self.env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=str(REPO),
        )
        if out is not subprocess.DEVNULL:
            out.close()
        return p

    def start(self) -> DaskProcesses:
        self.scheduler = self._spawn(
            ["scheduler", "--host", "127.0.0.1", "--port", str(self.port), "--no-dashboard"],
            "scheduler",
        )
        for i in range(self.n):
            self.add_worker(i)
        self.wait_for_workers(self.n)
        return self

    def add_worker(self, i: int) -> subprocess.Popen:
        p = self._spawn(
            ["worker", self.address, "--nthreads", "1", "--resources", "GPU=1", "--name",
             f"w{i}", "--no-dashboard", "--no-nanny", "--death-timeout", "60"],
            f"worker{i}",
        )  # fmt: skip
        self.workers.append(p)
        return p

    def wait_for_workers(self, n: int) -> None:
        from distributed import Client

        with Client(self.address, timeout=f"{START_TIMEOUT}s") as c:
            c.wait_for_workers(n, timeout=START_TIMEOUT)

    def kill_worker(self, i: int) -> None:
        """SIGKILL a worker's whole process group: it dies without saying goodbye."""
        p = self.workers[i]
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=10)

    def stop(self) -> None:
        for p in [*self.workers, self.scheduler]:
            if p is not None and p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for p in [*self.workers, self.scheduler]:
            if p is None:
                continue
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)

    def __enter__(self) -> DaskProcesses:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()


@pytest.fixture
def dask_processes(tmp_path):
    """A fresh scheduler and two workers per test (tests kill workers)."""
    with DaskProcesses(2, log_dir=tmp_path) as d:
        yield d
