"""Thermally stable profiling (zeus_nb.profile, Zeus's zeus.profile) against the traces.

Durations are tiny: on the virtual clock a trial costs no real time at all, on the wall clock a
few tens of milliseconds; cooldown sleeps are short or recorded instead of slept.
"""

from __future__ import annotations

import logging
import math
import runpy
from pathlib import Path

import pytest

import zeus_nb
from zeus_nb.data.traces import get_workload, load_power_trace
from zeus_nb.errors import InputError, TargetFunctionError
from zeus_nb.monitor import ZeusMonitor
from zeus_nb.profile import (
    SweepReport,
    SweepResult,
    TrialResult,
    measure,
    profile_cooldown_duration,
    profile_measurement_duration,
    profile_parameters,
)
from zeus_nb.profile import trials as trials_module

SCRIPT = Path(__file__).parent / "zeus_scripts" / "thermal_profile.py"


def trace_step(limit: float, gpu: str = "a40", dataset: str = "imagenet") -> tuple[float, float]:
    """(s, J) of one training step at a measured ``limit``, read from the trace file itself."""
    w = get_workload(dataset)
    t = load_power_trace(gpu)
    row = t[
        (t.dataset == dataset) & (t.batch_size == w.default_batch_size) & (t.power_limit == limit)
    ]
    assert len(row) == 1
    seconds = float(row.time_per_epoch.iloc[0]) / math.ceil(w.num_samples / w.default_batch_size)
    return seconds, seconds * float(row.average_power.iloc[0])


@pytest.fixture
def no_sleep(monkeypatch):
    """Record cooldown sleeps instead of sleeping."""
    slept: list[float] = []
    monkeypatch.setattr(trials_module.time, "sleep", slept.append)
    return slept


# --- a Zeus-shaped script, imports changed only ------------------------------------------------
def test_zeus_shaped_script_on_the_wall_clock(monkeypatch, capsys):
    monkeypatch.setenv("ZEUS_NB_BACKEND", "sim")
    monkeypatch.setenv("ZEUS_NB_SIM_CLOCK", "wall")
    by_window, by_cooldown, result = runpy.run_path(str(SCRIPT))["main"]([])
    out = capsys.readouterr().out
    limit = zeus_nb.device.current().gpus[0].get_power_limit()
    seconds, joules = trace_step(limit)
    trials = [t for r in (by_window, by_cooldown) for e in r.entries for t in e.trials] + [result]
    for t in trials:  # the wall clock: real time at the trace's power for this limit
        assert t.iterations >= 1 and t.total_time > 0
        assert t.total_energy / t.total_time == pytest.approx(joules / seconds, rel=1e-9)
        assert math.isnan(t.temperature_before) and math.isnan(t.temperature_after)
    assert by_window.sweep_param == ("measurement_duration", [0.02, 0.05])
    assert by_window.fixed_param == ("cooldown_duration", 0.01)
    assert by_cooldown.sweep_param == ("cooldown_duration", [0.0, 0.01])
    assert by_cooldown.fixed_param == ("measurement_duration", 0.05)
    assert str(by_window) in out and str(by_cooldown) in out
    assert out.count("VALID]") == 4  # one tag per swept value ("[VALID]" or "[INVALID]")


# --- the virtual clock: exactly the trace ------------------------------------------------------
@pytest.mark.parametrize("limit", [300.0, 200.0, 125.0])
def test_measure_gives_the_trace_step_at_the_current_limit(limit, no_sleep):
    system = zeus_nb.use_simulated(gpu="a40", workload="imagenet")
    monitor = ZeusMonitor(gpu_indices=[0])
    monitor.gpus[0].set_power_limit(limit)
    seconds, joules = trace_step(limit)
    duration = 7.3 * seconds  # not a whole number of steps
    result = measure(zeus_nb.step, monitor, measurement_duration=duration, cooldown_duration=0.5)
    assert isinstance(result, TrialResult)
    assert result.energy_per_iter == pytest.approx(joules, rel=1e-9)
    assert result.time_per_iter == pytest.approx(seconds, rel=1e-9)
    assert result.iterations == 7
    assert result.total_energy == pytest.approx(7 * joules, rel=1e-9)
    assert no_sleep == [0.5]
    # 10 warm-up + 100 calibration calls, 10 warm-up calls before the window, then the window
    assert system.steps_taken == 10 + 100 + 10 + 7
    assert monitor.open_windows == []


