"""Warm kernels: notebook kernels forked from a process that imported the heavy modules once.

A notebook kernel spends most of its start importing: PyTorch, ``torch._dynamo`` (which the
first optimizer step imports), torchvision, pandas, matplotlib and ipykernel take about 4 s of
CPU, and a tour or a sweep starts one kernel per notebook. Here a *zygote* (one per process and
environment, started with the first kernel) imports them once and forks each kernel from
itself: the kernel then runs ``ipykernel_launcher`` exactly as the kernel spec says, in its own
session, folder, environment and standard streams, with nothing of the zygote's but those
imports (zeus-nb's own modules are dropped, so the notebook imports them afresh).

What differs from a cold kernel, and why it is allowed: the imported modules' warnings are not
shown again; kernels of one zygote share its string-hash seed (``PYTHONHASHSEED``; set
iteration order is then the same in each); numpy's global random state is reseeded in each
kernel, as a fresh import would seed it. A kernel's exit status is not known (the zygote is its
parent, not this process): one that ended reads 0.

Only on Linux, only for ``python -m ipykernel_launcher`` of this interpreter, and not with
``ZEUS_NB_WARM_KERNELS=0``; otherwise, and whenever the zygote cannot serve, the kernel starts
the usual way. A zygote ends when its parent process ends (its kernels follow, as any kernel
whose parent ends), or after IDLE_S seconds with no kernel alive and none asked for.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import importlib
import importlib.util
import json
import logging
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from typing import Any

from zeus_nb.inputs.env import env
from zeus_nb.inputs.registry import system_read

log = logging.getLogger(__name__)

#: What a zygote imports before forking kernels (each skipped where it is not installed).
PRELOAD = (
    "ipykernel.kernelapp",
    "numpy",
    "pandas",
    "torch",
    "torch._dynamo",
    "torchvision",
    "matplotlib.pyplot",
)
#: A zygote with no kernel alive ends after this long without a request (s).
IDLE_S = 30.0
#: How long the first kernel waits for its zygote's imports before starting cold (s).
READY_S = 120.0
#: Variables a kernel gets but the zygote's imports never read: kernels that differ only in
#: them share a zygote (the runner sets a record file and a backend per notebook; pytest names
#: the test running in PYTEST_CURRENT_TEST).
PER_KERNEL = ("ZEUS_NB_", "JPY_", "PYTEST_")
#: The backend ipykernel sets for a kernel without one, before any notebook imports matplotlib.
INLINE = "module://matplotlib_inline.backend_inline"
_HEADER = struct.Struct("!I")
PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent ends (Linux)
_libc = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None


def enabled() -> bool:
    """Whether kernels fork from a zygote here (Linux, unless ZEUS_NB_WARM_KERNELS is off)."""
    return sys.platform == "linux" and env("ZEUS_NB_WARM_KERNELS") is not False


class ForkedKernel:
    """What jupyter_client keeps of a kernel process (a ``Popen``'s calls), for a kernel this
    process did not start: alive while its pid is and is no zombie (its zygote reaps it
    within a second)."""

    stdin = stdout = stderr = None

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and not _alive(self.pid):
            self.returncode = 0
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        end = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if end is not None and time.monotonic() > end:
                raise subprocess.TimeoutExpired(str(self.pid), timeout or 0.0)
            time.sleep(0.01)
        return self.returncode or 0

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


@system_read("/proc/<pid>/stat (kernel)")
def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def launch(cmd: list[str], kw: dict[str, Any]) -> ForkedKernel | None:
    """Fork the kernel ``cmd`` with jupyter_client's launch arguments ``kw`` (env, cwd,
    stdout, stderr) from a zygote; None where it is to start the usual way."""
    if not enabled() or not _is_ipykernel(cmd):
        return None
    environ = dict(kw.get("env") or os.environ)
    key = tuple(sorted((k, v) for k, v in environ.items() if not k.startswith(PER_KERNEL)))
    request = {"args": cmd[3:], "env": environ, "cwd": str(kw.get("cwd") or os.getcwd())}
    fds = [_fileno(kw.get("stdout"), 1), _fileno(kw.get("stderr"), 2)]
    if min(fds) < 0:  # a pipe to be made for the kernel (subprocess.PIPE): only Popen makes it
        return None
    for _ in range(2):  # a zygote that just ended idle: once more with a new one
        zygote = _zygote(key, environ)
        if zygote is None:
            return None
        pid = zygote.fork(request, fds)
        if pid is not None:
            return ForkedKernel(pid)
        _forget(key, zygote)
    return None


def _is_ipykernel(cmd: list[str]) -> bool:
    if len(cmd) < 3 or cmd[1:3] != ["-m", "ipykernel_launcher"]:
        return False
    # paths compared as given, links not followed: another virtual environment's python is a
    # link to the same interpreter, with other packages
    exe = shutil.which(cmd[0]) or cmd[0]
    return os.path.abspath(exe) == os.path.abspath(sys.executable)


def _fileno(stream: Any, default: int) -> int:
    if stream is None:
        return default
    return stream if isinstance(stream, int) else stream.fileno()


class _Zygote:
    """One zygote process, its socket in a private folder."""

    def __init__(self, env: dict[str, str]):
        self.folder = tempfile.mkdtemp(prefix="zeus-nb-zygote-")
        self.path = os.path.join(self.folder, "s")
        zenv = {k: v for k, v in env.items() if not k.startswith(PER_KERNEL)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", __name__, self.path, str(IDLE_S), str(os.getpid())],
            env=zenv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # a zygote that fails to start: kernels start cold
            cwd=self.folder,
            start_new_session=True,  # a Ctrl-C is this process's to handle, as for kernels
        )
        ready, _, _ = select.select([self.proc.stdout], [], [], READY_S)
        line = self.proc.stdout.readline() if ready else b""  # type: ignore[union-attr]
        if line.strip() != b"ready":
            self.close()
            raise RuntimeError("the kernel zygote did not start")

    def fork(self, request: dict, fds: list[int]) -> int | None:
        """The forked kernel's pid; None where this zygote no longer serves."""
        if self.proc.poll() is not None:
            return None
        body = json.dumps(request).encode()
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(READY_S)
                s.connect(self.path)
                socket.send_fds(s, [_HEADER.pack(len(body))], fds)
                s.sendall(body)
                reply = s.recv(64)
        except OSError:
            return None
        return int(reply) if reply.strip().isdigit() else None

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        shutil.rmtree(self.folder, ignore_errors=True)


