"""Start a training entry point from Python or a notebook and get its results back.

DDP and FSDP need one process per GPU, which a notebook kernel cannot be, so :func:`launch` runs
``python -m torch.distributed.run --standalone --nproc_per_node N -m zeus_nb.train.<mode>`` (or
``python -m zeus_nb.train.single``) as a subprocess, echoes its output line by line into the cell,
and returns the results JSON as a dictionary.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections import deque
from dataclasses import fields
from pathlib import Path
from typing import Any

from zeus_nb.errors import ZeusNbError
from zeus_nb.train import MODES

_OFF_SWITCHES = {
    "power_limit_optimizer": "--no-power-limit-optimizer",
    "adaptive": "--exhaustive",
    "progress": "--no-progress",
}


class TrainingFailed(ZeusNbError):
    """The training subprocess exited with an error."""


def command(mode: str, nproc: int = 1, **options: Any) -> list[str]:
    """The command line that runs ``mode`` with ``options`` (TrainConfig field names)."""
    from zeus_nb.train.common import TrainConfig

    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if nproc < 1:
        raise ValueError(f"nproc must be >= 1, got {nproc}")
    known = {f.name: f for f in fields(TrainConfig)}
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ValueError(f"unknown training options {unknown}; see TrainConfig for the fields")
    if mode != "single" and "gpu" in options:
        raise ValueError("gpu= applies to single-process runs; DDP/FSDP use one GPU per rank")
    TrainConfig(**options)  # validate values here, with a clear error, not in the subprocess
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
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        str(nproc),
        "-m",
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
        timeout: seconds before the run is stopped.
        **options: :class:`~zeus_nb.train.common.TrainConfig` fields, e.g. ``data="synthetic",
            backend="sim", epochs=2``. The progress bar is off unless ``progress=True``.
    """
    options.setdefault("progress", False)
    with tempfile.TemporaryDirectory(prefix="zeus-nb-train-") as tmp:
        results = Path(options.get("results") or Path(tmp) / "results.json")
        options["results"] = str(results)
        cmd = command(mode, nproc, **options)
        run_env = dict(os.environ)
        package_root = str(Path(__file__).resolve().parents[2])
        run_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (package_root, run_env.get("PYTHONPATH")) if p
        )
        run_env.update(env or {})
        tail: deque[str] = deque(maxlen=30)
        with subprocess.Popen(
            cmd,
            env=run_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        ) as proc:
            try:
                for line in proc.stdout:
                    tail.append(line.rstrip("\n"))
                    if echo:
                        print(line, end="", flush=True)
                rc = proc.wait(timeout=timeout)
            except (subprocess.TimeoutExpired, KeyboardInterrupt):
                proc.terminate()  # torchrun forwards SIGTERM to its workers
                proc.wait()
                raise
        if rc != 0 or not results.is_file():
            raise TrainingFailed(
                f"training exited with status {rc}: {' '.join(cmd)}\n" + "\n".join(tail)
            )
        return json.loads(results.read_text())
