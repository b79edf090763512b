"""What the three entry points share: ``python -m zeus_nb.train.<mode>`` and ``<mode>.train()``."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from typing import Any

from zeus_nb.inputs.env import env
from zeus_nb.train.config import TrainConfig, config_from_args, with_overrides
from zeus_nb.train.loop import run
from zeus_nb.utils.boundary import run_main

log = logging.getLogger(__name__)


def trainer(mode: str) -> Callable[..., dict[str, Any]]:
    """The ``train(config=None, **overrides)`` function of ``zeus_nb.train.<mode>``."""

    def train(config: TrainConfig | None = None, **overrides: Any) -> dict[str, Any]:
        """Run training in this process; keyword overrides replace fields of ``config``."""

        return run(mode, with_overrides(config, overrides))

    train.__qualname__ = train.__name__ = "train"
    train.__module__ = f"zeus_nb.train.{mode}"
    return train


def show_progress_lines() -> None:
    """The command line shows the training's INFO lines (rank 0's progress) on stderr."""
    package = logging.getLogger("zeus_nb")
    if not package.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        package.addHandler(handler)
    if package.level == logging.NOTSET or package.level > logging.INFO:
        package.setLevel(logging.INFO)


def rank_main(mode: str, argv: list[str] | None = None) -> int:
    """Train inside the one error boundary (:mod:`zeus_nb.utils.boundary`): errors that say
    what to do are one line naming the input, exit status 2. Returns the exit status."""

    show_progress_lines()

    def train_here(args: list[str]) -> int:
        run(mode, config_from_args(mode, args))
        return 0

    return run_main(f"zeus_nb.train.{mode}", train_here, argv)


def main(mode: str, argv: list[str] | None = None) -> int:
    """``python -m zeus_nb.train.<mode>`` (under torchrun for ``dp`` and ``fsdp``)."""

    code = rank_main(mode, argv)
    if code == 0 and mode != "single" and env("LOCAL_RANK") is not None:
        # Results are written, limits restored and the process group is gone. torch's C++
        # threads can still abort a finished gloo worker during interpreter teardown
        # ("terminate called without an active exception"), turning a good run into a
        # failure under torchrun, so a worker that finished leaves without that teardown.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return code
