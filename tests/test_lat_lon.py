"""get_ip_lat_long: ipinfo.io's answer as Zeus reads it, and one line saying what to do offline.

HTTP is mocked, or sent to a closed port on 127.0.0.1 through a proxy setting: nothing leaves
the machine.
"""

from __future__ import annotations

import socket

import pytest
import requests

from zeus_nb.utils.lat_lon import IP_INFO_URL, LocationLookupError, get_ip_lat_long


class Answer:
    def __init__(self, body, status=200):
        self.body, self.status_code = body, status

    def json(self):
        if isinstance(self.body, Exception):
            raise self.body
        return self.body


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_reads_ipinfos_location_with_a_bounded_wait(monkeypatch):
    asked = []

    def get(url, **kwargs):
        asked.append((url, kwargs))
        return Answer({"ip": "192.0.2.1", "loc": "42.2776,-83.7409"})

    monkeypatch.setattr(requests, "get", get)
    assert get_ip_lat_long() == (pytest.approx(42.2776), pytest.approx(-83.7409))
    assert asked == [(IP_INFO_URL, {"timeout": 5.0})]


@pytest.mark.parametrize(
    "answer",
    [
        Answer({"error": {"title": "Rate limit exceeded"}}, status=429),
        Answer(requests.exceptions.JSONDecodeError("Expecting value", "<html>", 0)),
        Answer({"loc": "somewhere"}),
    ],
)
def test_an_unusable_answer_says_to_pass_the_location(monkeypatch, answer):
    monkeypatch.setattr(requests, "get", lambda url, **kw: answer)
    with pytest.raises(LocationLookupError, match="without a usable location") as info:
        get_ip_lat_long()
    assert "(latitude, longitude)" in str(info.value) and "\n" not in str(info.value)


def test_offline_it_fails_fast_in_one_line_saying_what_to_pass(monkeypatch):
    proxy = f"http://127.0.0.1:{closed_port()}"
    for name in ("http_proxy", "HTTP_PROXY"):
        monkeypatch.setenv(name, proxy)
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(LocationLookupError, match="could not reach .* within 1 s") as info:
        get_ip_lat_long(timeout=1)
    message = str(info.value)
    assert "pass the location yourself as (latitude, longitude)" in message
    assert "\n" not in message and isinstance(info.value, OSError)
    assert isinstance(info.value.__cause__, requests.exceptions.ProxyError)  # never left 127.0.0.1
