"""Carbon and cost monitors, offline providers, and the HTTP providers against a local server."""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

import zeus_nb
from zeus_nb import device
from zeus_nb.errors import IntensityProviderError, TraceFormatError
from zeus_nb.monitor.carbon import (
    CarbonEmissionMonitor,
    ElectricityMapsClient,
    ElectrictyMapsClient,
    ZeusCarbonIntensityHTTPError,
    ZeusCarbonIntensityNotFoundError,
)
from zeus_nb.monitor.price import EnergyCostMonitor, OpenEIClient
from zeus_nb.monitor.providers import J_PER_KWH, CsvIntensity, FixedIntensity


def test_monitor_exports_zeus_names():
    from zeus_nb.monitor import CarbonEmissionMonitor as C
    from zeus_nb.monitor import EnergyCostMonitor as E

    assert C is CarbonEmissionMonitor and E is EnergyCostMonitor
    assert ElectrictyMapsClient is ElectricityMapsClient


def test_fixed_intensity_converts_every_part():
    device.use_simulated(workload="cifar100", dram_gb=16)
    mon = CarbonEmissionMonitor(FixedIntensity(400.0), gpu_indices=[0])
    mon.begin_window("train")
    zeus_nb.step(20)
    m = mon.end_window("train")
    assert m.gpu_energy[0] > 0
    assert m.gpu_carbon_emission == {0: pytest.approx(m.gpu_energy[0] / J_PER_KWH * 400.0)}
    assert m.cpu_carbon_emission == {0: pytest.approx(m.cpu_energy[0] / 3.6e6 * 400.0)}
    assert m.dram_carbon_emission == {0: pytest.approx(m.dram_energy[0] / 3.6e6 * 400.0)}
    total_j = m.gpu_energy[0] + m.cpu_energy[0] + m.dram_energy[0]
    assert m.total_carbon_emission == pytest.approx(total_j / 3.6e6 * 400.0)
    with pytest.raises(ValueError, match="was never begun"):
        mon.end_window("nope")


def test_csv_intensity_is_a_time_weighted_step_function(tmp_path):
    path = tmp_path / "price.csv"
    path.write_text("time,usd_per_kwh\n1000,0.10\n1970-01-01T00:16:50Z,0.30\n")  # 1010 s
    p = CsvIntensity(path)
    assert [p.value_at(t) for t in (0, 1000, 1009.9, 1010, 5000)] == [0.1, 0.1, 0.1, 0.3, 0.3]
    assert p.mean(1005, 1015) == pytest.approx(0.2)  # half at 0.10, half at 0.30
    assert p.mean(1000, 1000) == 0.1


def test_cost_monitor_uses_the_prices_in_force_during_the_window(tmp_path):
    system = device.use_simulated(workload="cifar100", dram_gb=8)
    start = system.wall_time()
    system.step(1)
    half = system.clock()
    change = system.wall_time(half * 5)  # the price changes after 5 of the next 10 steps
    path = tmp_path / "price.csv"
    path.write_text(f"time,price\n0,0.10\n{change!r},0.50\n")
    mon = EnergyCostMonitor(CsvIntensity(path), gpu_indices=[0])
    mon.begin_window("w")
    system.step(8)
    m = mon.end_window("w")
    t0 = system.wall_time(half)
    t1 = t0 + m.time
    mean_price = (0.10 * (change - t0) + 0.50 * (t1 - change)) / (t1 - t0)
    assert start < t0 < change < t1
    assert m.gpu_energy_cost[0] == pytest.approx(m.gpu_energy[0] / J_PER_KWH * mean_price)
    assert m.total_energy_cost > m.gpu_energy_cost[0]


def test_bad_inputs(tmp_path):
    with pytest.raises(ValueError, match=">= 0"):
        FixedIntensity(-1)
    bad = tmp_path / "bad.csv"
    bad.write_text("time,value\nyesterday,3\n")
    with pytest.raises(TraceFormatError, match="line 2"):
        CsvIntensity(bad)
    bad.write_text("time,value\n")
    with pytest.raises(TraceFormatError, match="holds no data rows"):
        CsvIntensity(bad)
    device.use_simulated()
    with pytest.raises(TypeError, match="IntensityProvider"):
        CarbonEmissionMonitor(400.0)


# --- HTTP providers against a server on 127.0.0.1 -------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    routes: dict = {}
    seen: list = []

    def do_GET(self):  # noqa: N802 (http.server's name)
        url = urlparse(self.path)
        headers = {k.lower(): v for k, v in self.headers.items()}
        type(self).seen.append((url.path, parse_qs(url.query), headers))
        status, body, delay = type(self).routes.get(url.path, (404, {"error": "no"}, 0))
        time.sleep(delay)
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    _Handler.routes, _Handler.seen = {}, []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", _Handler
    httpd.shutdown()
    httpd.server_close()


