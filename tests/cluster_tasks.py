"""Point functions the cluster tests run on Dask workers (importable there by module name)."""

from __future__ import annotations

import os
import time
from pathlib import Path


def slow_square(point: dict) -> dict:
    """Sleep, then return the square and which worker process ran it."""
    if point.get("log"):
        with open(point["log"], "a") as f:
            f.write(f"{point['x']} {os.getpid()}\n")
    time.sleep(point.get("seconds", 1.0))
    return {"x": point["x"], "square": point["x"] ** 2, "pid": os.getpid()}


def die_if_poisoned(point: dict) -> dict:
    """Kill the worker process running a poisoned point (every try); others just finish."""
    with open(point["log"], "a") as f:
        f.write(f"{point['x']}\n")
    if point.get("poison"):
        time.sleep(0.5)
        os._exit(1)
    time.sleep(0.2)
    return {"x": point["x"]}


def visible_gpu(_point) -> str:
    return os.environ.get("CUDA_VISIBLE_DEVICES", "")


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


class SleepyTrain:
    """``train_fn`` that steps the simulated GPU, takes real time, and reaches 1.0 at epoch 2.

    Each call logs "batch_size epoch pid" so tests can count where and how often points ran.
    """

    steps = 100
    epochs_to_target = 2

    def __init__(self, log: str, seconds: float = 0.5):
        self.log = log
        self.seconds = seconds

    def __call__(self, batch_size: int, epoch: int) -> float:
        from zeus_nb import device

        with open(self.log, "a") as f:
            f.write(f"{batch_size} {epoch} {os.getpid()}\n")
        device.step(self.steps, batch_size=batch_size)
        time.sleep(self.seconds)
        return 1.0 if epoch + 1 >= self.epochs_to_target else 0.0