def test_profile_parameters_runs_zeus_schedule(no_sleep):
    system = zeus_nb.use_simulated()
    monitor = ZeusMonitor()
    seconds, joules = trace_step(system.max_limit)
    windows, cooldowns = [1.5 * seconds, 3.5 * seconds], [0.0, 0.25, 0.5]
    by_window, by_cooldown = profile_parameters(
        zeus_nb.step,
        monitor,
        measurement_duration_search_range=windows,
        cooldown_duration_search_range=cooldowns,
        num_trials=2,
        num_warmup_trials=3,
        num_warmup_iterations=4,
        num_calibration_iterations=20,
    )
    assert [e.measurement_duration for e in by_window.entries] == windows
    assert {e.cooldown_duration for e in by_window.entries} == {0.5}
    assert [e.cooldown_duration for e in by_cooldown.entries] == cooldowns
    assert {e.measurement_duration for e in by_cooldown.entries} == {windows[1]}
    assert [[t.iterations for t in e.trials] for e in by_window.entries] == [[1, 1], [3, 3]]
    # one calibration, warm-up trials once (no cooldown, no warm-up calls, the longest window)
    calls = (4 + 20) + 3 * 3 + 2 * (4 + 1) + 2 * (4 + 3) + 3 * 2 * (4 + 3)
    assert system.steps_taken == calls
    assert no_sleep == [0.5] * 4 + [0.25] * 2 + [0.5] * 2  # cooldown 0 sleeps not at all
    for entry in by_window.entries + by_cooldown.entries:
        assert entry.energy_mean == pytest.approx(joules, rel=1e-9)
        assert entry.is_valid and entry.energy_std < 1e-6


def test_noisy_gpu_needs_longer_windows_than_a_noiseless_one(no_sleep):
    seconds, joules = trace_step(300.0)
    windows = [2 * seconds, 2000 * seconds]
    reports = {}
    for noise in (0.0, 0.05):
        zeus_nb.use_simulated(noise=noise, seed=11)
        reports[noise] = profile_measurement_duration(
            zeus_nb.step,
            ZeusMonitor(),
            measurement_duration_search_range=windows,
            cooldown_duration=0.0,
            num_trials=5,
            num_warmup_trials=0,
            trial_stddev_threshold=1.0,
        )
    quiet, noisy = reports[0.0], reports[0.05]
    assert [e.is_valid for e in quiet.entries] == [True, True]
    short, long = noisy.entries
    assert short.energy_std > long.energy_std > 0
    assert (short.is_valid, long.is_valid) == (False, True)
    for entry in noisy.entries:
        assert entry.is_valid == (entry.energy_std < 1.0)
        assert entry.energy_mean == pytest.approx(joules, rel=0.1)
    lines = str(noisy).splitlines()
    assert lines[0].startswith("Sweep measurement_duration (fixed cooldown_duration=0.0 s)")
    assert lines[1].endswith("[INVALID]") and lines[2].endswith("[VALID]")
    assert str(short).endswith("[INVALID]") and "std=" in str(short)


def test_cooldown_sweep_alone_takes_a_given_iteration_duration(no_sleep):
    system = zeus_nb.use_simulated()
    seconds, _ = trace_step(system.max_limit)
    report = profile_cooldown_duration(
        zeus_nb.step,
        ZeusMonitor(),
        cooldown_duration_search_range=[0.125],
        measurement_duration=4.0,
        num_trials=1,
        num_warmup_trials=1,
        num_warmup_iterations=0,
        iteration_duration=1.0,  # no calibration: 4 calls per window
    )
    assert isinstance(report, SweepReport)
    [entry] = report.entries
    assert [t.iterations for t in entry.trials] == [4]
    assert entry.energy_std == 0.0 and entry.is_valid  # one trial
    assert entry.avg_total_time == pytest.approx(4 * seconds)
    assert system.steps_taken == 4 + 4
    assert no_sleep == [0.125]


