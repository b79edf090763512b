"""A fake zeusd for the tests: its state, its HTTP answers, and two ways to reach it.

:class:`FakeZeusd` answers zeusd's endpoints from a small state (GPUs, CPUs, power limits,
persistence, locked clocks, a token and its scopes) and records every request. It is reached
either through ``httpx.MockTransport`` (:meth:`FakeZeusd.patch`, as Zeus's own tests do) or over a
real Unix socket (:func:`serve_unix`), so the client's own transport is exercised too.
"""

from __future__ import annotations

import contextlib
import json
import socketserver
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qsl, urlsplit

import httpx

from zeus_nb.utils.zeusd import ZeusdConfig


class FakeZeusd:
    def __init__(
        self,
        gpus=(0, 1),
        cpus=(0,),
        groups=("gpu-read", "gpu-control", "cpu-read"),
        token: str | None = None,
        scopes=("gpu-read", "gpu-control", "cpu-read"),
    ):
        self.gpus, self.cpus, self.groups = list(gpus), list(cpus), list(groups)
        self.token, self.scopes = token, list(scopes)
        self.limits = {i: 300_000 for i in self.gpus}
        self.persistence = {i: False for i in self.gpus}
        self.locked: dict[tuple[str, int], tuple[int, int] | None] = {}
        self.seen: list[tuple[str, str, dict[str, str], dict[str, str]]] = []
        self.clock_skew_s = 0.0  # the daemon's clock minus the real one
        self.stream_status = 200
        self.events: dict[str, list[dict]] = {"gpu": [], "cpu": []}
        self.stop = threading.Event()  # ends the event streams
        self.on_limit = None  # called (gpu, mW) after a limit is set: the GPU as NVML sees it

    # --- answers --------------------------------------------------------------------------------
    def answer(self, method: str, path: str, params: dict[str, str], headers: dict[str, str]):
        """(status, JSON body, or an iterator of SSE bytes) for one request."""
        self.seen.append((method, path, params, headers))
        if path == "/discover":
            return 200, {
                "gpus": [{"id": i, "name": f"Fake GPU {i}"} for i in self.gpus],
                "cpus": [{"id": i, "dram_available": True} for i in self.cpus],
                "enabled_api_groups": self.groups,
                "auth_required": self.token is not None,
            }
        if self.token is not None and headers.get("authorization") != f"Bearer {self.token}":
            return 401, {"error": "bad token"}
        if path == "/auth/whoami":
            return 200, {"sub": "tester", "scopes": self.scopes}
        if path == "/time":
            return 200, {"timestamp_ms": int((time.time() + self.clock_skew_s) * 1000)}
        ids = [int(i) for i in params["gpu_ids"].split(",")] if "gpu_ids" in params else self.gpus
        if path == "/gpu/get_power_limit":
            return 200, {str(i): {"power_limit_mw": self.limits[i]} for i in ids}
        if path == "/gpu/set_power_limit":
            for i in ids:
                self.limits[i] = int(params["power_limit_mw"])
                if self.on_limit is not None:
                    self.on_limit(i, self.limits[i])
            return 200, "OK"
        if path == "/gpu/get_persistence_mode":
            return 200, {str(i): {"enabled": self.persistence[i]} for i in ids}
        if path == "/gpu/set_persistence_mode":
            for i in ids:
                self.persistence[i] = params["enabled"] == "true"
            return 200, "OK"
        for what in ("gpu", "mem"):
            if path == f"/gpu/set_{what}_locked_clocks":
                for i in ids:
                    self.locked[what, i] = (
                        int(params["min_clock_mhz"]),
                        int(params["max_clock_mhz"]),
                    )
                return 200, "OK"
            if path == f"/gpu/reset_{what}_locked_clocks":
                for i in ids:
                    self.locked[what, i] = None
                return 200, "OK"
        if path == "/gpu/get_power":
            return 200, {"timestamp_ms": 1, "power_mw": {str(i): 100_000 + i for i in ids}}
        if path in ("/gpu/stream_power", "/cpu/stream_power"):
            if self.stream_status != 200:
                return self.stream_status, {"error": "refused"}
            return 200, self._stream(path.split("/")[1])
        return 404, {"error": f"no {path}"}

    def _stream(self, kind: str) -> Iterator[bytes]:
        for event in self.events[kind]:
            yield f"data: {json.dumps(event)}\n\n".encode()
        while not self.stop.wait(0.02):
            yield b": keep-alive\n\n"

    # --- ways in ----------------------------------------------------------------------------------
    def handler(self, request: httpx.Request) -> httpx.Response:
        status, body = self.answer(
            request.method,
            request.url.path,
            dict(request.url.params),
            {k.lower(): v for k, v in request.headers.items()},
        )
        if isinstance(body, str):
            return httpx.Response(status, text=body)
        if isinstance(body, dict):
            return httpx.Response(status, json=body)
        return httpx.Response(status, content=body, headers={"content-type": "text/event-stream"})

    def patch(self, monkeypatch) -> None:
        """Route every ZeusdConfig's client to this fake (no socket)."""

        def make_client(config):
            transport = httpx.MockTransport(self.handler)
            return httpx.Client(transport=transport, headers=config._auth_headers())

        monkeypatch.setattr(ZeusdConfig, "make_client", make_client)


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


@contextlib.contextmanager
def serve_unix(fake: FakeZeusd, path: str):
    """Serve ``fake`` over HTTP on the Unix socket ``path`` for the ``with`` block."""

    class Handler(BaseHTTPRequestHandler):
        def _reply(self):
            url = urlsplit(self.path)
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, body = fake.answer(self.command, url.path, dict(parse_qsl(url.query)), headers)
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _reply

        def address_string(self):
            return "unix"

        def log_message(self, *args):
            pass

    server = _UnixHTTPServer(path, Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
