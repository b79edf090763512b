"""Warm kernels (``zeus_nb.runner.kernels``): a kernel forked from a zygote that imported the
heavy modules once starts as a cold kernel does (folder, path, arguments, environment, signals,
session), fails as one does (a cell that times out, a kernel that dies), and goes away with the
process that asked for it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import nbformat
import pytest
from processes import descendants

from zeus_nb.runner import kernels
from zeus_nb.runner.execute import execute

PROBE = """import json, os, signal, sys
print(json.dumps({
    "cwd": os.getcwd(), "path": sys.path, "argv0": os.path.basename(sys.argv[0]),
    "args": sys.argv[1:2], "var": os.environ.get("ZEUS_NB_PROBE"),
    "threads": os.environ.get("OMP_NUM_THREADS"),
    "parent_pid": int(os.environ["JPY_PARENT_PID"]) == os.getppid(),
    "sigchld": signal.getsignal(signal.SIGCHLD) == signal.SIG_DFL,
    "sigint": signal.getsignal(signal.SIGINT) is signal.default_int_handler,
    "own_session": os.getsid(0) == os.getpid(),
    "zeus_nb_imported": "zeus_nb" in sys.modules,
    "ppid": os.getppid(),
}))"""


def _notebook(*cells: str):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    return nb


def _probe(tmp_path, name: str, warm: bool, monkeypatch) -> dict:
    monkeypatch.setenv("ZEUS_NB_WARM_KERNELS", "1" if warm else "0")
    monkeypatch.setenv("ZEUS_NB_PROBE", name)
    out = tmp_path / f"{name}.ipynb"
    assert execute(_notebook(PROBE), out, cwd=tmp_path).ok
    cell = nbformat.read(out, as_version=4).cells[0]
    return json.loads("".join(o["text"] for o in cell.outputs if o.get("name") == "stdout"))


def test_only_this_interpreters_ipykernel_is_forked(tmp_path):
    assert kernels._is_ipykernel([sys.executable, "-m", "ipykernel_launcher", "-f", "c.json"])
    other_venv = tmp_path / "python"  # another environment: the same interpreter, linked
    other_venv.symlink_to(os.path.realpath(sys.executable))
    assert not kernels._is_ipykernel([str(other_venv), "-m", "ipykernel_launcher", "-f", "c"])
    assert not kernels._is_ipykernel(["/usr/bin/python3-other", "-m", "ipykernel_launcher"])
    assert not kernels._is_ipykernel([sys.executable, "-m", "other_kernel", "-f", "c.json"])
    assert not kernels._is_ipykernel(["ir", "--vanilla"])


def test_kernels_start_the_usual_way_when_off_or_given_a_pipe(monkeypatch):
    cmd = [sys.executable, "-m", "ipykernel_launcher", "-f", "c.json"]
    before = dict(kernels._zygotes)  # this process's, from earlier tests
    monkeypatch.setenv("ZEUS_NB_WARM_KERNELS", "0")
    assert not kernels.enabled() and kernels.launch(cmd, {}) is None
    monkeypatch.setenv("ZEUS_NB_WARM_KERNELS", "1")
    assert kernels.launch(cmd, {"stdout": subprocess.PIPE}) is None  # only Popen makes pipes
    assert kernels._zygotes == before  # and no zygote was started for either


def test_a_kernel_that_is_gone_reads_ended():
    gone = kernels.ForkedKernel(2**22 + 1)  # beyond Linux's pid range: no such process
    alive = kernels.ForkedKernel(os.getpid())
    assert gone.poll() == 0 and gone.wait(timeout=1) == 0 and alive.poll() is None
    gone.kill()  # a signal to an ended kernel is not an error


@pytest.mark.slow
def test_a_warm_kernel_starts_as_a_cold_one_would(tmp_path, monkeypatch):
    cold = _probe(tmp_path, "cold", False, monkeypatch)
    first = _probe(tmp_path, "first", True, monkeypatch)
    second = _probe(tmp_path, "second", True, monkeypatch)
    assert cold["ppid"] == os.getpid()  # started by this process, the usual way
    zygote = first["ppid"]
    assert zygote != os.getpid() and second["ppid"] == zygote  # one zygote, two kernels
    assert (cold["var"], first["var"], second["var"]) == ("cold", "first", "second")
    for warm in (first, second):
        for key in cold:
            if key not in ("ppid", "var"):
                assert warm[key] == cold[key], (key, warm[key], cold[key])
    assert cold["parent_pid"] and cold["own_session"] and not cold["zeus_nb_imported"]


@pytest.mark.slow
@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_timeouts_deaths_and_errors_read_as_in_a_cold_kernel(tmp_path, monkeypatch, warm):
    monkeypatch.setenv("ZEUS_NB_WARM_KERNELS", "1" if warm else "0")
    cases = {
        "timeout": (_notebook("import time; time.sleep(120)"), 2, "CellTimeoutError"),
        "dies": (_notebook("import os; os._exit(3)"), None, "DeadKernelError"),
        "raises": (_notebook("1 / 0"), None, "ZeroDivisionError"),
    }
    for name, (nb, timeout, expected) in cases.items():
        got = execute(nb, tmp_path / f"{name}.ipynb", cwd=tmp_path, timeout=timeout)
        assert not got.ok and got.error.startswith(expected), (name, got.error)
    assert execute(_notebook("print(1)"), tmp_path / "after.ipynb", cwd=tmp_path).ok


SLEEPER = """
import nbformat, sys
from zeus_nb.runner.execute import execute
nb = nbformat.v4.new_notebook()
nb.cells = [nbformat.v4.new_code_cell("import time; time.sleep(600)")]
execute(nb, sys.argv[1])
"""
#: A parent that adopts orphans (as a CI harness or a container's init may): the client's
#: children do not go to process 1 when it ends, so a kernel's watch for process 1 never fires.
SUBREAPER = """
import ctypes, subprocess, sys
ctypes.CDLL(None).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER
client = subprocess.Popen(sys.argv[1:])
print(client.pid, flush=True)
sys.stdin.read()  # until the test is done: orphans stay here, reaped or not
"""


def _gone(pids, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not any(kernels._alive(p) for p in pids):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.slow
@pytest.mark.parametrize(
    ("adopter", "wanted"),
    [("init", 2), ("subreaper", 2), ("subreaper", 1)],
    ids=["kernel-running", "kernel-running-subreaper", "zygote-importing-subreaper"],
)
def test_a_zygote_and_its_kernels_end_with_the_process_that_asked(tmp_path, adopter, wanted):
    """Killed while its kernel runs, or while its zygote still imports (the zygote must not
    take its adopter for the parent it watches)."""
    env = {**os.environ, "ZEUS_NB_WARM_KERNELS": "1"}
    client = [sys.executable, "-c", SLEEPER, str(tmp_path / "o.ipynb")]
    if adopter == "init":
        proc = subprocess.Popen(client, env=env)
        pid = proc.pid
    else:
        proc = subprocess.Popen(
            [sys.executable, "-c", SUBREAPER, *client], env=env, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        pid = int(proc.stdout.readline())
    found: dict = {}
    try:
        end = time.monotonic() + 120
        while time.monotonic() < end:  # the zygote, then the kernel it forked
            found = descendants(pid)
            if len([c for c in found.values() if "zeus_nb.runner.kernels" in c]) >= wanted:
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"no zygote (and kernel) under the client: {found}")
        os.kill(pid, signal.SIGKILL)  # no shutdown, no atexit: the zygote sees its parent gone
        assert _gone(found, 20), {p: kernels._alive(p) for p in found}
    finally:
        for p in [*found, pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)
        proc.kill()
        proc.wait()


@pytest.mark.slow
def test_an_idle_zygote_ends_and_the_next_kernel_gets_a_new_one(tmp_path, monkeypatch):
    monkeypatch.setenv("ZEUS_NB_WARM_KERNELS", "1")
    monkeypatch.setenv("PROBE_IDLE_ZYGOTE", "1")  # a zygote of its own
    monkeypatch.setattr(kernels, "IDLE_S", 1.0)
    assert execute(_notebook("print(1)"), tmp_path / "a.ipynb", cwd=tmp_path).ok
    (zygote,) = [z for k, z in kernels._zygotes.items() if ("PROBE_IDLE_ZYGOTE", "1") in k]
    assert zygote.proc.wait(timeout=30) == 0  # idle, no kernel alive: it ended by itself
    first = zygote.proc.pid
    assert execute(_notebook("print(2)"), tmp_path / "b.ipynb", cwd=tmp_path).ok
    (again,) = [z for k, z in kernels._zygotes.items() if ("PROBE_IDLE_ZYGOTE", "1") in k]
    assert again.proc.pid != first
