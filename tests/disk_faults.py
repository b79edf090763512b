"""A full file system for the fault tests: a small tmpfs where this machine lets us mount one."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def mount_tiny_tmpfs(folder: Path) -> bool:
    """Mount a 64 KiB tmpfs on ``folder`` (root only); whether it worked."""
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], capture_output=True
    )
    return done.returncode == 0


def fill(folder: Path, name: str = "filler") -> Path:
    """Fill the file system of ``folder`` with one file; returns it."""
    filler = folder / name
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"x" * 512)
    except OSError:
        pass
    finally:
        os.close(fd)
    return filler