# --- temperatures ------------------------------------------------------------------------------
def test_temperatures_are_read_before_warmup_and_after_the_window(fake_nvml):
    fake_nvml.set_device(0, temperature_c=41)
    fake_nvml.set_device(1, temperature_c=52)
    calls = []

    def heats_gpu0():
        calls.append(1)
        fake_nvml.set_device(0, temperature_c=41 + len(calls))

    monitor = ZeusMonitor(gpu_indices=[0, 1], cpu_indices=[])
    result = measure(
        heats_gpu0,
        monitor,
        measurement_duration=0.002,
        cooldown_duration=0.0,
        num_warmup_iterations=2,
        num_calibration_iterations=3,
    )
    before = 41 + 2 + 3  # after warm-up and calibration calls, before the trial's warm-up
    after = before + 2 + result.iterations
    assert result.temperature_before == pytest.approx((before + 52) / 2)
    assert result.temperature_after == pytest.approx((after + 52) / 2)


def test_a_real_gpu_without_a_temperature_sensor_gives_nan(fake_nvml, caplog):
    fake_nvml.set_device(1, temperature_c=None)  # NVML: not supported
    with caplog.at_level(logging.WARNING, logger="zeus_nb.profile"):
        result = measure(
            lambda: None,
            ZeusMonitor(gpu_indices=[0, 1], cpu_indices=[]),
            measurement_duration=0.001,
            cooldown_duration=0.0,
            num_warmup_iterations=0,
            num_calibration_iterations=2,
        )
    assert math.isnan(result.temperature_before) and math.isnan(result.temperature_after)
    assert result.total_energy > 0
    assert [r.levelno for r in caplog.records] == [logging.WARNING]