_zygotes: dict[tuple, _Zygote] = {}
_lock = threading.Lock()


def _zygote(key: tuple, env: dict[str, str]) -> _Zygote | None:
    with _lock:
        z = _zygotes.get(key)
        if z is not None and z.proc.poll() is None:
            return z
        if z is not None:
            z.close()
        try:
            z = _zygotes[key] = _Zygote(env)
        except (OSError, RuntimeError) as e:
            log.debug("kernels start cold: %s", e)
            _zygotes.pop(key, None)
            return None
        return z


def _forget(key: tuple, zygote: _Zygote) -> None:
    with _lock:
        if _zygotes.get(key) is zygote:
            del _zygotes[key]
    zygote.close()


@atexit.register
def close() -> None:
    """End this process's zygotes (their kernels, if any still run, end with them)."""
    with _lock:
        for z in _zygotes.values():
            z.close()
        _zygotes.clear()


# --- the zygote ------------------------------------------------------------------------------
def serve(path: str, idle_s: float, parent: int) -> None:
    """Import PRELOAD, then fork a kernel for each request on the socket at ``path``, while
    the process ``parent`` that started this one lives (checked each second)."""
    os.environ.setdefault("MPLBACKEND", INLINE)  # as ipykernel would, before the imports
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(8)
    listener.settimeout(1.0)
    print("ready", flush=True)
    kernels: set[int] = set()
    last = time.monotonic()
    while os.getppid() == parent:
        kernels = {pid for pid in kernels if not _reaped(pid)}
        if not kernels and time.monotonic() - last > idle_s:
            break
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        last = time.monotonic()
        with conn:
            conn.settimeout(10.0)
            request, fds = _receive(conn)
            sys.stdout.flush()
            sys.stderr.flush()
            zygote = os.getpid()
            pid = os.fork()
            if pid == 0:
                _become_kernel(listener, conn, request, fds, zygote)
            for fd in fds:
                os.close(fd)
            kernels.add(pid)
            conn.sendall(str(pid).encode())
    listener.close()
    with contextlib.suppress(OSError):
        os.unlink(path)


def _reaped(pid: int) -> bool:
    """Whether the kernel ``pid`` ended (and is now reaped: its CPU time counts in this
    process's children's, and so in the runner's, as a cold kernel's does)."""
    try:
        return os.waitpid(pid, os.WNOHANG)[0] == pid
    except ChildProcessError:
        return True


def _receive(conn: socket.socket) -> tuple[dict, list[int]]:
    head, fds, _, _ = socket.recv_fds(conn, _HEADER.size, 2)
    (size,) = _HEADER.unpack(head)
    body = b""
    while len(body) < size:
        chunk = conn.recv(size - len(body))
        if not chunk:
            raise ConnectionError("request cut short")
        body += chunk
    return json.loads(body), fds


def _become_kernel(
    listener: socket.socket, conn: socket.socket, request: dict, fds: list[int], zygote: int
):
    """In the forked child: the kernel's session, streams, folder and environment, then
    ``python -m ipykernel_launcher`` with the kernel spec's arguments. Never returns.

    The kernel ends with the zygote, as any kernel with its parent: by the kernel's signal
    that its parent ended, set before anything else (ipykernel's own watch of its parent
    misses a parent that ended before the watch began, under a subreaper)."""
    code = 1
    try:
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # type: ignore[union-attr]
        if os.getppid() != zygote:  # ended before the signal was set
            os._exit(1)
        listener.close()
        conn.close()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(fds[0], 1)
        os.dup2(fds[1], 2)
        for fd in (null, *fds):
            os.close(fd)
        cwd = request["cwd"]
        os.chdir(cwd)
        env = dict(request["env"])
        env["JPY_PARENT_PID"] = str(os.getppid())  # the kernel ends when this zygote does
        os.environ.clear()
        os.environ.update(env)
        for name in [m for m in sys.modules if m == "zeus_nb" or m.startswith("zeus_nb.")]:
            del sys.modules[name]
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed()
        del sys.path[0]  # this module's folder: ipykernel_launcher drops ``python -m``'s ''
        launcher = importlib.import_module("ipykernel.kernelapp")
        sys.argv = [importlib.util.find_spec("ipykernel_launcher").origin, *request["args"]]
        # ipykernel read JPY_PARENT_PID when the zygote imported it: its parent is given here
        launcher.launch_new_instance(parent_handle=os.getppid())
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
    except BaseException:  # noqa: BLE001 - the kernel's own stderr says why
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


if __name__ == "__main__":
    serve(sys.argv[1], float(sys.argv[2]), int(sys.argv[3]))
