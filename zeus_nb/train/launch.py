"""Start a training entry point from Python or a notebook and get its results back.

DDP and FSDP need one process per GPU, which a notebook kernel cannot be, so :func:`launch` runs
``python -m zeus_nb.train.forkrun --nproc_per_node N zeus_nb.train.<mode>`` (torchrun's job, its
ranks forked from a process that imported PyTorch once, kept for this process's later jobs:
:mod:`zeus_nb.train.launcher`; or ``python -m zeus_nb.train.single``) as a subprocess, echoes its
output line by line into the cell, and returns the results JSON as a dictionary.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import tempfile
import time
from collections import deque
from dataclasses import fields
from pathlib import Path
from typing import Any

from zeus_nb.errors import InputError, ZeusNbError
from zeus_nb.inputs.registry import not_input
from zeus_nb.inputs.table import read_json
from zeus_nb.train import MODES, launcher
from zeus_nb.train.config import OPTIMIZER_OPTIONS, TrainConfig
from zeus_nb.utils.threads import thread_environment

_OFF_SWITCHES = {
    "power_limit_optimizer": "--no-power-limit-optimizer",
    "adaptive": "--exhaustive",
    "progress": "--no-progress",
}


log = logging.getLogger(__name__)


class TrainingFailed(ZeusNbError):
    """The training subprocess exited with an error."""


class TrainingTimedOut(TrainingFailed):
    """The training subprocess ran past ``launch(timeout=...)`` and was stopped."""


def command(mode: str, nproc: int = 1, **options: Any) -> list[str]:
    """The command line that runs ``mode`` with ``options`` (TrainConfig field names)."""

    if mode not in MODES:
        raise InputError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if nproc < 1:
        raise InputError(f"nproc must be >= 1, got {nproc}")
    known = {f.name: f for f in fields(TrainConfig)}
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise InputError(f"unknown training options {unknown}; see TrainConfig for the fields")
    if mode != "single" and "gpu" in options:
        raise InputError("gpu= applies to single-process runs; DDP/FSDP use one GPU per rank")
    TrainConfig(**options)  # validate values here, with a clear error, not in the subprocess

    idle = [f for f in OPTIMIZER_OPTIONS if f in options]
    if options.get("power_limit_optimizer") is False and idle:
        raise InputError(
            f"{', '.join(idle)} apply only with the power-limit optimizer; leave them out or "
            "drop power_limit_optimizer=False"
        )
    flags: list[str] = []
    for name, value in options.items():
        if name in _OFF_SWITCHES:  # boolean fields that default to True
            flags += [] if value else [_OFF_SWITCHES[name]]
        elif value is not None:
            flags += ["--" + name.replace("_", "-"), str(value)]
    if mode == "single":
        return [sys.executable, "-m", "zeus_nb.train.single", *flags]
    return [
        sys.executable,
        "-m",
        "zeus_nb.train.forkrun",
        "--nproc_per_node",
        str(nproc),
        f"zeus_nb.train.{mode}",
        *flags,
    ]


def launch(
    mode: str = "dp",
    nproc: int = 2,
    echo: bool = True,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Train in subprocess(es) and return the results dictionary.

    Args:
        mode: ``single``, ``dp`` or ``fsdp``.
        nproc: processes (GPUs) for dp/fsdp.
        echo: print the training output as it comes.
        env: extra environment variables (e.g. ``{"ZEUS_NB_MAX_SLOWDOWN": "1.2"}``).
        timeout: seconds before the run is stopped (all its processes) with
            :class:`TrainingTimedOut`; None waits for ever.
        **options: :class:`~zeus_nb.train.config.TrainConfig` fields, e.g. ``data="synthetic",
            backend="sim", epochs=2``. The progress bar is off unless ``progress=True``.
    """
    options.setdefault("progress", False)
    with tempfile.TemporaryDirectory(prefix="zeus-nb-train-") as tmp:
        results = Path(options.get("results") or Path(tmp) / "results.json")
        options["results"] = str(results)
        cmd = command(mode, nproc, **options)
        # one thread per rank unless OMP_NUM_THREADS is set, as torchrun does
        return run_for_results(cmd, results, env, echo, timeout, "training", mode != "single")


