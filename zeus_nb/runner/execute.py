"""The one papermill execution function behind ``zeus-nb tour``, ``sweep`` and ``course``.

Kernels talk to this process over local IPC sockets in a private temporary folder, not over
TCP: nothing listens on the network, and ipykernel has no reason to print its warning about
unencrypted TCP into every run's output. At the end an idle kernel is asked to shut down
without the SIGINT jupyter_client sends first by default (a kernel busy with a message logs
``KeyboardInterrupt caught in kernel`` to the terminal); a kernel still running a cell (one that
timed out) is interrupted as before, so the cell shows where it stopped. The kernel process's own
log lines go to a file beside its sockets and are quoted only when the kernel dies, so a run's
terminal output holds the notebooks' results and nothing of ipykernel's housekeeping.

A failing notebook never raises here: the outcome carries papermill's error (cell, exception
name and value) or the reason the kernel stopped.
"""

from __future__ import annotations

import os
import re
import signal
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zeus_nb.device.sim_wall import OwnClock
from zeus_nb.inputs.jsonschema_formats import skip_iri_grammar
from zeus_nb.inputs.registry import system_read
from zeus_nb.runner import kernels
from zeus_nb.utils.files import writes_itself
from zeus_nb.utils.threads import thread_environment

KERNEL = "python3"


@dataclass
class Execution:
    """What happened to one papermill execution."""

    ename: str = ""  # exception name of the failing cell (empty: no cell failed)
    evalue: str = ""
    cell_source: str = ""  # source of the failing cell
    exec_count: int | None = None
    problem: str = ""  # the kernel died, a cell timed out, the notebook was unreadable

    @property
    def ok(self) -> bool:
        return not (self.ename or self.problem)

    @property
    def error(self) -> str:
        """One line for reports: ``Name: value (cell N)``, the problem, or empty.

        Only the value's first line is kept (a dependency's dump, torchrun's included, stays in
        the executed notebook, where the failing cell shows it in full).
        """
        if self.ename:
            return f"{self.ename}: {first_line(self.evalue)} (cell {self.exec_count})"
        return first_line(self.problem)


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
LINE_WIDTH = 400  # characters of an error a report line keeps


def first_line(text: str, width: int = LINE_WIDTH) -> str:
    """The first non-empty line of ``text``, without colour codes, spaces collapsed, at most
    ``width`` characters (cut with an ellipsis)."""
    for line in _ANSI.sub("", text or "").splitlines():
        line = " ".join(line.split())
        if line:
            return line if len(line) <= width else line[: width - 1] + "…"
    return ""


def _quiet_shutdown(running: dict[str, Any], log: Any = None) -> type:
    """``AsyncKernelManager`` that interrupts at shutdown only while ``running["cell"]``.

    The kernel process's own stderr (ipykernel's log lines, not cell output) goes to ``log``
    when given: it is shown only if the kernel dies, never mixed into a run's terminal output.
    Without ``OMP_NUM_THREADS`` of its own, the kernel starts with the thread count of a small
    model (:func:`zeus_nb.utils.threads.thread_environment`): torch's default of one thread per
    core makes the notebooks' tiny models several times slower on a machine other work shares.
    A python kernel of this interpreter is forked from a process that imported the heavy
    modules once (:mod:`zeus_nb.runner.kernels`).
    """
    from jupyter_client.manager import AsyncKernelManager

    class QuietShutdownKernelManager(AsyncKernelManager):
        async def _async_interrupt_kernel(self) -> None:
            if running["cell"] or not self.shutting_down:
                await super()._async_interrupt_kernel()

        async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:
            if log is not None:
                kw["stderr"] = log
            if isinstance(kw.get("env"), dict):  # threads for small models, unless set
                thread_environment(kw["env"])
            forked = kernels.launch(kernel_cmd, kw)
            p = self.provisioner  # what LocalProvisioner.launch_kernel keeps of a process
            if forked is None:
                await super()._async_launch_kernel(kernel_cmd, **kw)
            else:
                p.process, p.pid, p.pgid, p.cwd = forked, forked.pid, forked.pid, kw.get("cwd")
                self._reconcile_connection_info(p.connection_info)
            # the cell limit's clock reads this process's waits for a CPU, and signals it
            running["pid"], running["pgid"] = getattr(p, "pid", None), getattr(p, "pgid", None)

    return QuietShutdownKernelManager


