"""A real H200's counter and power reads, replayed through the background counter reader.

``benchmarks/real_gpu/trace.py`` recorded every NVML energy and power read (with the
``time.perf_counter`` readings around each, and its thread) of three runs of 30 steps of bf16
matmuls, about 31 ms each after 0.5 s idle, with a window around each step
(``benchmarks/results/real-gpu-2026-12-04/``). Here those reads are fed to
:class:`~zeus_nb.device.counter.CounterReader` in the order they returned, on their own clock:
the reader's counter reads to :meth:`observe`, its power samples to the power track, and the
caller's power reads as window edges. What a window returned at once is an estimate; once the
counter stepped past the run, its edges are shared out from the counter. On real data, not a
fake's, the estimates must add up to what the counter says within one counter step.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zeus_nb.device import counter, counter_track

RESULTS = Path(__file__).resolve().parent.parent / "benchmarks" / "results" / "real-gpu-2026-12-04"


class TraceGPU:
    """The traced H200 as the reader sees it: its power limits; reads come from the trace."""

    index = 0

    def power_reader(self):
        return lambda: 0.0  # never called: the replay adds the traced readings itself

    def get_power_management_limit_constraints(self) -> tuple[int, int]:
        return 200_000, 700_000  # mW, as the H200 reported


def replay(run: dict, power_kind: str) -> tuple[list[float], float, float]:
    """(each step window's J as returned at once, the run window's J as returned at once, the
    run window's J once the counter stepped past it) for one traced run; ``power_kind`` is
    the power read the reader used: "F" (the instant field) or "P" (nvmlDeviceGetPowerUsage)."""
    r = counter.CounterReader(TraceGPU())
    events = sorted(
        (b, kind, thread, a, value)
        for kind, thread, a, b, value in run["reads"]
        if kind == "E" and thread.startswith("zeus-nb") or kind == power_kind
    )
    windows = run["windows"]  # (before begin_window, after the step, after end_window, J, how)
    t_run, t_end = run["run"][:2]
    edges: list[counter_track.Mark] = []
    steps: dict[int, float] = {}
    run_edges: list[counter_track.Mark] = []
    at_once = 0.0
    for b, kind, thread, a, value in events:
        if kind == "E":
            r.observe(a, b, value / 1000.0)  # mJ
            continue
        watts = value / 1000.0  # mW
        if not thread.startswith("Main"):  # the reader's own power sample
            with r._lock:
                r._power.add((a + b) / 2, watts)
            continue
        mark = counter_track.Mark(a)  # a window edge: the clock, then one power reading
        with r._lock:
            r._power.add((a + b) / 2, watts)
            r._pending.append(mark)
        edges.append(mark)
        if a <= t_run:
            run_edges[:] = [mark]  # the run's first edge is the last before the run began
        for i, (t0, t1, t2, _, _) in enumerate(windows):
            if t1 <= a <= t2 and i not in steps:
                begin = next(m for m in edges if t0 <= m.t <= t1)
                steps[i] = r.energy_between(begin, mark)[0]
        if a >= t_end and len(run_edges) == 1:
            run_edges.append(mark)
            at_once = r.energy_between(*run_edges)[0]
    assert len(steps) == len(windows) and len(run_edges) == 2
    first, last = run_edges
    final = r.estimate(last) - r.estimate(first)
    assert last.energy is not None  # the counter stepped past the run: shared out, final
    return [steps[i] for i in range(len(windows))], at_once, final


def largest_step(run: dict) -> float:
    """The largest counter step (J) the reader saw in the run: the counter's resolution."""
    values = [v / 1000.0 for k, th, a, b, v in run["reads"] if k == "E" and th != "MainThread"]
    return max(y - x for x, y in zip(values, values[1:], strict=False))


@pytest.mark.parametrize("run_index", [0, 1, 2])
def test_step_windows_add_up_to_the_counter_within_one_step_on_a_real_h200(run_index):
    run = json.loads((RESULTS / "trace-instant.json").read_text())["runs"][run_index]
    steps, at_once, final = replay(run, "F")
    assert all(s > 0 for s in steps)
    assert abs(sum(steps) - final) <= largest_step(run), (sum(steps), final)
    assert abs(at_once - final) <= largest_step(run), (at_once, final)


@pytest.mark.parametrize("run_index", [0, 1, 2])
def test_the_h200s_one_second_average_power_would_not_do(run_index):
    """The same steps, traced while the reader read nvmlDeviceGetPowerUsage (a 1 s average
    on the H200): estimates by it stray from the counter by more than a counter step, which
    is why the reader reads the instant field."""
    run = json.loads((RESULTS / "trace-power-usage.json").read_text())["runs"][run_index]
    steps, _, final = replay(run, "P")
    assert abs(sum(steps) - final) > largest_step(run), (sum(steps), final)
