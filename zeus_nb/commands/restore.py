"""zeus-nb restore"""

from __future__ import annotations

import errno
from pathlib import Path

from zeus_nb.device.guard import state_dir
from zeus_nb.device.recovery import restore_from_state_files
from zeus_nb.inputs.args import nonempty


def register(sub) -> None:
    p = sub.add_parser(
        "restore",
        help="put GPUs back at their original power limits after a crashed optimizer run",
        description="Read the state files that power-limit optimizers write before changing a "
        "limit, and restore the recorded limits (after SIGKILL, a crash or a power cut).",
    )
    p.add_argument(
        "--state-dir",
        type=nonempty("path"),
        default=None,
        help="default: $ZEUS_NB_STATE_DIR or the cache",
    )
    p.add_argument(
        "--force", action="store_true", help="also restore GPUs of processes still running"
    )
    p.set_defaults(func=run)


def run(args) -> int:
    folder = Path(args.state_dir).expanduser() if args.state_dir else state_dir()
    if folder.exists() and not folder.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "Not a directory", str(folder))
    results = restore_from_state_files(folder, force=args.force)
    if not results:
        print(f"nothing to restore (no state files in {folder})")
        return 0
    for r in results:
        print(f"{r.action}: {r.path.name}: {r.detail}")
    return 1 if any(r.action == "failed" for r in results) else 0
