"""The one papermill runner: kernel housekeeping stays out of the terminal, deaths are explained."""

import time

import nbformat
import pytest

from zeus_nb.runner.execute import execute

pytestmark = pytest.mark.slow


def notebook(*sources: str):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "py"}
    return nb


def test_kernel_process_log_lines_do_not_reach_the_terminal(tmp_path, capfd):
    nb = notebook("import sys\nsys.__stderr__.write('kernel housekeeping line\\n')\nx = 1")
    outcome = execute(nb, tmp_path / "out.ipynb")
    assert outcome.ok, outcome.error
    captured = capfd.readouterr()
    assert "kernel housekeeping line" not in captured.out + captured.err


def test_a_dying_kernel_is_reported_with_its_last_log_lines(tmp_path):
    nb = notebook(
        "import os, sys\nsys.__stderr__.write('out of device memory, going down\\n')\n"
        "sys.__stderr__.flush()\nos._exit(3)"
    )
    outcome = execute(nb, tmp_path / "out.ipynb")
    assert not outcome.ok
    assert "out of device memory, going down" in outcome.problem


@pytest.mark.parametrize("user", [None, "3"])
def test_kernels_start_with_the_threads_of_a_small_model_unless_told(tmp_path, monkeypatch, user):
    if user is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", user)
    expected = user or "1"
    nb = notebook(f"import os\nassert os.environ['OMP_NUM_THREADS'] == {expected!r}, os.environ")
    outcome = execute(nb, tmp_path / "out.ipynb")
    assert outcome.ok, outcome.error


def test_a_failure_is_reported_in_one_line_with_its_cell():
    """A report line keeps the error's first line; the notebook keeps the rest."""
    from zeus_nb.runner.execute import Execution

    dump = "training failed (exit status 1): zeus_nb.train.dp: error: no GPU\ncommand: x\n" + (
        "Traceback (most recent call last):\n" * 50
    )
    e = Execution("TrainingFailed", dump, "launch()", 6)
    assert e.error == "TrainingFailed: training failed (exit status 1): " + (
        "zeus_nb.train.dp: error: no GPU (cell 6)"
    )
    colour = Execution("ValueError", "\x1b[31m\n  bad   value \x1b[0m" + "x" * 1000, "", 2)
    assert colour.error.startswith("ValueError: bad value x") and "\x1b" not in colour.error
    assert len(colour.error) < 450 and colour.error.endswith("… (cell 2)")
    assert Execution(problem="DeadKernelError: died\nmore").error == "DeadKernelError: died"


def test_a_cell_limit_counts_the_kernels_own_time_not_its_waits_for_a_cpu(tmp_path, monkeypatch):
    """A cell that would end in time on an idle machine is not timed out on a busy one: here the
    kernel is made to have waited 90 % of the real time for a CPU, so a 2.5 s cell under a 1 s
    limit used 0.25 s of its own time (a wall-clock limit timed it out)."""
    from zeus_nb.runner import execute as ex

    class Starved:
        """The kernel's clock: 90 % of real time spent waiting for a CPU."""

        def __init__(self, pid: int):
            self.pid, self.start = pid, time.monotonic()

        def read(self) -> tuple[float, float]:
            now = time.monotonic()
            return now, 0.9 * (now - self.start)

    monkeypatch.setattr(ex, "OwnClock", Starved)
    nb = notebook("import time\ntime.sleep(2.5)\ndone = 1", "print('after', done)")
    outcome = execute(nb, tmp_path / "out.ipynb", timeout=1)
    assert outcome.ok, outcome.error
    assert "after 1" in str(nbformat.read(tmp_path / "out.ipynb", as_version=4).cells[1].outputs)


@pytest.mark.parametrize("ignores_ctrl_c", [False, True])
def test_a_cell_past_its_limit_stops_the_run_and_says_so(tmp_path, ignores_ctrl_c):
    """A cell that never ends (sleeping or spinning counts alike) is interrupted at the limit and
    the cells after it do not run; one that ignores Ctrl-C gets its kernel ended."""
    loop = (
        "while True:\n    try:\n        time.sleep(0.05)\n"
        "    except KeyboardInterrupt:\n        pass"
        if ignores_ctrl_c
        else "while True:\n    time.sleep(0.05)"
    )
    nb = notebook("import time", loop, "print('never')")
    t0 = time.monotonic()
    outcome = execute(nb, tmp_path / "out.ipynb", timeout=1)
    assert outcome.problem == (
        "CellTimeoutError: a cell timed out after 1 s of the kernel's own time (real time less "
        "its waits for a CPU)"
    )
    assert time.monotonic() - t0 < 120  # interrupted, or ended GRACE_S after
    cells = nbformat.read(tmp_path / "out.ipynb", as_version=4).cells
    assert "never" not in str(cells[2].get("outputs", []))


def test_runs_never_switch_this_process_folder_even_after_interleaved_runs(tmp_path, monkeypatch):
    """papermill switches the whole process to the folder its run began in for every local
    read and write, and keeps that folder in one handler per process; runs in threads (``course
    grade``) interleave the switches and the keeping, which left papermill holding the folder of
    a run long over: a busy suite's grading test then started a student's kernel in another
    test's folder. Nothing here switches folders, not even with papermill holding a folder since
    deleted, as interleaved runs leave it; a relative kernel folder resolves where the caller is."""
    import os

    from papermill.iorw import papermill_io

    gone = tmp_path / "a-run-long-over"
    handler = papermill_io.get_handler(os.sep)
    monkeypatch.delitem(vars(handler), "cwd", raising=False)  # papermill's own, as before a run
    handler.cwd(str(gone))  # as two interleaved runs leave it
    (tmp_path / "here" / "student").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "here")
    switches: list[str] = []
    real_chdir = os.chdir
    monkeypatch.setattr(os, "chdir", lambda path: switches.append(str(path)) or real_chdir(path))
    nb = notebook("import os\nprint(os.getcwd())")
    outcome = execute(nb, "out/run.ipynb", cwd="student")
    assert outcome.ok, outcome.error
    printed = nbformat.read(tmp_path / "here/out/run.ipynb", as_version=4).cells[0].outputs
    assert str(tmp_path / "here" / "student") in str(printed)
    assert switches == [] and os.getcwd() == str(tmp_path / "here")
