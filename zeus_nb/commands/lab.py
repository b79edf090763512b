"""zeus-nb lab: copy the notebooks if needed and open JupyterLab on them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from zeus_nb.commands.notebooks import (
    DEFAULT_DIR,
    add_solutions_flag,
    copy_notebooks,
    print_report,
)
from zeus_nb.inputs.args import nonempty


def register(sub) -> None:
    p = sub.add_parser(
        "lab",
        help="copy the notebooks (if needed) and start JupyterLab in their folder",
        description=(
            "Copy the notebooks into DIR as `zeus-nb notebooks` does (the student edition unless "
            "--solutions; never overwriting ones you edited), then start JupyterLab with DIR as "
            "its root folder. Arguments after `--` go to JupyterLab, e.g. "
            "`zeus-nb lab -- --port 9999 --no-browser`. Run as root (a container), it passes "
            "JupyterLab's --allow-root."
        ),
    )
    p.add_argument(
        "dir", nargs="?", type=nonempty("path"), default=DEFAULT_DIR, help=f"./{DEFAULT_DIR}"
    )
    p.add_argument(
        "jupyter_args", nargs="*", type=nonempty("text"), help="arguments for JupyterLab, after --"
    )
    add_solutions_flag(p)
    p.set_defaults(func=run)


STOP_SECONDS = 20.0  # how long JupyterLab may take to shut down before it is killed


def launch(argv: list[str], cwd: Path) -> int:
    """Run JupyterLab in the foreground until the user stops it; its exit status.

    Stopping zeus-nb stops JupyterLab: SIGTERM and SIGHUP (``kill``, a closed terminal, a
    container stop) are passed on to it, and after Ctrl-C (which reaches JupyterLab too) zeus-nb
    waits for it, so no server is left running without its parent.
    """
    proc = subprocess.Popen(argv, cwd=cwd)

    def forward(signum, _frame) -> None:
        if proc.poll() is None:
            proc.send_signal(signum)

    handled = (signal.SIGTERM, signal.SIGHUP)
    main = threading.current_thread() is threading.main_thread()
    previous = {s: signal.signal(s, forward) for s in handled} if main else {}
    try:
        try:
            return proc.wait()
        except KeyboardInterrupt:
            _stop(proc)
            return 0
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if proc.poll() is None:  # an error in zeus-nb itself: never leave the server behind
            _stop(proc)


def _stop(proc: subprocess.Popen) -> None:
    """Wait (bounded) for JupyterLab to finish; terminate, then kill it if it does not."""
    for action in (None, proc.terminate, proc.kill):
        if action is not None and proc.poll() is None:
            action()
        try:
            proc.wait(timeout=STOP_SECONDS)
            return
        except subprocess.TimeoutExpired:
            continue
        except KeyboardInterrupt:  # a second Ctrl-C: stop waiting politely
            continue


def run(args) -> int:
    jupyter_args = list(args.jupyter_args)
    if args.dir.startswith("-"):  # `zeus-nb lab -- --port 9999`: argparse took --port for DIR
        jupyter_args.insert(0, args.dir)
        args.dir = DEFAULT_DIR
    dest = Path(args.dir).resolve()
    print_report(copy_notebooks(dest, solutions=args.solutions), dest, args.solutions)
    argv = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={dest}", *jupyter_args]
    if _as_root() and "--allow-root" not in argv:
        # JupyterLab refuses root without it; containers run as root, and so may a lab machine
        argv.append("--allow-root")
    return launch(argv, dest)


def _as_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0
