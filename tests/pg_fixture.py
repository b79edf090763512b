"""A throw-away PostgreSQL 15 server for tests and benchmarks.

Debian's server binaries (``/usr/lib/postgresql/15/bin``) refuse to run as root, so as root the
server runs as the ``postgres`` user (``runuser``) in a temporary data directory that user owns.
It listens on 127.0.0.1 on a free port with trust authentication, and is stopped (fast
shutdown, then SIGKILL) when done. Use the ``pg_server`` session fixture and the per-test
``pg_url`` (a fresh database each time); import both into a test module.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest

PG_BIN = Path(os.environ.get("ZEUS_NB_PG_BIN", "/usr/lib/postgresql/15/bin"))
START_TIMEOUT = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    """initdb + postgres in a temporary directory; ``url`` is for the ``postgres`` database."""

    def __init__(self, fsync: bool = False):
        self.fsync = fsync
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="zeus-nb-pg-"))
        self.data = self.dir / "data"
        self.proc: subprocess.Popen | None = None
        self._as: list[str] = []
        self._user = None
        if os.geteuid() == 0:
            self._user = pwd.getpwnam("postgres")
            self._as = ["runuser", "-u", "postgres", "--"]
            os.chown(self.dir, self._user.pw_uid, self._user.pw_gid)
        os.chmod(self.dir, 0o700)

    @staticmethod
    def available() -> str | None:
        """Why the server cannot start here, or None."""
        for tool in ("initdb", "postgres", "pg_ctl"):
            if not (PG_BIN / tool).exists():
                return f"no PostgreSQL server binaries at {PG_BIN} (apt-get install postgresql-15)"
        if os.geteuid() == 0:
            try:
                pwd.getpwnam("postgres")
            except KeyError:
                return "running as root and there is no 'postgres' user to run the server as"
            if shutil.which("runuser") is None:
                return "running as root without runuser to switch to the 'postgres' user"
        return None

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> PostgresServer:
        subprocess.run(
            [*self._as, str(PG_BIN / "initdb"), "-D", str(self.data), "-U", "postgres",
             "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions"],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        log = open(self.dir / "server.log", "wb")  # noqa: SIM115 (kept open for the server)
        if self._user is not None:
            os.chown(self.dir / "server.log", self._user.pw_uid, self._user.pw_gid)
        self.proc = subprocess.Popen(
            [*self._as, str(PG_BIN / "postgres"), "-D", str(self.data), "-h", "127.0.0.1",
             "-p", str(self.port), "-k", str(self.dir), "-c", "max_connections=200",
             "-c", f"fsync={'on' if self.fsync else 'off'}"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        log.close()
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        import psycopg

        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited at start:\n{self.log()}")
            try:
                psycopg.connect(self.url(), connect_timeout=2).close()
                return
            except psycopg.OperationalError as e:
                if time.monotonic() > deadline:
                    self.stop()
                    msg = f"postgres not ready in {START_TIMEOUT} s:\n{self.log()}"
                    raise RuntimeError(msg) from e
                time.sleep(0.2)

    def log(self) -> str:
        p = self.dir / "server.log"
        return p.read_text(errors="replace")[-4000:] if p.exists() else ""

    def create_database(self, name: str | None = None) -> str:
        import psycopg

        name = name or f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            subprocess.run(
                [*self._as, str(PG_BIN / "pg_ctl"), "-D", str(self.data), "stop", "-m", "fast",
                 "-t", "20"],
                capture_output=True, timeout=40,
            )  # fmt: skip
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


@pytest.fixture(scope="session")
def pg_server():
    why = PostgresServer.available()
    if why:
        pytest.skip(why)
    with PostgresServer() as server:
        yield server


@pytest.fixture
def pg_url(pg_server) -> str:
    """A fresh, empty database on the session's server."""
    return pg_server.create_database()