def test_missing_temperature_is_nan_and_said_once_per_call(caplog, no_sleep):
    zeus_nb.use_simulated()
    with caplog.at_level(logging.WARNING, logger="zeus_nb.profile"):
        by_window, by_cooldown = profile_parameters(
            zeus_nb.step, ZeusMonitor(), [1.0, 2.0], [0.0, 0.1], num_trials=2, num_warmup_trials=1
        )
    said = [r for r in caplog.records if "temperature" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING
    for entry in by_window.entries + by_cooldown.entries:
        assert math.isnan(entry.avg_temperature_before) and math.isnan(entry.avg_temperature_after)
        assert "temp_before=nan" in str(entry)


# --- several ranks -----------------------------------------------------------------------------
def test_ranks_sum_energy_take_the_longest_time_and_average_temperatures(monkeypatch, caplog):
    """A second rank that measured 3x this rank's values: sums 4x, maxima 3x, averages 2x."""

    def all_reduce(values, operation):
        return [4 * v if operation == "sum" else 3 * v for v in values]

    monkeypatch.setattr(trials_module, "all_reduce", all_reduce)
    monkeypatch.setattr(trials_module, "get_world_size", lambda: 2)
    monkeypatch.setattr(trials_module, "get_rank", lambda: 1)
    monkeypatch.setattr(trials_module.Profiler, "temperature", lambda self: 50.0)
    zeus_nb.use_simulated()
    seconds, joules = trace_step(300.0)
    with caplog.at_level(logging.DEBUG, logger="zeus_nb.profile"):
        result = measure(
            zeus_nb.step, ZeusMonitor(), measurement_duration=31 * seconds, cooldown_duration=0
        )
    assert result.iterations == 10  # the slowest rank's iteration took 3x as long
    assert result.total_energy == pytest.approx(4 * 10 * joules)
    assert result.energy_per_iter == pytest.approx(4 * joules)
    assert result.total_time == pytest.approx(3 * 10 * seconds)
    assert result.temperature_before == result.temperature_after == pytest.approx(100.0)
    assert not caplog.records  # only rank 0 logs


# --- bad input: one-line errors, before anything runs -----------------------------------------
@pytest.mark.parametrize(
    ("call", "names"),
    [
        (lambda f, m: measure(f, m, measurement_duration=0, cooldown_duration=1), "measurement"),
        (lambda f, m: measure(f, m, measurement_duration=-2, cooldown_duration=1), "measurement"),
        (lambda f, m: measure(f, m, math.nan, 1), "measurement_duration"),
        (lambda f, m: measure(f, m, 1, -0.5), "cooldown_duration"),
        (lambda f, m: measure(f, m, 1, 1, num_calibration_iterations=0), "num_calibration"),
        (lambda f, m: measure(f, m, 1, 1, num_warmup_iterations=-1), "num_warmup_iterations"),
        (lambda f, m: measure(None, m, 1, 1), "target_function"),
        (lambda f, m: measure(f, object(), 1, 1), "zeus_monitor"),
        (lambda f, m: profile_parameters(f, m, []), "measurement_duration_search_range"),
        (lambda f, m: profile_parameters(f, m, None, []), "cooldown_duration_search_range"),
        (lambda f, m: profile_parameters(f, m, [1.0, 0.0]), "measurement_duration_search_range"),
        (lambda f, m: profile_parameters(f, m, "1,2"), "measurement_duration_search_range"),
        (lambda f, m: profile_parameters(f, m, num_trials=0), "num_trials"),
        (lambda f, m: profile_parameters(f, m, trial_stddev_threshold=-1), "trial_stddev"),
        (lambda f, m: profile_measurement_duration(f, m, cooldown_duration=-1), "cooldown"),
        (lambda f, m: profile_cooldown_duration(f, m, [-1.0]), "cooldown_duration_search_range"),
        (lambda f, m: profile_cooldown_duration(f, m, measurement_duration=0), "measurement"),
        (lambda f, m: profile_cooldown_duration(f, m, iteration_duration=0), "iteration_duration"),
    ],
)
def test_bad_arguments_raise_one_line_input_errors(call, names):
    system = zeus_nb.use_simulated()
    with pytest.raises(InputError) as info:
        call(zeus_nb.step, ZeusMonitor())
    message = str(info.value)
    assert "\n" not in message and names in message
    assert system.steps_taken == 0


def test_a_raising_target_function_stops_with_one_line_and_cancels_the_window(no_sleep):
    system = zeus_nb.use_simulated()
    monitor = ZeusMonitor()

    def fails_in_the_window():
        system.step()
        if system.steps_taken > 10 + 100 + 10 + 2:
            raise ValueError("out of\nmemory")

    with pytest.raises(TargetFunctionError) as info:
        measure(fails_in_the_window, monitor, measurement_duration=10.0, cooldown_duration=0)
    message = str(info.value)
    assert "\n" not in message and "ValueError (out of memory)" in message
    assert "measurement" in message
    assert isinstance(info.value.__cause__, ValueError)
    assert monitor.open_windows == []  # the monitor stays usable
    with monitor.window("after"):
        system.step()


def test_a_target_that_never_steps_the_virtual_clock_is_refused():
    zeus_nb.use_simulated()
    with pytest.raises(TargetFunctionError, match=r"zeus_nb\.step\(\)") as info:
        measure(lambda: None, ZeusMonitor(), measurement_duration=1.0, cooldown_duration=0)
    assert "\n" not in str(info.value)


def test_summaries_print_durations_as_zeus_does_without_hiding_short_ones():
    trial = TrialResult(2.0, 0.5, 8.0, 2.0, 4, math.nan, math.nan)
    entry = SweepResult(0.02, 10.0, [trial], 2.0, 0.0, math.nan, math.nan, 2.0, 8.0, True)
    assert str(entry).startswith("measurement=0.02 s  cooldown=10.0 s  mean=2.0000 J")
    report = SweepReport(("measurement_duration", [0.02]), ("cooldown_duration", 10.0), [entry])
    assert str(report).splitlines() == [
        "Sweep measurement_duration (fixed cooldown_duration=10.0 s):",
        "  measurement_duration=0.02 s  " + str(entry).split("s  ", 2)[2],
    ]
