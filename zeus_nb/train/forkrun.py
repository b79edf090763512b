"""``python -m zeus_nb.train.forkrun --nproc_per_node N MODULE ARGS...``: a torchrun job whose
ranks are forked from one process that imported PyTorch once.

Each rank ``torchrun`` starts is a new interpreter that imports PyTorch, ``torch.distributed`` and
the entry point (PyTorch's pipelining imports ``torch._dynamo``, and so does an optimizer's first
parameter group): about 6 s of CPU a rank on this project's 2-core machines, most of what a short
run from a notebook costs. Here torch.distributed's own elastic launcher, the one ``torchrun
--standalone`` runs (:func:`torch.distributed.launcher.api.elastic_launch`), starts the ranks with
the ``forkserver`` start method, and the fork server imports those modules before it forks
(:func:`multiprocessing.set_forkserver_preload`). A rank runs the same code as under torchrun,
with the same environment (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``...), inside
the same error boundary. The fork server is a fresh single-threaded interpreter that opens no GPU,
so each rank opens CUDA and NVML itself, as under torchrun.

:func:`zeus_nb.train.launch.launch` (``dp``, ``fsdp``) and
:func:`zeus_nb.train.pipeline.launch.launch` run their jobs this way, through a launcher kept
for the process that launches them (``--serve``, :mod:`zeus_nb.train.launcher`): its fork server
imports every entry point's modules once and forks the ranks of each later job too. From a shell
or a cluster script, run the same modules under ``torchrun``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import multiprocessing
import os
import select
import sys
import uuid

from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.launcher.api import LaunchConfig, elastic_launch

from zeus_nb.inputs.args import Parser, count
from zeus_nb.train import cli
from zeus_nb.train.launcher import IDLE_EXIT
from zeus_nb.train.pipeline import trainer
from zeus_nb.utils.boundary import run_main

log = logging.getLogger(__name__)

# The entry points, and what their ranks import beyond what all do (COMMON): the fork server
# imports these once. Not this module itself: a rank runs it as its main module first (as
# multiprocessing does with the main module of the process that started it), which Python warns
# about when it was imported already.
ENTRIES: dict[str, tuple[str, ...]] = {
    "zeus_nb.train.dp": ("torch.nn.parallel", "torchvision"),
    "zeus_nb.train.fsdp": ("torch.distributed.fsdp", "torchvision"),
    "zeus_nb.train.pipeline": ("torch.distributed.pipelining",),
}
MODULE = "zeus_nb.train.forkrun"
PROG = MODULE  # the name its error lines begin with
COMMON = (
    "torch",
    "torch._dynamo",
    "torch.distributed",
    "torch.distributed.launcher.api",
    "zeus_nb.train.cli",
    "zeus_nb.train.pipeline.trainer",
)


def rank(module: str, argv: list[str]) -> None:
    """One rank of ``module``'s job (the function each forked process runs). It returns, rather
    than leaving as the torchrun entry points do, so that the launcher gets its result; the
    fork server's children end without interpreter teardown anyway."""
    if module == "zeus_nb.train.pipeline":
        code = trainer.rank_main(argv)
    else:
        code = cli.rank_main(module.rsplit(".", 1)[1], argv)
    if code:
        raise SystemExit(code)  # the rank's exit status, as under torchrun


def parser() -> argparse.ArgumentParser:
    p = Parser(
        prog=PROG,
        description="torchrun --standalone for zeus-nb's entry points, ranks forked from a "
        "process that imported PyTorch once.",
    )
    p.add_argument("--nproc_per_node", "--nproc-per-node", type=count(1, 1024), required=True)
    p.add_argument("module", choices=sorted(ENTRIES), help="the entry point to run")
    p.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    return p


def run(nproc: int, module: str, argv: list[str], every_entry: bool = False) -> int:
    """``module``'s job in ``nproc`` forked ranks; 0, or 1 when a rank failed (as torchrun).

    The fork server starts with this process's first job and imports what its ranks need (with
    ``every_entry``, what any entry point's need: :func:`serve`); later jobs fork from it too."""
    extra = [name for m in (ENTRIES if every_entry else [module]) for name in ENTRIES[m]]
    multiprocessing.set_forkserver_preload(list(dict.fromkeys([*COMMON, *extra])))
    config = LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=nproc,
        run_id=str(uuid.uuid4()),
        rdzv_backend="c10d",
        rdzv_endpoint="localhost:0",  # torchrun --standalone: a free port on this machine
        max_restarts=0,
        monitor_interval=0.1,
        start_method="forkserver",
    )
    # the ranks run this module's `rank` by its import name (under `python -m` this file is
    # `__main__`, which a forked rank would not find)
    entry = importlib.import_module(MODULE).rank
    try:
        elastic_launch(config, entry)(module, argv)
    except ChildFailedError as e:
        # each failed rank printed its own error line already; this is torchrun's summary
        log.error("%s", e.format_msg())
        return 1
    return 0


def serve(token: str, idle_s: float) -> int:
    """Run jobs as they come, one a line of standard input (a JSON list of this command's
    arguments), each ended by a line ``<token> <exit status>``, until the input closes (0) or
    no job came for ``idle_s`` seconds (:data:`~zeus_nb.train.launcher.IDLE_EXIT`).

    The process's environment and working directory are every job's (the launcher that sends
    them starts a new server for another). The fork server imports every entry point's modules,
    so that each job, whatever its entry point, forks its ranks from it."""
    fd, pending = sys.stdin.fileno(), b""
    while True:
        while b"\n" not in pending:
            if not select.select([fd], [], [], idle_s)[0]:
                return IDLE_EXIT
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return 0
            pending += chunk
        line, pending = pending.split(b"\n", 1)
        try:
            code = run_main(PROG, lambda args: job(args, every_entry=True), json.loads(line))
        except SystemExit as e:  # the parser's usage errors end a job, never the server
            code = e.code if isinstance(e.code, int) else 2
        sys.stderr.flush()
        print(f"{token} {code}", flush=True)


def job(args: list[str], every_entry: bool = False) -> int:
    """One job from its command-line arguments (:func:`parser`)."""
    ns = parser().parse_args(args)
    return run(ns.nproc_per_node, ns.module, ns.args, every_entry)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) == 3 and args[0] == "--serve":
        return serve(args[1], float(args[2]))
    return run_main(PROG, job, argv)


if __name__ == "__main__":
    raise SystemExit(main())
