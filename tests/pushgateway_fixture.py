"""A throw-away Prometheus Pushgateway (Debian's ``prometheus-pushgateway``) for tests.

It listens on 127.0.0.1 on a free port, keeps metrics in memory only (no persistence file), is
ready within ``START_TIMEOUT`` seconds or the test errors, and is terminated (then killed) when
done. :func:`series` reads what was pushed back through the gateway's ``/metrics`` page.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

BINARY = Path(os.environ.get("ZEUS_NB_PUSHGATEWAY_BIN", "/usr/bin/prometheus-pushgateway"))
START_TIMEOUT = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Pushgateway:
    """One gateway process; ``url`` is its base URL."""

    def __init__(self):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (the server writes to it)

    def start(self) -> Pushgateway:
        self.proc = subprocess.Popen(
            [str(BINARY), f"--web.listen-address=127.0.0.1:{self.port}", "--persistence.file=",
             "--log.level=warn"],
            stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the Pushgateway exited at start:\n{self.log()}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the Pushgateway was not ready in {START_TIMEOUT} s")
            time.sleep(0.1)

    def log(self) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-4000:]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self._log.close()

    def __enter__(self) -> Pushgateway:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def skip_reason() -> str | None:
    if not BINARY.exists():
        return f"no Prometheus Pushgateway at {BINARY} (apt-get install prometheus-pushgateway)"
    return None


def running():
    """Body of a test module's gateway fixture: skip without the binary, else start and stop."""
    why = skip_reason()
    if why:
        pytest.skip(why)
    with Pushgateway() as gateway:
        yield gateway


def series(url: str, job: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """``{(sample name, sorted labels without job/instance): value}`` of ``job`` on the gateway."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.labels.get("job") != job:
                continue
            labels = tuple(
                sorted((k, v) for k, v in s.labels.items() if k not in ("job", "instance"))
            )
            out[(s.name, labels)] = s.value
    return out
