"""Training subprocesses, their output echoed line by line, and the forkrun launcher kept for
this process's later jobs.

A forkrun job (:mod:`zeus_nb.train.forkrun`) pays for two imports of PyTorch before its ranks
start, the launcher's (torch's elastic agent) and its fork server's (PyTorch, torch.distributed
and the entry points): about 6 s of CPU on this project's 2-core machines. A notebook that
launches several jobs (06 profiles, then runs two pipelines; 05 runs DDP, then FSDP) pays it
once: the launcher started for the first job stays (``forkrun --serve``) and runs each later job
that has the same interpreter, environment and working directory, its ranks forked afresh from
the same fork server. A job with another gets a new launcher; a timeout or an interrupt stops the
launcher with its ranks, and the next job starts a new one. The launcher ends with this process
(its input closes), or after :data:`IDLE_S` without a job.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import queue
import signal
import subprocess
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

FORKRUN = ("-m", "zeus_nb.train.forkrun")
#: a kept launcher with no job for this long ends, its memory (PyTorch imported twice, about 1.2 GB
#: on this project's machines) freed; a notebook's consecutive cells launch well within it
IDLE_S = 120.0
IDLE_EXIT = 75  # its exit status then (EX_TEMPFAIL): a job sent just then goes to a new one


class Overran(Exception):
    """The run did not end by its deadline and was stopped (its process group with it)."""


def stream(
    cmd: list[str], env: dict[str, str], tail: deque[str], echo: bool, deadline: float | None
) -> int:
    """Run ``cmd`` to its end, its merged output echoed and kept in ``tail``; its exit status.

    A forkrun job runs in the kept launcher (see the module doc), any other command in a process
    of its own. The child leads its own process group, so a deadline (:class:`Overran`) or an
    interrupt stops every process it started."""
    if tuple(cmd[1:3]) == FORKRUN:
        return _kept_run(cmd, env, tail, echo, deadline)
    proc = _start(cmd, env)
    reader, lines = _reader(proc)
    try:
        code = _copy(lines, tail, echo, deadline, None)
        if code is None:
            code = proc.wait(timeout=_left(deadline))
    except BaseException:  # Overran, or KeyboardInterrupt in a notebook: no stray workers
        _stop(proc, reader)
        raise
    reader.join()
    proc.stdout.close()
    return code


@dataclass
class _Launcher:
    """A running ``forkrun --serve`` and what it was started with."""

    proc: subprocess.Popen
    key: tuple
    token: str
    reader: threading.Thread
    lines: queue.Queue
    busy: threading.Lock = field(default_factory=threading.Lock)


_kept: _Launcher | None = None
_kept_lock = threading.Lock()


def _kept_run(
    cmd: list[str], env: dict[str, str], tail: deque[str], echo: bool, deadline: float | None
) -> int:
    """``cmd``'s job in the kept launcher, started (again) where none fits. A launcher that
    left idle just as the job came never read it: the job goes to a new one."""
    key = (cmd[0], os.getcwd(), tuple(sorted(env.items())))
    resent = False
    while True:
        launcher = _launcher_for(key, env)
        with launcher.busy:  # one job at a time (a second thread's job waits for this one)
            try:
                sent = _send(launcher, cmd[3:])
                code = _copy(launcher.lines, tail, echo, deadline, launcher.token) if sent else None
            except BaseException:
                _forget(launcher)
                raise
        if code is not None:
            return code
        status = launcher.proc.wait()  # it ended without finishing the job: why?
        _forget(launcher)
        if status != IDLE_EXIT or resent:
            return status or 1
        resent = True


def _launcher_for(key: tuple, env: dict[str, str]) -> _Launcher:
    """The kept launcher if it was started with ``key`` and runs, else a new one."""
    global _kept
    with _kept_lock:
        launcher = _kept
        if launcher is not None and launcher.key == key and launcher.proc.poll() is None:
            return launcher
    close_kept()
    token = f"zeus-nb-forkrun-done-{uuid.uuid4().hex}"
    serve = [key[0], *FORKRUN, "--serve", token, f"{IDLE_S:g}"]
    proc = _start(serve, env, stdin=subprocess.PIPE)
    reader, lines = _reader(proc)
    with _kept_lock:
        _kept = _Launcher(proc, key, token, reader, lines)
        return _kept


def _send(launcher: _Launcher, args: list[str]) -> bool:
    """Hand ``args`` to ``launcher``; False when it has ended (its input is closed)."""
    try:
        launcher.proc.stdin.write(json.dumps(args) + "\n")
        launcher.proc.stdin.flush()
    except (BrokenPipeError, ValueError):
        return False
    return True


def close_kept() -> None:
    """Stop the kept launcher, if any: its input closes, so it ends after its job."""
    global _kept
    launcher, _kept = _kept, None
    if launcher is None:
        return
    with contextlib.suppress(OSError, ValueError):
        launcher.proc.stdin.close()
    try:
        launcher.proc.wait(timeout=5.0)
    except subprocess.TimeoutExpired:
        _signal_group(launcher.proc.pid, signal.SIGKILL)
        launcher.proc.wait()
    launcher.reader.join(timeout=5.0)


def _forget(launcher: _Launcher) -> None:
    """Stop ``launcher`` and its ranks now (a deadline passed, an interrupt came, it died)."""
    global _kept
    with _kept_lock:
        if _kept is launcher:
            _kept = None
    _stop(launcher.proc, launcher.reader)


atexit.register(close_kept)


def _start(cmd: list[str], env: dict[str, str], stdin=None) -> subprocess.Popen:
    return subprocess.Popen(
        cmd,
        env=env,
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
        start_new_session=True,
    )


def _reader(proc: subprocess.Popen) -> tuple[threading.Thread, queue.Queue]:
    """A helper thread copying ``proc``'s output lines into a queue (then None at its end), so
    that this thread stays free to keep a deadline even when a child hangs with the pipe open."""
    lines: queue.Queue[str | None] = queue.Queue()
    reader = threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True)
    reader.start()
    return reader, lines


def _copy(
    lines: queue.Queue, tail: deque[str], echo: bool, deadline: float | None, token: str | None
) -> int | None:
    """Echo and keep lines until the end of the output (None) or the line ``<token> <status>``
    (that status); :class:`Overran` at ``deadline``."""
    try:
        while (line := lines.get(timeout=_left(deadline))) is not None:
            if token is not None and line.startswith(token):
                return int(line.split()[1])
            tail.append(line.rstrip("\n"))
            if echo:
                print(line, end="", flush=True)
    except queue.Empty:
        raise Overran from None
    return None


def _pump(stream, lines: queue.Queue) -> None:
    """Copy ``stream``'s lines into ``lines``, then None at end of file."""
    try:
        for line in stream:
            lines.put(line)
    finally:
        lines.put(None)


def _left(deadline: float | None) -> float | None:
    """Seconds until ``deadline`` (None: no limit); 0 once it has passed."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def _stop(proc: subprocess.Popen, reader: threading.Thread, grace: float = 5.0) -> None:
    """SIGTERM the child's process group (torchrun forwards it to its workers), then SIGKILL
    whatever is left of the group, so no worker keeps running or holds the output pipe open."""
    _signal_group(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        log.warning("training process %d ignored SIGTERM for %g s; killing it", proc.pid, grace)
    _signal_group(proc.pid, signal.SIGKILL)
    proc.wait()
    reader.join(timeout=grace)
    if not reader.is_alive():  # closing a pipe another thread still reads could block
        proc.stdout.close()
        if proc.stdin is not None:
            with contextlib.suppress(OSError, ValueError):
                proc.stdin.close()


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone
        os.killpg(pgid, sig)