def _hour_history(values_by_offset: dict[int, float]) -> tuple[float, list[dict]]:
    """ElectricityMaps' history entries for hours this far (in hours) from the current one."""
    now = datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0)
    history = [
        {
            "datetime": datetime.fromtimestamp(now.timestamp() + 3600 * h, timezone.utc)
            .isoformat()
            .replace("+00:00", ".000Z"),
            "carbonIntensity": v,
        }
        for h, v in sorted(values_by_offset.items())
    ]
    return now.timestamp(), history


def test_electricity_maps_asks_zeus_urls_with_an_optional_key(server, monkeypatch):
    base, handler = server
    hour, history = _hour_history({-1: 300, 0: 100})
    handler.routes["/v3/carbon-intensity/history"] = (200, {"history": history}, 0)
    handler.routes["/v3/carbon-intensity/latest"] = (200, {"carbonIntensity": 120}, 0)
    monkeypatch.delenv("ZEUS_NB_ELECTRICITYMAPS_KEY", raising=False)
    p = ElectricityMapsClient((42.3, -83.7), estimate=True, base_url=f"{base}/v3")
    recent = p.get_recent_carbon_intensity()
    assert {k.timestamp(): v for k, v in recent.items()} == {hour - 3600: 300, hour: 100}
    assert p.get_current_carbon_intensity() == 120
    path, query, headers = handler.seen[0]
    assert path == "/v3/carbon-intensity/history"
    assert query["lat"] == ["42.3"] and query["lon"] == ["-83.7"]
    assert query["disableEstimations"] == ["False"]  # Zeus's spelling of the flag
    assert query["emissionFactorType"] == ["direct"]
    assert "auth-token" not in headers  # none without a key, as in Zeus
    monkeypatch.setenv("ZEUS_NB_ELECTRICITYMAPS_KEY", "k")
    ElectricityMapsClient((0, 0), base_url=f"{base}/v3").get_current_carbon_intensity()
    assert handler.seen[-1][2]["auth-token"] == "k"
    handler.routes["/v3/carbon-intensity/history"] = (200, {"history": []}, 0)
    with pytest.raises(ZeusCarbonIntensityNotFoundError, match="no recent carbon intensity"):
        p.get_recent_carbon_intensity()
    handler.routes["/v3/carbon-intensity/latest"] = (404, {"error": "No recent data"}, 0)
    with pytest.raises(ZeusCarbonIntensityNotFoundError, match="HTTP 404.*No recent data"):
        p.get_current_carbon_intensity()


def test_carbon_monitor_polls_the_live_provider_on_a_thread(server):
    """Real time (the simulated GPU on the wall clock): a polling thread converts each hour."""
    base, handler = server
    _, history = _hour_history({-1: 300, 0: 100})
    handler.routes["/v3/carbon-intensity/history"] = (200, {"history": history}, 0)
    device.use_simulated(workload="cifar100", clock="wall", dram_gb=8)
    mon = CarbonEmissionMonitor(ElectricityMapsClient((1, 2), base_url=f"{base}/v3"), [0])
    start = datetime.now(timezone.utc)
    mon.begin_window("w")
    thread = mon.polling_process
    assert thread is not None and thread.is_alive()
    time.sleep(0.1)
    m = mon.end_window("w")
    assert not thread.is_alive()  # the last window ended, so did the thread
    assert m.gpu_energy[0] > 0
    if datetime.now(timezone.utc).hour != start.hour:
        pytest.skip("the window crossed an hour boundary")
    assert m.gpu_carbon_emission == {0: pytest.approx(m.gpu_energy[0] / J_PER_KWH * 100, 1e-2)}
    assert m.cpu_carbon_emission[0] > 0 and m.dram_carbon_emission[0] > 0
    handler.routes["/v3/carbon-intensity/history"] = (200, {"error": "quota"}, 0)
    mon.begin_window("again")
    with pytest.raises(ZeusCarbonIntensityNotFoundError, match="quota"):
        mon.end_window("again")
    assert not mon.polling_process.is_alive() and mon.current_keys == set()


