"""Zeus's zeusd client, power streaming and the zeusd-backed GPU, against a fake daemon.

The fake (tests/zeusd_fake.py) is reached over a real Unix socket where the client's own
transport matters, else through httpx's mock transport as Zeus's tests do. Nothing leaves the
machine.
"""

from __future__ import annotations

import logging
import time

import httpx
import pytest
from zeusd_fake import FakeZeusd, serve_unix

from zeus_nb import device
from zeus_nb.device.exception import ZeusdError
from zeus_nb.device.gpu.backend import BackendGPU
from zeus_nb.device.gpu.zeusd import ZeusdSettersMixin
from zeus_nb.monitor.power_streaming import CpuPowerReading, PowerStreamingClient
from zeus_nb.utils.zeusd import (
    ZeusdAuthError,
    ZeusdCapabilityError,
    ZeusdClient,
    ZeusdConfig,
    ZeusdConnectionError,
    require_capabilities,
)


@pytest.fixture
def short_socket(tmp_path_factory):
    """A Unix socket path short enough for AF_UNIX (about 100 bytes)."""
    import tempfile
    from pathlib import Path

    folder = Path(tempfile.mkdtemp(prefix="zd", dir="/tmp"))
    yield str(folder / "s")
    for p in folder.iterdir():
        p.unlink()
    folder.rmdir()


# --- the client -------------------------------------------------------------------------------
def test_client_over_a_real_unix_socket_with_a_token(short_socket):
    fake = FakeZeusd(token="secret")
    with serve_unix(fake, short_socket):
        config = ZeusdConfig.uds(short_socket, token="secret")
        with ZeusdClient(config) as client:
            assert client.gpu_ids == [0, 1] and client.auth_error is None
            assert client.can_control_gpu and client.granted_scopes == {
                "gpu-read",
                "gpu-control",
                "cpu-read",
            }
            client.set_power_limit([1], 250_000, block=False)
            assert client.get_power_limit() == {0: 300_000, 1: 250_000}
            assert client.get_gpu_power([1]).power_mw == {1: 100_001}
    method, path, params, headers = fake.seen[-2]
    assert (method, path) == ("GET", "/gpu/get_power_limit") and params == {}
    assert headers["authorization"] == "Bearer secret"
    assert fake.limits[1] == 250_000


def test_a_wrong_token_is_kept_as_the_auth_error_and_raised_on_request(short_socket):
    fake = FakeZeusd(token="secret")
    with serve_unix(fake, short_socket):
        client = ZeusdClient(ZeusdConfig.uds(short_socket, token="wrong"))
        client.close()
    assert "Token rejected" in client.auth_error and "\n" not in client.auth_error
    assert not (client.can_read_gpu or client.can_control_gpu or client.can_read_cpu)
    with pytest.raises(ZeusdAuthError, match="Token rejected"):
        require_capabilities(client, read_gpu=True)


def test_what_is_not_zeusd_is_a_one_line_connection_error(monkeypatch):
    def not_zeusd(request):
        return httpx.Response(200, text="<html>a web server</html>")

    def make_client(config):
        return httpx.Client(transport=httpx.MockTransport(not_zeusd))

    monkeypatch.setattr(ZeusdConfig, "make_client", make_client)
    with pytest.raises(ZeusdConnectionError, match="not zeusd") as info:
        ZeusdClient(ZeusdConfig.tcp("somewhere", 4938))
    assert "\n" not in str(info.value)


def test_a_daemon_gone_mid_run_is_a_zeusd_error_naming_the_call(monkeypatch):
    fake = FakeZeusd()
    fake.patch(monkeypatch)
    client = ZeusdClient(ZeusdConfig.tcp("node", 4938))

    def gone(request):
        raise httpx.ConnectError("connection refused")

    client._client = httpx.Client(transport=httpx.MockTransport(gone))
    with pytest.raises(ZeusdError, match="Failed to set_power_limit: zeusd at node:4938 cannot"):
        client.set_power_limit([0], 200_000)


def test_require_capabilities_lists_every_missing_piece(monkeypatch):
    FakeZeusd(gpus=(0,), cpus=(), groups=("gpu-read",)).patch(monkeypatch)
    client = ZeusdClient(ZeusdConfig.tcp("node", 4938))
    require_capabilities(client, read_gpu=True, gpu_ids=[0])
    with pytest.raises(ZeusdCapabilityError) as info:
        require_capabilities(client, control_gpu=True, read_cpu=True, gpu_ids=[0, 3], cpu_ids=[0])
    message = str(info.value)
    for part in ("'gpu-control' is not enabled", "'cpu-read' is not enabled", "[3]", "CPU"):
        assert part in message
    assert message.startswith("Zeusd at node:4938: ")