class CellTimeoutError(Exception):
    """A cell ran past its limit in the kernel's own time (:class:`_CellLimit`)."""


#: ``--timeout``'s help where it limits cells (``tour``, ``sweep``): what :class:`_CellLimit` counts
TIMEOUT_HELP = (
    "seconds per cell, in the kernel's own time (waits for a CPU not counted; default: none)"
)
GRACE_S = 10.0  # own seconds an interrupted cell gets to stop before its kernel is ended
POLL_S = 0.1  # s between the limit's reads of the kernel's clock


class _CellLimit:
    """A cell's time limit counted in the kernel's own time: real time less the kernel's waits
    for a CPU (its main thread's, from Linux's schedstat; plain real time where Linux does not
    say). On a busy machine a cell that takes 2 s on an idle one may take 8 s of real time, and
    a grader or a sweep must not call that a timeout; a cell that loops or sleeps still reaches
    the limit. Past it the kernel is interrupted, as nbclient's own timeout does, and ended if
    the cell does not stop within :data:`GRACE_S`; the run then stops with
    :class:`CellTimeoutError` at the end of that cell."""

    def __init__(self, limit: float, running: dict[str, Any]):
        self.limit, self.running = limit, running
        self.fired = False
        self._start: tuple[float, float] | None = None  # (monotonic, waited) at the cell's start
        self._own: OwnClock | None = None  # the kernel's clock
        self._lock, self._stop = threading.Lock(), threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True, name="zeus-nb-cell-limit")
        self._thread.start()

    def _clock(self) -> tuple[float, float]:
        pid = self.running.get("pid")
        if not pid:
            return time.monotonic(), 0.0
        if self._own is None or self._own.pid != pid:  # the kernel (re)started
            self._own = OwnClock(pid)
        return self._own.read()

    def _own_since(self, start: tuple[float, float]) -> float:
        now, waited = self._clock()
        return (now - start[0]) - max(0.0, waited - start[1])

    def cell_started(self) -> None:
        clock = self._clock()
        with self._lock:
            self._start = clock

    def cell_done(self) -> None:
        """Raises :class:`CellTimeoutError` where the cell ran past its limit (this stops the
        run: nbclient lets a hook's error through)."""
        with self._lock:
            self._start = None
        if self.fired:
            raise CellTimeoutError(self.message())

    def message(self) -> str:
        return (
            f"a cell timed out after {self.limit:g} s of the kernel's own time (real time less "
            "its waits for a CPU)"
        )

    def _signal(self, sig: int) -> None:
        pid, pgid = self.running.get("pid"), self.running.get("pgid")
        try:
            if pgid and hasattr(os, "killpg"):
                os.killpg(pgid, sig)  # as jupyter_client signals a kernel: its process group
            elif pid:
                os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def _watch(self) -> None:
        while not self._stop.wait(POLL_S):
            with self._lock:
                start = self._start
            if start is None or self._own_since(start) <= self.limit:
                continue
            self.fired = True
            self._signal(signal.SIGINT)
            interrupted = self._clock()
            while not self._stop.wait(POLL_S):
                with self._lock:
                    if self._start is None:
                        break  # the cell stopped
                if self._own_since(interrupted) > GRACE_S:
                    self._signal(signal.SIGKILL)  # nbclient then finds the kernel dead
                    break
            return

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


@system_read("the last lines of a kernel's own log, shown as text")
def _tail(path: Path, lines: int = 5) -> str:
    """The last lines of the kernel's log, for a report of why it stopped."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""
    return " | ".join(text.splitlines()[-lines:])


def _ipc_config(folder: str) -> Any:
    """nbclient configuration: the kernel's sockets are files in ``folder``."""
    from traitlets.config import Config

    config = Config()
    config.KernelManager.transport = "ipc"
    config.KernelManager.ip = str(Path(folder) / "kernel")
    return config