def test_the_ledger_converts_hour_by_hour_and_splits_spans_across_hours():
    """A span of energy over an hour boundary is split between the hours by time."""
    from zeus_nb.monitor import Measurement
    from zeus_nb.monitor.polling import ONE_HOUR, WindowLedger

    class Monitor:  # the same energy for every window, whatever its length
        def begin_window(self, key, sync_execution=True):
            pass

        def end_window(self, key, sync_execution=True):
            return Measurement(time=0.0, gpu_energy={0: 36.0}, cpu_energy={1: 3.6})

    hour = datetime(2026, 1, 5, 10, tzinfo=timezone.utc)
    prices = {hour: 2.0, hour + ONE_HOUR: 4.0}
    ledger = WindowLedger(Monitor(), ONE_HOUR, lambda: lambda p: prices[p.start])
    ledger.begin("w", hour.replace(minute=30))
    gpu, cpu, dram = ledger.finish("w", hour.replace(hour=11, minute=15))  # 30 + 15 minutes
    share = (2 / 3 * 2.0 + 1 / 3 * 4.0) / J_PER_KWH
    assert gpu == {0: pytest.approx(36.0 * share)}
    assert cpu == {1: pytest.approx(3.6 * share)} and dram == {}
    assert ledger.keys == []


def test_http_errors_timeouts_and_unreachable(server):
    base, handler = server
    handler.routes["/slow/carbon-intensity/history"] = (200, {"history": []}, 1.0)
    slow = ElectricityMapsClient((0, 0), base_url=f"{base}/slow", timeout=0.2)
    with pytest.raises(ZeusCarbonIntensityHTTPError, match="could not reach .* within 0.2 s"):
        slow.get_recent_carbon_intensity()
    missing = ElectricityMapsClient((0, 0), base_url=f"{base}/gone")
    with pytest.raises(ZeusCarbonIntensityNotFoundError, match="HTTP 404"):
        missing.get_recent_carbon_intensity()
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    down = OpenEIClient((0, 0), "X", api_key="k", base_url=f"http://127.0.0.1:{port}", timeout=1)
    with pytest.raises(IntensityProviderError, match="could not reach") as err:
        down.value_at(0)
    assert "api_key" not in str(err.value)  # the key never shows in messages


def test_openei_schedule(server, monkeypatch):
    monkeypatch.delenv("ZEUS_NB_OPENEI_KEY", raising=False)
    base, handler = server
    weekday = [[0] * 12 + [1] * 12 for _ in range(12)]  # afternoon peak every month
    weekend = [[0] * 24 for _ in range(12)]
    item = {
        "label": "RATE1",
        "energyratestructure": [[{"rate": 0.10}], [{"rate": 0.25}]],
        "energyweekdayschedule": weekday,
        "energyweekendschedule": weekend,
    }
    handler.routes["/utility_rates"] = (200, {"items": [{"label": "other"}, item]}, 0)
    p = OpenEIClient((42.3, -83.7), "RATE1", api_key="k", base_url=f"{base}/utility_rates")
    monday_9 = datetime(2026, 1, 5, 9).astimezone().timestamp()
    monday_15 = datetime(2026, 1, 5, 15).astimezone().timestamp()
    saturday_15 = datetime(2026, 1, 10, 15).astimezone().timestamp()
    assert (p.value_at(monday_9), p.value_at(monday_15), p.value_at(saturday_15)) == (
        0.10,
        0.25,
        0.10,
    )
    assert handler.seen[0][1]["sector"] == ["Residential"]
    nope = OpenEIClient((0, 0), "MISSING", api_key="k", base_url=f"{base}/utility_rates")
    with pytest.raises(IntensityProviderError, match="no rate labelled 'MISSING'"):
        nope.value_at(monday_9)
    # Without a key (none given, none in the environment) it says where to get one, at once.
    with pytest.raises(IntensityProviderError, match="OpenEI needs an API key: get a free one"):
        OpenEIClient((0, 0), "RATE1", base_url=f"{base}/utility_rates")
    assert len(handler.seen) == 2  # and asks nothing of the server


def test_location_lookup_reads_ipinfo_and_explains_failures(monkeypatch):
    import requests

    from zeus_nb.utils.lat_lon import IP_INFO_URL, LocationLookupError, get_ip_lat_long

    class Answer:
        def __init__(self, doc):
            self.doc = doc

        def json(self):
            return self.doc

    asked = []

    def fake_get(url, **kwargs):
        asked.append((url, kwargs.get("timeout")))
        return Answer({"loc": "42.2776,-83.7409"})

    monkeypatch.setattr(requests, "get", fake_get)
    assert get_ip_lat_long() == (42.2776, -83.7409)
    assert asked == [(IP_INFO_URL, 5.0)]
    assert get_ip_lat_long(timeout=2) == (42.2776, -83.7409)
    assert asked[-1] == (IP_INFO_URL, 2)
    monkeypatch.setattr(requests, "get", lambda url, **kw: Answer({"error": "rate limit"}))
    with pytest.raises(LocationLookupError, match="without a usable location.*latitude, longitude"):
        get_ip_lat_long()
