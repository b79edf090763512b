"""The simulated wall clock follows the trace: unmodified Zeus loops choose the trace's limit."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import zeus_nb
from zeus_nb import device
from zeus_nb.device import sim_wall
from zeus_nb.monitor import ZeusMonitor

SCRIPT = Path(__file__).parent / "zeus_scripts" / "plo_wall_clock.py"


def implied_limit(system, factor: float) -> float:
    """The lowest limit whose trace time is within ``factor`` of the maximum limit's."""
    limits = sorted({float(x) for x in system.trace["power_limit"]}, reverse=True)
    ok = [w for w in limits if system.slowdown(w) <= factor]
    return min(ok)


def test_real_time_is_stretched_by_the_trace_slowdown():
    system = device.use_simulated(gpu="v100", workload="imagenet", clock="wall")
    monitor = ZeusMonitor(gpu_indices=[0])
    low = min(system.trace["power_limit"])
    times = {}
    for limit in (system.max_limit, low):
        system.gpus[0].set_power_limit(limit)
        monitor.begin_window(f"w{limit}")
        start = time.monotonic()
        time.sleep(0.05)
        real = time.monotonic() - start
        m = monitor.end_window(f"w{limit}")
        times[limit] = m.time / real
        watts = system.step_cost(system.batch_size, limit)[1]
        assert m.gpu_energy[0] == pytest.approx(watts * m.time, rel=1e-9)
    # Each window is stretched by its limit's slowdown (the ratio of real to simulated time).
    assert times[low] / times[system.max_limit] == pytest.approx(system.slowdown(low), rel=0.05)
    assert system.slowdown(low) > 1.3


class FakeTime:
    """A monotonic clock the test moves by hand."""

    def __init__(self):
        self.now = 1000.0

    def monotonic(self):
        return self.now


def test_marked_steps_cost_the_calibrated_time_whatever_their_real_length(monkeypatch):
    fake = FakeTime()
    monkeypatch.setattr(sim_wall, "time", fake)
    system = device.use_simulated(gpu="v100", workload="imagenet", clock="wall")
    for length in (0.001, 0.003, 0.002, 0.001, 0.002):  # calibration at the maximum limit
        fake.now += length
        system.mark_step()
    assert system._pace.base == pytest.approx(0.002)  # the median
    assert system.clock() == pytest.approx(0.009)  # calibration steps cost their real time
    low = min(system.trace["power_limit"])
    system.gpus[0].set_power_limit(low)
    t0, e0 = system.clock(), system.gpus[0].energy()
    for length in (0.0, 0.004, 0.0005, 0.006):  # fast and slow steps cost the same
        fake.now += length / 2
        assert system.clock() == t0 + (system.clock() - t0)  # readings mid-step: held still
        fake.now += length / 2
        system.mark_step()
    stretched = 4 * 0.002 * system.slowdown(low)
    assert system.clock() - t0 == pytest.approx(stretched)
    watts = system.step_cost(system.batch_size, low)[1]
    assert system.gpus[0].energy() - e0 == pytest.approx(watts * stretched)
    t1 = system.clock()
    fake.now += 0.002 * 5  # a window opening mid-step sees the clock held at the last mark
    assert system.clock() == t1
    fake.now += 1.5  # beyond the hold: the loop does something else, real time counts again
    beyond = 0.002 * 5 + 1.5 - max(sim_wall.HOLD * 0.002, sim_wall.MIN_HOLD)
    assert system.clock() - t1 == pytest.approx(beyond * system.slowdown(low))


def test_a_busy_machine_pausing_a_step_adds_nothing_to_it(monkeypatch):
    """At a load of 8 to 12 the wall clock once chose another limit than the trace implies:
    a pause inside a marked step (the process descheduled) must cost nothing extra, whether a
    window reads the clock during it or not (below the hold)."""
    fake = FakeTime()
    monkeypatch.setattr(sim_wall, "time", fake)
    system = device.use_simulated(gpu="v100", workload="imagenet", clock="wall")
    for _ in range(sim_wall.CALIBRATION_STEPS):
        fake.now += 0.002
        system.mark_step()
    t0 = system.clock()
    for pause in (0.3, 5.0, 0.0, 0.9):  # paused 0.3 s, 5 s (no reading), none, 0.9 s
        fake.now += pause
        if pause < sim_wall.MIN_HOLD:
            system.clock()  # a window read mid-step, within the hold
        fake.now += 0.002
        system.mark_step()
    assert system.clock() - t0 == pytest.approx(4 * 0.002)


def test_virtual_clock_ignores_step_marks():
    system = device.use_simulated(workload="imagenet")
    system.mark_step()
    assert system.clock() == 0.0
    zeus_nb.step(2)
    assert system.clock() > 0


@pytest.mark.slow
@pytest.mark.parametrize("factor", [1.0, 1.5])
def test_unmodified_zeus_loop_picks_the_limit_the_trace_implies(factor):
    system = device.create("sim")  # the same simulated GPU the script gets from its environment
    expected = implied_limit(system, factor)
    env = {
        **os.environ,
        "ZEUS_NB_BACKEND": "sim",
        "ZEUS_NB_SIM_CLOCK": "wall",
        "ZEUS_MAX_SLOWDOWN": str(factor),
    }
    chosen = []
    for _ in range(5):
        out = subprocess.run(
            [sys.executable, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0, out.stderr[-2000:]
        chosen.append(float(out.stdout.split()[-1]))
    assert chosen == [expected] * 5, (factor, chosen, expected)