# --- power streaming --------------------------------------------------------------------------
def _wait_for(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_streams_gpu_and_cpu_power_on_this_machines_clock(monkeypatch):
    fake = FakeZeusd(gpus=(0, 1), cpus=(0,))
    fake.clock_skew_s = -100.0  # the daemon's clock is 100 s behind
    daemon_ms = int((time.time() - 100.0) * 1000)
    fake.events["gpu"] = [{"timestamp_ms": daemon_ms, "gpu_id": 1, "power_mw": 250_000}]
    fake.events["cpu"] = [
        {"timestamp_ms": daemon_ms, "cpu_id": 0, "cpu_mw": 80_000, "dram_mw": None}
    ]
    fake.patch(monkeypatch)
    started = time.monotonic()
    with PowerStreamingClient([ZeusdConfig.tcp("node", 4938, gpu_indices=[1])]) as client:
        _wait_for(
            lambda: (
                client.get_power().get("node:4938", None) is not None
                and client.get_power()["node:4938"].cpu_power_w
            )
        )
        _wait_for(lambda: client.get_power()["node:4938"].gpu_power_w)
        readings = client.get_power()["node:4938"]
        assert readings.gpu_power_w == {1: 250.0}
        assert readings.cpu_power_w == {0: CpuPowerReading(80.0, None)}
        assert readings.timestamp_s == pytest.approx(time.time(), abs=2.0)
        fake.stop.set()
    assert time.monotonic() - started < 10
    streamed = [(p, q) for _, p, q, _ in fake.seen if p.endswith("stream_power")]
    assert ("/gpu/stream_power", {"gpu_ids": "1"}) in streamed
    assert ("/cpu/stream_power", {}) in streamed


def test_stop_ends_a_quiet_stream_promptly(monkeypatch):
    fake = FakeZeusd()
    fake.patch(monkeypatch)
    client = PowerStreamingClient([ZeusdConfig.tcp("node", 4938)])
    _wait_for(lambda: sum(p.endswith("stream_power") for _, p, _, _ in fake.seen) == 2)
    started = time.monotonic()
    fake.stop.set()
    client.stop()
    assert time.monotonic() - started < 5 and client._threads == []


def test_what_cannot_be_streamed_is_refused_before_any_thread_starts(monkeypatch):
    FakeZeusd(gpus=(0,), groups=("cpu-read",)).patch(monkeypatch)
    with pytest.raises(ValueError, match=r"GPU indices \[4\] requested for node:4938"):
        PowerStreamingClient([ZeusdConfig.tcp("node", 4938, gpu_indices=[0, 4])])
    with pytest.raises(ZeusdCapabilityError, match="lacks required scope 'gpu-read'"):
        PowerStreamingClient([ZeusdConfig.tcp("node", 4938, gpu_indices=[0])])
    with pytest.raises(ValueError, match="Duplicate server endpoints"):
        PowerStreamingClient([ZeusdConfig.tcp("node", 4938)] * 2)


def test_a_refused_stream_is_logged_and_not_retried(monkeypatch, caplog):
    fake = FakeZeusd(cpus=())
    fake.stream_status = 403
    fake.patch(monkeypatch)
    with caplog.at_level(logging.ERROR, "zeus_nb.monitor.power_streaming"):
        client = PowerStreamingClient([ZeusdConfig.tcp("node", 4938)], reconnect_delay_s=0.01)
        _wait_for(lambda: not client._threads[0].is_alive())
    client.stop()
    assert sum(p == "/gpu/stream_power" for _, p, _, _ in fake.seen) == 1
    assert "HTTP 403" in caplog.text and "not retrying" in caplog.text


def test_a_malformed_event_is_skipped():
    client = PowerStreamingClient([])
    client._process_gpu_event('data: {"gpu_id": 0}\n\ndata: not json', "n")
    client._process_gpu_event('data: {"timestamp_ms": 5000, "gpu_id": 0, "power_mw": 1}', "n")
    assert client.get_power()["n"].gpu_power_w == {0: 0.001}
    client.stop()


def test_a_reading_that_arrives_while_the_consumer_is_busy_is_not_lost():
    """An iterator yields what changed since it last looked, not only what woke it: a reading
    stored while the consumer handled the previous one (no one waiting, so its wake-up went
    to no one), then stop(), still comes out before the iteration ends."""
    import threading

    client = PowerStreamingClient([])
    got = []

    def feeder():
        time.sleep(0.2)  # the iterator is waiting by then
        client._process_gpu_event('data: {"timestamp_ms": 1000, "gpu_id": 0, "power_mw": 1}', "n")
        time.sleep(0.3)  # the consumer is busy with the first reading meanwhile
        client._process_gpu_event('data: {"timestamp_ms": 2000, "gpu_id": 0, "power_mw": 2}', "n")
        client._stop_event.set()  # as stop() does, before the consumer waits again

    t = threading.Thread(target=feeder, daemon=True)
    started = time.monotonic()
    t.start()
    for readings in client:
        got.append(readings["n"].gpu_power_w[0])
        time.sleep(0.6)
    t.join(5)
    assert got == [0.001, 0.002]
    assert time.monotonic() - started < 5
    client.stop()


# --- the zeusd-backed GPU ---------------------------------------------------------------------
class SimZeusdGPU(ZeusdSettersMixin, BackendGPU):
    """The mixin over the simulated GPU: reads from the simulation, settings through zeusd."""


def test_settings_go_through_the_daemon_and_come_back(monkeypatch):
    fake = FakeZeusd(gpus=(0,))
    fake.patch(monkeypatch)
    device.use_simulated(num_gpus=1)
    gpu = SimZeusdGPU(0, ZeusdClient(ZeusdConfig.tcp("node", 4938)))
    assert gpu.supports_nonblocking_setters and gpu.get_name()  # read from the simulation
    gpu.set_power_management_limit(200_000, block=False)
    gpu.set_persistence_mode(True)
    gpu.set_gpu_locked_clocks(900, 1200)
    gpu.set_memory_locked_clocks(800, 800)
    gpu.reset_memory_locked_clocks()
    assert fake.limits[0] == 200_000 and gpu.get_persistence_mode()
    assert fake.locked == {("gpu", 0): (900, 1200), ("mem", 0): None}
    assert ("POST", "/gpu/set_power_limit") in [(m, p) for m, p, _, _ in fake.seen]
    gpu.restore_zeusd_settings()  # what exit does
    assert fake.limits[0] == 300_000 and fake.persistence[0] is False
    assert fake.locked[("gpu", 0)] is None


def test_a_token_without_control_fails_the_constructor(monkeypatch):
    FakeZeusd(gpus=(0,), token="t", scopes=("gpu-read",)).patch(monkeypatch)
    device.use_simulated(num_gpus=1)
    client = ZeusdClient(ZeusdConfig.tcp("node", 4938, token="t"))
    with pytest.raises(ZeusdCapabilityError, match="lacks required scope 'gpu-control'"):
        SimZeusdGPU(0, client)


# --- show_env -----------------------------------------------------------------------------------
def test_show_env_reports_the_configured_daemon(monkeypatch, capsys):
    from zeus_nb.show_env import _zeusd

    monkeypatch.delenv("ZEUSD_SOCK_PATH", raising=False)
    monkeypatch.delenv("ZEUSD_HOST_PORT", raising=False)
    assert _zeusd() == ["  Not configured (ZEUSD_SOCK_PATH or ZEUSD_HOST_PORT is not set)."]
    FakeZeusd(gpus=(3,)).patch(monkeypatch)
    monkeypatch.setenv("ZEUSD_HOST_PORT", "node:4938")
    lines = "\n".join(_zeusd())
    assert (
        "node:4938" in lines and "(3, 'Fake GPU 3')" in lines and "can_control_gpu: True" in lines
    )


def test_zeus_nvidia_gpu_wiring_reads_nvml_and_sets_through_the_daemon(fake_nvml, monkeypatch):
    """zeus_nb.device.gpu.nvidia's ZeusdNVIDIAGPU: reads through NVML, sets through zeusd."""
    from zeus_nb.device.gpu.nvidia import NVIDIAGPU, ZeusdNVIDIAGPU

    assert ZeusdNVIDIAGPU.__mro__[1:3] == (ZeusdSettersMixin, NVIDIAGPU)

    fake = FakeZeusd(gpus=(0, 1))
    fake.on_limit = lambda i, mw: fake_nvml.set_device(i, limit_mw=mw)  # the daemon's NVML
    fake.patch(monkeypatch)
    gpu = ZeusdNVIDIAGPU(1, ZeusdClient(ZeusdConfig.tcp("node", 4938)))
    assert gpu.get_power_management_limit_constraints() == (100_000, 300_000)  # from NVML
    gpu.set_power_management_limit(150_000)
    assert fake.limits == {0: 300_000, 1: 150_000}
    assert gpu.get_power_management_limit() == 150_000  # read back through NVML
    gpu.reset_power_management_limit()  # to NVML's default, through the daemon
    assert fake_nvml.limits_w() == [300.0, 300.0]
    assert fake_nvml.state["set_calls"] == []  # this process never set a limit itself
    gpu.restore_zeusd_settings()  # nothing left for exit
    assert fake.limits[1] == 300_000
