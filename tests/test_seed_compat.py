"""Seed compatibility outside the monitor: ZEUS_MAX_SLOWDOWN, positional DATA_DIR, get_env."""

from __future__ import annotations

import pytest

from zeus_nb.train.config import config_from_args, max_slowdown_factor
from zeus_nb.utils.env import get_env


@pytest.fixture(autouse=True)
def _clean(monkeypatch):
    for name in ("ZEUS_MAX_SLOWDOWN", "ZEUS_NB_MAX_SLOWDOWN", "ZEUS_NB_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)


def test_zeus_max_slowdown_and_its_alias(monkeypatch):
    assert max_slowdown_factor() == 1.1
    monkeypatch.setenv("ZEUS_MAX_SLOWDOWN", "1.3")
    assert max_slowdown_factor() == 1.3
    monkeypatch.setenv("ZEUS_NB_MAX_SLOWDOWN", "1.3")  # both, agreeing
    assert max_slowdown_factor() == 1.3
    assert max_slowdown_factor(1.05) == 1.05  # an explicit value wins
    monkeypatch.setenv("ZEUS_NB_MAX_SLOWDOWN", "1.2")
    with pytest.raises(ValueError, match="ZEUS_MAX_SLOWDOWN=1.3 and ZEUS_NB_MAX_SLOWDOWN=1.2"):
        max_slowdown_factor()
    monkeypatch.delenv("ZEUS_MAX_SLOWDOWN")
    assert max_slowdown_factor() == 1.2
    monkeypatch.setenv("ZEUS_MAX_SLOWDOWN", "slow")
    with pytest.raises(ValueError, match="ZEUS_MAX_SLOWDOWN: 'slow' is not a number"):
        max_slowdown_factor()
    monkeypatch.setenv("ZEUS_MAX_SLOWDOWN", "0.9")
    monkeypatch.delenv("ZEUS_NB_MAX_SLOWDOWN")
    with pytest.raises(ValueError, match="ZEUS_MAX_SLOWDOWN: '0.9' is out of range"):
        max_slowdown_factor()


def test_data_dir_positional_as_in_zeus_examples(tmp_path):
    c = config_from_args("single", [str(tmp_path), "--gpu", "1"])
    assert c.data == str(tmp_path) and c.gpu == 1
    assert config_from_args("dp", ["synthetic"]).data == "synthetic"
    assert config_from_args("single", ["--data", "synthetic"]).data == "synthetic"
    same = config_from_args("single", ["synthetic", "--data=synthetic"])
    assert same.data == "synthetic"
    with pytest.raises(SystemExit):
        config_from_args("single", [str(tmp_path), "--data", "synthetic"])


def test_get_env_like_zeus(monkeypatch):
    from zeus_nb.utils.env import get_env as old_path

    assert old_path is get_env
    monkeypatch.setenv("X_FLOAT", "1.25")
    monkeypatch.setenv("X_BOOL", "True")
    monkeypatch.setenv("X_OFF", "false")
    monkeypatch.setenv("X_BAD", "maybe")
    assert get_env("X_FLOAT", float) == 1.25
    assert get_env("X_BOOL", bool) is True and get_env("X_OFF", bool) is False
    assert get_env("X_UNSET", float, 1.1) == 1.1
    with pytest.raises(ValueError, match="X_UNSET is not set"):
        get_env("X_UNSET", int)
    with pytest.raises(ValueError, match="X_BAD='maybe' is not a boolean"):
        get_env("X_BAD", bool)
    with pytest.raises(ValueError, match="X_BAD='maybe' is not a valid int"):
        get_env("X_BAD", int)
