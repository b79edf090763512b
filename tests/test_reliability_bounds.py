"""Readers and commands answer in bounded time and memory, whatever the input.

A FIFO, ``/dev/zero`` or a huge file once blocked or exhausted ``plo replay``, ``tradeoff`` and
``restore``; ``--unit-time 1e-6``, ``--microbatches 200`` and ``--recurrences 100000`` once ran
for minutes with no answer. The class tests here try every typed option of every command that
computes in this process at both ends of its range, so a new option without a bound fails.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from importlib import resources
from pathlib import Path

import pytest

from zeus_nb.cli import main

LOG = resources.files("zeus_nb") / "resources" / "zeus_profiles" / "A40+resnet50+gpu0.csv"


@contextlib.contextmanager
def deadline(seconds: int, what: str):
    """Fail instead of hanging when a command blocks (a FIFO) or runs on and on."""

    def expired(*_):
        raise AssertionError(f"{what}: no answer within {seconds} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# --- examples: readers that blocked or read without end ------------------------------------
@pytest.mark.parametrize(
    "argv",
    [
        ["plo", "replay", "{path}"],
        ["tradeoff", "savings", "--gpu", "{path}"],
        ["tradeoff", "pareto", "--workload", "imagenet", "--train-trace", "{path}"],
        ["perseus", "plan", "{path}", "--stages", "2", "--microbatches", "4"],
        ["bso", "show", "--store", "{path}"],
    ],
    ids=lambda a: " ".join(a[:2]),
)
@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_a_fifo_or_a_device_is_refused_at_once(argv, kind, tmp_path, capsys):
    path = tmp_path / "input.csv"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    with deadline(30, f"{argv} on {kind}"):
        code = main([a.replace("{path}", str(path)) for a in argv])
    err = capsys.readouterr().err
    assert code == 2, err
    line = _one_line(err)
    assert str(path) in line and ("FIFO" in line or "device" in line), line


def test_restore_with_a_fifo_state_file_reports_it_and_goes_on(tmp_path, capsys):
    os.mkfifo(tmp_path / "zeus-nb-settings-1.json")
    with deadline(30, "restore with a FIFO"):
        code = main(["restore", "--state-dir", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code in (1, 2), err
    assert "Traceback" not in err and "FIFO" in out + err, out + err


def test_a_huge_log_is_refused_before_it_is_parsed(tmp_path, capsys):
    from zeus_nb.inputs.kinds import MONITOR_LOG

    big = tmp_path / "big.csv"
    head = Path(str(LOG)).read_bytes()
    row = b"1700000000.0,step,0.5,100.0\n"
    big.write_bytes(head + row * (MONITOR_LOG.max_bytes // len(row) + 1))
    start = time.monotonic()
    assert main(["plo", "replay", str(big)]) == 2
    assert time.monotonic() - start < 10
    line = _one_line(capsys.readouterr().err)
    assert str(big) in line and "MiB" in line, line


# --- examples: options whose work had no bound ---------------------------------------------
def _profile(tmp_path: Path) -> Path:
    p = tmp_path / "profile.csv"
    assert main(["perseus", "synthetic", str(p), "--stages", "4"]) == 0
    return p


@pytest.mark.parametrize(
    "extra", [["--microbatches", "200"], ["--microbatches", "8", "--unit-time", "1e-6"]]
)
def test_perseus_plan_refuses_work_past_its_bound_naming_what_to_change(extra, tmp_path, capsys):
    profile = _profile(tmp_path)
    capsys.readouterr()
    start = time.process_time()
    assert main(["perseus", "plan", str(profile), "--stages", "4", *extra]) == 2
    assert time.process_time() - start < 10  # refused before the solver runs
    line = _one_line(capsys.readouterr().err)
    assert "--unit-time" in line and "solver steps" in line, line


def test_bso_simulate_bounds_the_recurrences(capsys):
    with pytest.raises(SystemExit) as e:
        main(["bso", "simulate", "--workload", "cifar100", "--recurrences", "100000"])
    assert e.value.code == 2
    assert "--recurrences" in _one_line(capsys.readouterr().err)


def test_the_planning_work_estimate_follows_the_solver(tmp_path):
    """The bound is tied to the work: more microbatches or a finer quantum, more work."""
    from zeus_nb.optimizer.pipeline_frequency import load_profile
    from zeus_nb.optimizer.pipeline_frequency.solver import default_unit_time, planning_work

    prof = load_profile(_profile(tmp_path))
    unit = default_unit_time(prof)
    s8, w8 = planning_work(prof, 4, 8, unit)
    s16, w16 = planning_work(prof, 4, 16, unit)
    s8f, w8f = planning_work(prof, 4, 8, unit / 4)
    assert s16 > s8 and w16 > 3 * w8  # about the square of the microbatches
    assert s8f == pytest.approx(4 * s8) and w8f == pytest.approx(4 * w8)


# --- the class: every option of a command that computes here, at both ends of its range ------
def _inputs(tmp_path: Path) -> dict[str, str]:
    log = tmp_path / "log.csv"
    log.write_bytes(Path(str(LOG)).read_bytes())
    return {"profile": str(_profile(tmp_path)), "log": str(log), "out": str(tmp_path / "o.csv")}


QUICK = {
    ("zeus-nb", "bso", "simulate"): ["--workload", "cifar100"],
    ("zeus-nb", "demo"): [],
    ("zeus-nb", "perseus", "plan"): ["{profile}", "--stages", "4", "--microbatches", "8"],
    ("zeus-nb", "perseus", "synthetic"): ["{out}"],
    ("zeus-nb", "plo", "replay"): ["{log}"],
    ("zeus-nb", "tradeoff", "pareto"): ["--workload", "imagenet"],
    ("zeus-nb", "tradeoff", "savings"): [],
}


# The most CPU time one command may take at an end of an option's range. The slowest today,
# ``bso simulate --recurrences 10000``, takes about 3 s of CPU on a 2-core machine that runs
# Python at 10^7 additions in 1.6 s; it took 24 s while each recurrence re-read every run.
CPU_BOUND_S = 30


@pytest.mark.parametrize("path", sorted(QUICK), ids=" ".join)
def test_every_option_at_either_end_of_its_range_is_answered_in_bounded_time(
    path, tmp_path, capsys
):
    """Options whose work has no bound (a count up to 1e6, a quantum down to 1e-9 s) fail
    here: the command must finish or refuse within a bound on its work.

    The work is bounded in CPU seconds, which other processes cannot stretch (wall seconds
    beside busy processes were 2-4x the idle figure); the wall-clock deadline is only there to
    end a command that blocks or never returns."""
    from test_reliability_discovery import all_leaves, option_kind

    files = _inputs(tmp_path)
    base = [a.format(**files) for a in QUICK[path]]
    leaf = all_leaves()[path]
    tried = 0
    for action in leaf._actions:
        if option_kind(action) != "typed" or not action.option_strings:
            continue
        for value in action.type.extremes:
            argv = [*path[1:], *base]
            flag = action.option_strings[0]
            if flag in argv:  # replace the base value of this option
                i = argv.index(flag)
                argv[i + 1] = value
            else:
                argv += [flag, value]
            capsys.readouterr()
            start = time.process_time()
            with deadline(600, " ".join(argv)):
                try:
                    code = main(argv)
                except SystemExit as e:  # a usage error
                    code = e.code
            cpu_seconds = time.process_time() - start
            err = capsys.readouterr().err
            assert code in (0, 1, 2), (argv, code, err[-300:])
            assert "internal error" not in err, (argv, err)
            assert cpu_seconds < CPU_BOUND_S, (argv, cpu_seconds)
            tried += 1
    assert tried or not any(
        option_kind(a) == "typed" and a.type.extremes for a in leaf._actions if a.option_strings
    )
