"""Library diagnostics are log records; show_logs puts the INFO lines on the notebook's stdout."""

import logging

import pytest

from zeus_nb import device
from zeus_nb.device.guard import power_limits_restored
from zeus_nb.utils.logging import level_for, show_logs


@pytest.fixture(autouse=True)
def _default_logging():
    yield
    show_logs(None)


def test_show_logs_prints_info_lines_once_however_often_it_is_called(capsys):
    show_logs()
    show_logs()  # a re-run setup cell must not double every line
    gpu = device.use_simulated().gpus[0]
    with power_limits_restored([gpu], backend="sim", persist=False):
        gpu.set_power_limit(gpu.power_limit_constraints()[0])
    out = capsys.readouterr().out.splitlines()
    wanted = "zeus_nb.device.guard: restored the original power limits of GPU(s) 0"
    assert out.count(wanted) == 1
    logging.getLogger("zeus_nb.runner.sweep").debug("hidden at INFO")
    assert capsys.readouterr().out == ""


def test_a_guard_that_changed_nothing_says_nothing_was_restored(capsys):
    """Each rank of notebook 06 arms a guard; the ones whose GPU kept its settings must not
    print that they restored them (only what was put back is named)."""
    show_logs()
    system = device.use_simulated(num_gpus=2)
    untouched, changed = system.gpus
    with power_limits_restored([untouched], backend="sim", persist=False):
        pass
    with power_limits_restored([untouched, changed], backend="sim", persist=False):
        changed.set_power_limit(changed.power_limit_constraints()[0])
    out = capsys.readouterr().out.splitlines()
    assert out == ["zeus_nb.device.guard: restored the original power limits of GPU(s) 1"]


def test_show_logs_none_restores_pythons_default(capsys):
    show_logs("DEBUG")
    logging.getLogger("zeus_nb.x").debug("seen")
    assert capsys.readouterr().out == "zeus_nb.x: seen\n"
    logger = show_logs(None)
    assert logger.level == logging.NOTSET and not logger.handlers
    logging.getLogger("zeus_nb.x").info("not seen")
    assert capsys.readouterr() == ("", "")


def test_backend_fallback_notice_is_a_warning(fake_nvml, caplog):
    fake_nvml.update(init_error="DriverNotLoaded")
    with caplog.at_level(logging.DEBUG, logger="zeus_nb"):
        system = device.current()
    assert system.backend == "sim"
    levels = {r.getMessage(): r.levelno for r in caplog.records}
    assert levels["no NVIDIA driver found; using the simulated GPU backend"] == logging.WARNING
    assert levels["GPU backend: sim, 1 GPU(s)"] == logging.DEBUG


@pytest.mark.parametrize(
    ("verbose", "level"),
    [(True, logging.INFO), (False, logging.DEBUG), (logging.WARNING, logging.WARNING)],
)
def test_verbose_flags_map_to_levels(verbose, level):
    assert level_for(verbose) == level
