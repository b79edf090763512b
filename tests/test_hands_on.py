"""A Zeus-style hands-on script (PowerMonitor next to ZeusMonitor, windows re-run after
``reset_windows()``, nested windows, recent power timelines and a plot), imports changed only."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

SCRIPT = '''
import sys
import time

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

from zeus_nb.monitor import PowerMonitor, ZeusMonitor  # was: from zeus.monitor import ...

power_monitor = PowerMonitor(update_period=0.05)
monitor = ZeusMonitor()


def work(seconds):
    time.sleep(seconds)  # stands for GPU work


def cell():
    """A notebook cell: re-runnable thanks to reset_windows() at its top."""
    monitor.reset_windows()
    monitor.begin_window("whole")
    start = time.time()
    for i in range(3):
        monitor.begin_window(f"step{i}")
        work(0.1)
        m = monitor.end_window(f"step{i}")
        print(f"step {i}: {m.time:.3f} s {m.total_energy:.3f} J")
    whole = monitor.end_window("whole")
    print(f"whole: {whole.time:.3f} s {whole.total_energy:.3f} J")
    return start, whole


monitor.begin_window("whole")  # a first run interrupted with the window open...
start, whole = cell()  # ...and the cell run again
timelines = power_monitor.get_all_power_timelines(start_time=time.time() - 5)
energy = power_monitor.get_energy(start, time.time())
print(f"power monitor: {energy[0]:.3f} J")
fig, ax = plt.subplots()
for domain, per_gpu in timelines.items():
    for gpu, points in per_gpu.items():
        t, w = zip(*points)
        ax.plot([x - start for x in t], w, label=f"{domain} GPU{gpu}")
ax.axvspan(0, whole.time, alpha=0.2, label="whole")
ax.legend()
fig.savefig(sys.argv[1])
print("domains:", ",".join(sorted(timelines)))
power_monitor.stop()
'''


def test_hands_on_script_runs_with_imports_changed(tmp_path):
    script = tmp_path / "hands_on.py"
    script.write_text(SCRIPT)
    png = tmp_path / "power.png"
    env = dict(os.environ, PYTHONPATH=str(REPO), ZEUS_NB_BACKEND="sim", ZEUS_NB_SIM_CLOCK="wall")
    r = subprocess.run(
        [sys.executable, str(script), str(png)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    steps = [line for line in lines if line.startswith("step")]
    assert len(steps) == 3
    for line in steps:
        seconds, joules = float(line.split()[2]), float(line.split()[4])
        assert seconds >= 0.1 and joules > 0
    whole = next(line for line in lines if line.startswith("whole"))
    whole_s, whole_j = float(whole.split()[1]), float(whole.split()[3])
    step_j = sum(float(line.split()[4]) for line in steps)
    assert whole_s >= 0.3 and whole_j >= step_j  # the outer window contains the inner ones
    pm_j = float(next(line for line in lines if line.startswith("power monitor")).split()[2])
    assert 0 < pm_j <= whole_j * 1.1  # integrated samples: close to, not above, the counter
    assert "domains: device_average,device_instant" in lines
    assert png.stat().st_size > 1000
    assert "Warning" not in r.stderr