@not_input("the results JSON of the training it just ran")
def run_for_results(
    cmd: list[str],
    results: Path,
    env: dict[str, str] | None,
    echo: bool,
    timeout: float | None,
    what: str,
    one_thread: bool = True,
) -> dict[str, Any]:
    """Run ``cmd`` with this checkout's ``zeus_nb`` first on the path; the JSON it writes.

    ``one_thread`` starts each process with the threads of a small model (one; ranks share the
    CPU cores) unless ``OMP_NUM_THREADS`` is set; ``env``
    adds or overrides variables. A non-zero exit or a missing results file is
    :class:`TrainingFailed` quoting the output's last lines.
    """
    run_env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parents[2])
    run_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (package_root, run_env.get("PYTHONPATH")) if p
    )
    if one_thread:
        thread_environment(run_env)  # the user's OMP_NUM_THREADS stays
    run_env.update(env or {})
    rc, tail = run_streaming(cmd, run_env, echo=echo, timeout=timeout)
    if rc != 0 or not results.is_file():
        # The first line says what failed and why; the output follows only when it was not
        # shown already (echo), so a report that keeps one line gets the cause, not a dump.
        details = f"command: {' '.join(cmd)}" + ("" if echo else "\n" + "\n".join(tail))
        status = f"exit status {rc}" if rc != 0 else "no results file"
        raise TrainingFailed(f"{what} failed ({status}): {failure_cause(tail)}\n{details}")
    return read_json(results, "training results file")


# A line our error boundary prints (``zeus_nb.train.dp: error: ...``), possibly with torchrun's
# ``[rank1]:`` prefix, and the last line of a Python traceback (``SomeError: message``).
_OUR_LINE = re.compile(
    r"^(?:\[rank\d+\]:\s*)?((?:zeus_nb[\w.]*|zeus-nb[^:]*): (?:internal )?error.*)$"
)
_EXCEPTION_LINE = re.compile(
    r"^(?:\[rank\d+\]:\s*)?((?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Failed|Interrupt)"
    r"\b:?.*)$"
)
_LAUNCHER_ERRORS = ("ChildFailedError",)  # torchrun's summary of its workers: not the cause


def failure_cause(lines: list[str]) -> str:
    """The line of a failed run's output that says why: the first error our boundary printed
    (one per rank), else the last exception a traceback ended in that is not torchrun's own
    summary, else the last line; "no output" when there is none."""
    for line in lines:
        m = _OUR_LINE.match(line.strip())
        if m:
            return " ".join(m.group(1).split())
    for line in reversed(lines):
        m = _EXCEPTION_LINE.match(line.strip())
        if m and not any(name in m.group(1) for name in _LAUNCHER_ERRORS):
            return " ".join(m.group(1).split())
    rest = [ln.strip() for ln in lines if ln.strip()]
    return rest[-1] if rest else "no output"


def run_streaming(
    cmd: list[str], env: dict[str, str], *, echo: bool = True, timeout: float | None = None
) -> tuple[int, list[str]]:
    """Run ``cmd``, echoing its merged output line by line; (exit status, last 200 lines).

    The output is read on a helper thread and printed from this one (so it lands in the calling
    notebook cell), which leaves this thread free to enforce ``timeout`` even when the child (or
    a torchrun worker) hangs with its stdout open. The child leads its own process group, so a
    timeout or an interrupt stops every process it started. A forkrun job runs in the launcher
    kept for this process's jobs (:mod:`zeus_nb.train.launcher`).
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    tail: deque[str] = deque(maxlen=200)
    try:
        rc = launcher.stream(cmd, env, tail, echo, deadline)
    except launcher.Overran:
        raise TrainingTimedOut(
            f"training did not finish within {timeout:g} s and was stopped: {' '.join(cmd)}\n"
            + "\n".join(tail)
        ) from None
    return rc, list(tail)
