"""zeus-nb lab: copy the notebooks if needed and open JupyterLab on them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from zeus_nb.commands.notebooks import (
    DEFAULT_DIR,
    add_solutions_flag,
    copy_notebooks,
    print_report,
)


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
    p.add_argument("dir", nargs="?", default=DEFAULT_DIR, help=f"default: ./{DEFAULT_DIR}")
    p.add_argument("jupyter_args", nargs="*", help="arguments for JupyterLab, after --")
    add_solutions_flag(p)
    p.set_defaults(func=run)


def launch(argv: list[str], cwd: Path) -> int:
    """Run JupyterLab in the foreground until the user stops it; its exit status."""
    try:
        return subprocess.call(argv, cwd=cwd)
    except KeyboardInterrupt:  # Ctrl-C reaches JupyterLab too, which shuts down by itself
        return 0


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