def _files_in_place() -> None:
    """Make papermill read and write local files without switching folders.

    papermill reads and writes each local file inside ``chdir(folder)``, the folder its run
    began in, which it keeps in one handler for the whole process, then switches back. Runs in
    threads (``course grade`` and ``course verify`` run two at once) interleave those switches
    and the folder each run stores and restores: a run then switched to the folder of a run
    long over (a busy suite's grading test started a student's kernel in another test's
    folder, and a folder since deleted would fail the write), and any thread resolving a
    relative path meanwhile resolved it there. :func:`execute` hands papermill absolute paths
    only, so the handler keeps no folder."""
    from papermill.iorw import papermill_io

    local = papermill_io.get_handler(os.sep)  # the handler of every local path
    if vars(local).get("cwd") is not _no_folder:
        # papermill's own attribute, None: "stay where you are" (papermill.utils.chdir)
        local.cwd, local._cwd = _no_folder, None


def _no_folder(new_path: Any) -> None:
    """papermill's ``LocalHandler.cwd``, the folder ignored (see :func:`_files_in_place`)."""
    return None


@writes_itself("a kernel's live log, streamed while it runs")
def execute(
    notebook: Any,
    output: str | Path,
    parameters: Mapping[str, Any] | None = None,
    cwd: str | Path | None = None,
    kernel_name: str = KERNEL,
    timeout: float | None = None,
    progress: bool = False,
) -> Execution:
    """Run ``notebook`` (a path or an ``nbformat`` node) into ``output`` with papermill.

    Paths may be relative to the current directory, which this never changes. ``cwd`` (the
    kernel's folder) defaults to the output's folder; ``timeout`` is per cell, in seconds of the
    kernel's own time, its waits for a CPU not counted (None: none; :class:`_CellLimit`).
    The environment the kernel inherits is the caller's (see
    :func:`zeus_nb.utils.environ.temp_environ`).
    """
    skip_iri_grammar()
    import papermill
    from papermill.exceptions import PapermillExecutionError

    _files_in_place()

    # Paths are made absolute, and the kernel gets its folder through nbclient's resources rather
    # than papermill's ``cwd``: papermill chdirs the whole process, which races between threads
    # (``course verify -j 2``) and left the caller in another folder.
    out = Path(output).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    source = notebook if not isinstance(notebook, str | Path) else str(Path(notebook).resolve())
    running: dict[str, Any] = {"cell": False}  # whether a cell is executing (nbclient's hooks)
    limit = _CellLimit(timeout, running) if timeout is not None else None

    def started(**_: Any) -> None:
        running["cell"] = True
        if limit is not None:
            limit.cell_started()

    def finished(**_: Any) -> None:
        running["cell"] = False
        if limit is not None:
            limit.cell_done()

    with tempfile.TemporaryDirectory(prefix="zeus-nb-kernel-") as sockets:
        log_path = Path(sockets) / "kernel.log"
        log = log_path.open("w", encoding="utf-8")
        try:
            papermill.execute_notebook(
                source,
                str(out),
                parameters=dict(parameters or {}),
                kernel_name=kernel_name,
                resources={"metadata": {"path": str(Path(cwd or out.parent).resolve())}},
                progress_bar=progress,
                execution_timeout=None,  # the limit is _CellLimit's, in the kernel's own time
                config=_ipc_config(sockets),
                kernel_manager_class=_quiet_shutdown(running, log),
                on_cell_start=started,
                on_cell_executed=finished,
            )
        except PapermillExecutionError as e:
            return Execution(e.ename, e.evalue, e.source, e.exec_count)
        except Exception as e:  # kernel died, timeout, bad notebook: report and go on
            if limit is not None and limit.fired:  # its own error, or the kernel it ended
                return Execution(problem=f"CellTimeoutError: {limit.message()}")
            lines = str(e).strip().splitlines()
            problem = f"{type(e).__name__}: {lines[0] if lines else ''}".strip()
            log.close()
            kernel_said = _tail(log_path)
            return Execution(
                problem=problem + (f" (kernel log: {kernel_said})" if kernel_said else "")
            )
        finally:
            log.close()
            if limit is not None:
                limit.close()
    return Execution()
