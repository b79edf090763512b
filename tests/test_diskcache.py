"""The on-disk cache of slow deterministic results (frequency fits, reference FLOPs)."""

from __future__ import annotations

import json

import pytest

from zeus_nb.utils import diskcache as _diskcache
from zeus_nb.utils.diskcache import cached


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ZEUS_NB_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def counter(value):
    calls = []

    def compute():
        calls.append(1)
        return value

    return compute, calls


def test_computes_once_per_key(cache):
    compute, calls = counter([1.5, 2.5])
    assert cached("x", {"a": 1}, compute) == [1.5, 2.5]
    assert cached("x", {"a": 1}, compute) == [1.5, 2.5]
    assert len(calls) == 1 and len(list(cache.glob("x-*.json"))) == 1
    assert cached("x", {"a": 2}, compute) == [1.5, 2.5]  # another key: computed again
    assert len(calls) == 2


def test_invalid_or_damaged_files_are_recomputed(cache):
    compute, calls = counter({"v": 3.0})
    cached("y", "k", compute)
    (path,) = cache.glob("y-*.json")
    path.write_text(json.dumps({"v": "three"}))
    ok = lambda v: isinstance(v.get("v"), float)  # noqa: E731
    assert cached("y", "k", compute, valid=ok) == {"v": 3.0} and len(calls) == 2
    path.write_text("{not json")
    assert cached("y", "k", compute, valid=ok) == {"v": 3.0} and len(calls) == 3
    assert json.loads(path.read_text()) == {"v": 3.0}


def test_off_and_unwritable_directories_still_compute(tmp_path, monkeypatch):
    compute, calls = counter(7.0)
    monkeypatch.setenv("ZEUS_NB_CACHE_DIR", "off")
    assert _diskcache.cache_dir() is None
    assert cached("z", 1, compute) == 7.0 and cached("z", 1, compute) == 7.0
    assert len(calls) == 2
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("ZEUS_NB_CACHE_DIR", str(blocker / "sub"))  # cannot be created
    assert cached("z", 1, compute) == 7.0 and len(calls) == 3


def test_cached_frequency_fit_equals_a_fresh_fit(cache, monkeypatch):
    from zeus_nb.device.frequency import calibrate

    fit = calibrate.__wrapped__  # past the in-process lru_cache
    first = fit("a40")  # computed and stored
    assert len(list(cache.glob("frequency-fit-*.json"))) == 1
    again = fit("a40")  # read back
    monkeypatch.setenv("ZEUS_NB_CACHE_DIR", "off")
    fresh = fit("a40")
    assert first == again == fresh
